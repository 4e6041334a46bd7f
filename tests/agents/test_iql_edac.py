"""IQL's expectile loss and update order, EDAC's diversity loss: closed forms."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agents_testlib import bandit_dataset

from privrl_jax import agents
from privrl_jax.agents import _networks
from privrl_jax.agents._edac import diversity_loss
from privrl_jax.agents._iql import expectile_loss
from privrl_jax.agents._networks import QNetwork


def test_expectile_loss_closed_form():
    diff = jnp.array([1.0, -2.0, 0.5])
    expected = (0.7 * 1.0 + 0.3 * 4.0 + 0.7 * 0.25) / 3
    assert float(expectile_loss(diff, 0.7)) == pytest.approx(expected, rel=1e-6)
    # expectile 0.5 is half the MSE.
    assert float(expectile_loss(diff, 0.5)) == pytest.approx(
        0.5 * float(jnp.mean(diff**2)), rel=1e-6
    )


def test_expectile_loss_minimiser_is_the_expectile():
    # The minimiser v of E[|tau - 1(x < v)| (x - v)^2] is the tau-expectile; for
    # tau > 0.5 it lies above the mean.
    x = jax.random.normal(jax.random.key(0), (4000,))
    grid = jnp.linspace(-1.0, 1.0, 2001)
    losses = jax.vmap(lambda v: expectile_loss(x - v, 0.7))(grid)
    v = float(grid[jnp.argmin(losses)])
    # First-order condition: 0.7 E[(x - v)+] = 0.3 E[(v - x)+].
    pos = float(jnp.mean(jnp.maximum(x - v, 0.0)))
    neg = float(jnp.mean(jnp.maximum(v - x, 0.0)))
    assert 0.7 * pos == pytest.approx(0.3 * neg, abs=2e-3)
    assert v > float(x.mean()) + 0.2


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_diversity_loss_equals_a_naive_per_critic_loop():
    num, batch, obs_dim, act_dim = 3, 5, 2, 2
    critic = QNetwork((8, 8))
    k_p, k_o, k_a = jax.random.split(jax.random.key(0), 3)
    obs = jax.random.normal(k_o, (batch, obs_dim))
    act = jax.random.uniform(k_a, (batch, act_dim), minval=-1, maxval=1)
    params = jax.vmap(lambda k: critic.init(k, obs, act))(jax.random.split(k_p, num))

    grads = np.zeros((num, batch, act_dim))
    for n in range(num):
        p = jax.tree.map(lambda x: x[n], params)
        for b in range(batch):
            grads[n, b] = jax.grad(lambda a: critic.apply(p, obs[b], a))(act[b])
    grads /= np.linalg.norm(grads, axis=-1, keepdims=True) + 1e-10
    naive = np.mean(
        [
            sum(
                grads[i, b] @ grads[j, b]
                for i, j in itertools.permutations(range(num), 2)
            )
            for b in range(batch)
        ]
    ) / (num - 1)
    fast = diversity_loss(critic, params, obs, act)
    assert float(fast) == pytest.approx(naive, rel=1e-5, abs=1e-6)


def test_diversity_loss_bounds():
    # Identical critics: every cosine is 1, so the loss is N(N-1)/(N-1) = N.
    critic = QNetwork((8,))
    obs, act = jnp.ones((4, 2)), jnp.zeros((4, 2))
    one = critic.init(jax.random.key(0), obs, act)
    params = jax.tree.map(lambda x: jnp.stack([x] * 4), one)
    assert float(diversity_loss(critic, params, obs, act)) == pytest.approx(
        4.0, rel=1e-5
    )


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_edac_with_eta_zero_is_sac_n_without_diversity_loss():
    from agents_testlib import bandit_dataset

    data = bandit_dataset(jax.random.key(0), n=32)
    agent = agents.make_agent("edac", eta=0.0, num_critics=3, hidden_dims=(8, 8, 8))
    state = agent.init(jax.random.key(1), data)
    _, metrics = jax.jit(agent.update)(state, data, jax.random.key(2))
    assert float(metrics["diversity_loss"]) == 0.0
    assert jax.tree.leaves(state.critic_params)[0].shape[0] == 3


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_iql_q_target_uses_v_before_its_step():
    # CORL's IQL.train computes next_v = V(s') before V's update; non-terminal data
    # so that V(s') enters the target.
    data = bandit_dataset(jax.random.key(0), n=32)
    data = data.replace(
        terminals=jnp.zeros(32), next_observations=data.observations[::-1]
    )
    agent = agents.make_agent("iql", hidden_dims=(8, 8), normalize_states=False)
    state = agent.init(jax.random.key(1), data)
    _, metrics = agent.update(state, data, jax.random.key(2))
    value = _networks.ValueNetwork((8, 8))
    critic = _networks.QNetwork((8, 8))
    target = data.rewards + 0.99 * value.apply(
        state.value_params, data.next_observations
    )
    q = _networks.apply_ensemble(
        critic, state.critic_params, data.observations, data.actions
    )
    expected = ((q - target) ** 2).mean(1).mean()
    assert float(metrics["critic_loss"]) == pytest.approx(float(expected), rel=1e-5)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize("advantage_from", ["old_v", "new_v"])
def test_iql_actor_loss_uses_the_chosen_v(advantage_from):
    # CORL: exp(beta * (Q_target - V_before)); d3rlpy: V after its step.
    data = bandit_dataset(jax.random.key(0), n=32)
    agent = agents.make_agent(
        "iql", hidden_dims=(8, 8), normalize_states=False, advantage_from=advantage_from
    )
    state = agent.init(jax.random.key(1), data)
    new, metrics = agent.update(state, data, jax.random.key(2))
    value = _networks.ValueNetwork((8, 8))
    critic = _networks.QNetwork((8, 8))
    v_params = new.value_params if advantage_from == "new_v" else state.value_params
    q_t = _networks.apply_ensemble(
        critic, state.critic_target_params, data.observations, data.actions
    ).min(0)
    w = np.minimum(np.exp(3.0 * (q_t - value.apply(v_params, data.observations))), 100)
    mean, log_std = _networks.GaussianPolicy((8, 8), 2).apply(
        state.actor_params, data.observations
    )
    logp = _networks.gaussian_log_prob(mean, log_std, data.actions)
    expected = float(np.mean(w * -np.asarray(logp)))
    assert float(metrics["actor_loss"]) == pytest.approx(expected, rel=1e-5)
    # The other V gives another loss on this data (V moved in the step).
    other = new.value_params if advantage_from == "old_v" else state.value_params
    w2 = np.minimum(np.exp(3.0 * (q_t - value.apply(other, data.observations))), 100)
    assert abs(float(np.mean(w2 * -np.asarray(logp))) - expected) > 1e-4 * abs(expected)


def test_iql_sigmoid_log_std_is_d3rlpys():
    # d3rlpy 2.x NormalPolicy(use_std_parameter=True): -5 + 7 * sigmoid(p), p = 0.
    pol = _networks.GaussianPolicy(
        (4,), 2, log_std_min=-5.0, log_std_max=2.0, log_std_mode="sigmoid"
    )
    obs = jnp.zeros((3, 2))
    params = pol.init(jax.random.key(0), obs)
    _, log_std = pol.apply(params, obs)
    np.testing.assert_allclose(log_std, -1.5, atol=1e-7)
    params["params"]["log_std"] = jnp.array([2.0, -30.0])
    _, log_std = pol.apply(params, obs)
    np.testing.assert_allclose(log_std, [-5 + 7 / (1 + np.exp(-2.0)), -5.0], rtol=1e-6)
    agent = agents.make_agent("iql", hidden_dims=(8, 8), log_std_param="sigmoid")
    state = agent.init(jax.random.key(1), bandit_dataset(jax.random.key(0), n=8))
    assert state.actor_params["params"]["log_std"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("field", "value"), [("log_std_param", "softplus"), ("advantage_from", "v")]
)
def test_iql_variant_fields_are_checked(field, value):
    with pytest.raises(ValueError, match=f"{field}='{value}': expected one of"):
        agents.IQLConfig(**{field: value})
