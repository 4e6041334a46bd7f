"""The shared networks and policy densities (`agents._networks`).

The golden numbers below pin the same key to the same parameters, losses and actions.
They were regenerated from the code after the move to CORL's full initialisation
(PyTorch `nn.Linear` default biases, EDAC's VectorizedLinear kernels) and IQL's
pre-update V(s') target, once `test_init.py` had checked every layer against CORL's
bounds and the uniform closed form; the EDAC actor's sum is unchanged (its init
already was CORL's). The previous numbers pinned zero biases.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agents_testlib import bandit_dataset
from scipy import stats

from privrl_jax import agents
from privrl_jax.agents import _networks

# algo -> (sum |actor params| at init, sum |critic params| at init,
#          critic loss of the 2nd update, actions on 2 observations after 2 updates)
GOLDEN = {
    "td3bc": (
        23.518660843372345,
        48.08890023082495,
        5.494008541107178,
        [
            [-0.3783697187900543, 0.06616952270269394],
            [-0.2821876108646393, 0.11516822129487991],
        ],
    ),
    "iql": (
        23.518660843372345,
        48.08890023082495,
        2.747004270553589,
        [
            [-0.37794744968414307, 0.06366763263940811],
            [-0.2813776731491089, 0.11343911290168762],
        ],
    ),
    "edac": (
        18.423888998804614,
        56.36005474918056,
        6.6386332511901855,
        [
            [-0.00186552491504699, -0.0001893550215754658],
            [-0.002796555869281292, 0.00013640339602716267],
        ],
    ),
}


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize("algo", sorted(GOLDEN))
def test_same_key_gives_the_recorded_parameters_and_outputs(algo):
    actor_sum, critic_sum, critic_loss, actions = GOLDEN[algo]
    data = bandit_dataset(jax.random.key(0), n=64)
    overrides = {"hidden_dims": (8, 8), "normalize_states": False}
    if algo == "edac":
        overrides["num_critics"] = 3
    agent = agents.make_agent(algo, **overrides)
    state = agent.init(jax.random.key(1), data)

    def abs_sum(tree):
        return sum(float(jnp.abs(leaf).sum()) for leaf in jax.tree.leaves(tree))

    assert abs_sum(state.actor_params) == pytest.approx(actor_sum, rel=1e-6)
    assert abs_sum(state.critic_params) == pytest.approx(critic_sum, rel=1e-6)
    update = jax.jit(agent.update)
    for i in range(2):
        state, metrics = update(state, data, jax.random.key(10 + i))
    # Looser than bitwise: another XLA backend may reorder float sums.
    assert float(metrics["critic_loss"]) == pytest.approx(critic_loss, rel=1e-4)
    np.testing.assert_allclose(
        agent.act(state, data.observations[:2]), actions, rtol=1e-3, atol=1e-6
    )


def test_gaussian_log_prob_matches_scipy():
    rng = np.random.default_rng(0)
    mean, log_std, x = rng.normal(size=(3, 5, 4))
    expected = stats.norm.logpdf(x, mean, np.exp(log_std)).sum(-1)
    got = _networks.gaussian_log_prob(jnp.array(mean), jnp.array(log_std), jnp.array(x))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_tanh_gaussian_sample_and_change_of_variables():
    mu = jnp.array([[0.3, -1.0], [0.0, 2.0]])
    log_std = jnp.array([[-0.5, 0.2], [0.0, -1.0]])
    key = jax.random.key(3)
    actions, log_prob = _networks.sample_tanh_gaussian(key, mu, log_std, 2.0)
    # By hand: the same reparameterised u, log N(u) minus the tanh Jacobian.
    u = np.asarray(mu + jnp.exp(log_std) * jax.random.normal(key, mu.shape))
    expected = stats.norm.logpdf(u, mu, np.exp(log_std)).sum(-1) - np.log(
        1.0 - np.tanh(u) ** 2 + 1e-6
    ).sum(-1)
    np.testing.assert_allclose(actions, 2.0 * np.tanh(u), rtol=1e-6)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5)


def test_policies_clamp_log_std_at_their_corl_bounds():
    obs = jnp.zeros((1, 3))
    gauss = _networks.GaussianPolicy((4,), 2)
    params = gauss.init(jax.random.key(0), obs)
    params["params"]["log_std"] = jnp.array([-50.0, 50.0])
    _, log_std = gauss.apply(params, obs)
    np.testing.assert_array_equal(log_std, [-20.0, 2.0])  # CORL's IQL
    tanh_actor = _networks.TanhGaussianActor((4,), 2)
    params = tanh_actor.init(jax.random.key(0), obs)
    params = jax.tree.map(lambda p: p * 0.0 - 1e3, params)  # huge negative head
    _, log_std = tanh_actor.apply(params, jnp.ones((1, 3)))
    assert float(log_std.min()) == -5.0  # CORL's EDAC
