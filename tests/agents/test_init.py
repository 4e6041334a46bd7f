"""The agents' initial parameters follow CORL's (PyTorch `nn.Linear`) distribution.

CORL's networks (`algorithms/offline/{td3_bc,iql,edac}.py`) are `nn.Linear` layers,
whose default init is kernel ~ kaiming_uniform(a=sqrt(5)) and bias ~
U(+-1/sqrt(fan_in)); EDAC overrides some layers (see `agents._networks`). Each layer
is checked against its bound, and a large layer's empirical moments against the
closed form of U(-b, b): mean 0, variance b^2 / 3.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agents_testlib import bandit_dataset
from scipy import stats

from privrl_jax import agents
from privrl_jax.agents import _networks

OBS, ACT, HIDDEN = 2, 2, (48, 64)


def torch_linear_bound(fan_in: int) -> float:
    """kaiming_uniform(a=sqrt(5)): gain sqrt(2 / (1 + a^2)) times sqrt(3 / fan_in)."""
    gain = math.sqrt(2.0 / (1.0 + 5.0))
    return gain * math.sqrt(3.0 / fan_in)


def assert_uniform_within(x, bound: float, what: str) -> None:
    """All |x| <= bound, and max |x| near bound (n i.i.d. U(-b, b) draws have
    max |x| < b (1 - 10/n) with probability (1 - 10/n)^n < e^-10)."""
    x = np.abs(np.asarray(x)).ravel()
    assert x.max() <= bound * (1 + 1e-6), f"{what}: max {x.max()} > bound {bound}"
    assert x.max() >= bound * (1 - 10 / x.size), f"{what}: max {x.max()} << {bound}"


def layers(params):
    """The Dense layers of a network in order: [(kernel, bias)]."""
    mlp = params["params"].get("MLP_0", params["params"])  # a network or an MLP
    return [
        (mlp[f"Dense_{i}"]["kernel"], mlp[f"Dense_{i}"]["bias"])
        for i in range(len(mlp))
    ]


def init_state(algo):
    data = bandit_dataset(jax.random.key(0), n=64)
    agent = agents.make_agent(algo, hidden_dims=HIDDEN, normalize_states=False)
    return agent.init(jax.random.key(3), data)


def test_torch_linear_bound_is_one_over_sqrt_fan_in():
    for fan_in in (1, 6, 256, 1000):
        assert torch_linear_bound(fan_in) == pytest.approx(1 / math.sqrt(fan_in))


@pytest.mark.parametrize(
    "algo,nets",
    [
        ("td3bc", ("actor_params", "critic_params")),
        ("iql", ("actor_params", "critic_params", "value_params")),
    ],
)
@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_td3bc_and_iql_layers_use_the_torch_default(algo, nets):
    state = init_state(algo)
    for net in nets:
        fan_ins = [OBS + ACT if net == "critic_params" else OBS, *HIDDEN]
        for i, ((kernel, bias), fan_in) in enumerate(
            zip(layers(getattr(state, net)), fan_ins, strict=True)
        ):
            b = torch_linear_bound(fan_in)
            assert_uniform_within(kernel, b, f"{algo} {net} layer {i} kernel")
            assert_uniform_within(bias, b, f"{algo} {net} layer {i} bias")
    if algo == "iql":  # CORL's GaussianPolicy: log_std = zeros(act_dim)
        np.testing.assert_array_equal(state.actor_params["params"]["log_std"], 0.0)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_twin_critics_and_targets_start_independent_and_equal():
    state = init_state("td3bc")
    k0, k1 = layers(state.critic_params)[0][0]
    assert not np.allclose(k0, k1)
    jax.tree.map(
        np.testing.assert_array_equal, state.critic_params, state.critic_target_params
    )


def test_edac_layers_follow_corl_overrides():
    state = init_state("edac")
    actor = layers(state.actor_params)
    for i, ((kernel, bias), fan_in) in enumerate(zip(actor[:-1], [OBS, *HIDDEN[:-1]])):
        assert_uniform_within(kernel, torch_linear_bound(fan_in), f"actor {i} kernel")
        np.testing.assert_array_equal(bias, np.float32(0.1))
    assert_uniform_within(actor[-1][0], 1e-3, "actor head kernel")
    assert_uniform_within(actor[-1][1], 1e-3, "actor head bias")
    critic = layers(state.critic_params)
    # CORL's VectorizedLinear: PyTorch's fan_in of an [in, out] weight is `out`.
    for i, ((kernel, bias), fan_out) in enumerate(zip(critic[:-1], HIDDEN)):
        assert_uniform_within(kernel, torch_linear_bound(fan_out), f"critic {i} kernel")
        np.testing.assert_array_equal(bias, np.float32(0.1))
    assert_uniform_within(critic[-1][0], 3e-3, "critic last kernel")
    assert_uniform_within(critic[-1][1], 3e-3, "critic last bias")


def test_large_layer_moments_match_uniform_closed_form():
    fan_in, width, out = 300, 512, 1024
    mlp = _networks.MLP((width,), out)
    params = mlp.init(jax.random.key(0), jnp.zeros((1, fan_in)))
    (k0, b0), (k1, b1) = layers(params)
    for x, fan in ((k0, fan_in), (b0, fan_in), (k1, width), (b1, width)):
        x = np.asarray(x, np.float64).ravel()
        b, n = 1 / math.sqrt(fan), x.size
        # Closed form of U(-b, b): mean 0, var b^2/3, var(x^2) = b^4/5 - b^4/9.
        assert abs(x.mean()) < 5 * b / math.sqrt(3 * n)
        assert abs(x.var() - b**2 / 3) < 5 * b**2 * math.sqrt(4 / 45 / n)
        assert stats.kstest(x, stats.uniform(-b, 2 * b).cdf).pvalue > 1e-3


def test_matches_torch_nn_linear_when_installed():
    torch = pytest.importorskip("torch", reason="torch is in the optional peers extra")
    torch.manual_seed(0)
    lin = torch.nn.Linear(300, 512)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    ours = _networks.MLP((), 512).init(jax.random.key(0), jnp.zeros((1, 300)))
    kernel, bias = layers(ours)[0]
    bound = 1 / math.sqrt(300)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    for theirs, mine in ((w, kernel), (b, bias)):
        assert stats.ks_2samp(theirs.ravel(), np.asarray(mine).ravel()).pvalue > 1e-3
