"""TD3+BC specifics: the BC term and the lambda normalisation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agents_testlib import TINY, bandit_dataset

from privrl_jax import agents
from privrl_jax.agents._train import make_train_chunk
from privrl_jax.data import Transitions


def _regression_data(n=256):
    """Data actions are a fixed, smooth function of the state, far from 0."""
    obs = jax.random.normal(jax.random.key(0), (n, 2))
    actions = jnp.tanh(jnp.stack([obs[:, 0] + 0.5, 0.8 * obs[:, 1] - 0.5], axis=-1))
    return Transitions(
        observations=obs,
        actions=actions,
        rewards=jnp.zeros((n,)),
        next_observations=obs,
        terminals=jnp.ones((n,)),
        timeouts=jnp.zeros((n,)),
    )


@pytest.mark.slow  # trains to a fixed point (~25 s on 2 cores)
def test_bc_term_pulls_actions_toward_the_data():
    # alpha = 0 leaves only the BC term: the actor must regress onto the data actions.
    data = _regression_data()
    agent = agents.make_agent("td3bc", alpha=0.0, policy_freq=1, **TINY)
    state = agent.init(jax.random.key(1), data)
    start = float(jnp.mean((agent.act(state, data.observations) - data.actions) ** 2))
    chunk = make_train_chunk(agent, batch_size=64, num_updates=300)
    state, metrics = chunk(state, data, jax.random.key(2))
    end = float(jnp.mean((agent.act(state, data.observations) - data.actions) ** 2))
    assert end < 0.3 * start, (start, end)
    # The reported BC loss falls too (first vs last tenth of the run).
    bc = np.asarray(metrics["bc_loss"])
    assert bc[-30:].mean() < 0.5 * bc[:30].mean()


def test_q_term_is_normalised_by_lambda():
    # actor_loss = -alpha * mean(Q) / mean|Q| + bc, so |actor_loss - bc| <= alpha, with
    # equality when all Q share one sign (here: every reward is negative).
    data = bandit_dataset(jax.random.key(0), n=256)
    alpha = 2.5
    agent = agents.make_agent("td3bc", alpha=alpha, policy_freq=1, **TINY)
    state = agent.init(jax.random.key(1), data)
    chunk = make_train_chunk(agent, batch_size=128, num_updates=200)
    _, metrics = chunk(state, data, jax.random.key(2))
    q_term = np.asarray(metrics["actor_loss"]) - np.asarray(metrics["bc_loss"])
    assert np.all(np.abs(q_term) <= alpha + 1e-4)
    np.testing.assert_allclose(q_term[-20:], alpha, rtol=1e-4)


def test_actor_moves_only_every_policy_freq_updates():
    data = bandit_dataset(jax.random.key(0), n=64)
    agent = agents.make_agent("td3bc", policy_freq=3, **TINY)
    state = agent.init(jax.random.key(1), data)
    chunk = make_train_chunk(agent, batch_size=32, num_updates=6)
    _, metrics = chunk(state, data, jax.random.key(2))
    moved = ~np.isnan(np.asarray(metrics["actor_loss"]))
    np.testing.assert_array_equal(moved, [False, False, True, False, False, True])
