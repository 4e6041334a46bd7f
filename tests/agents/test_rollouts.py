"""Evaluation rollouts: the vmapped, jitted scan equals a naive Python loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agents_testlib import TINY

from privrl_jax import agents, envs
from privrl_jax.agents._rollouts import rollout_returns
from privrl_jax.data import Transitions
from privrl_jax.envs._reference import reference_returns


def naive_returns(key, agent_state, act, env, env_params, num_episodes, num_steps):
    """One episode at a time, one (jitted) env.step call at a time, stopping at done."""
    act = jax.jit(act)
    step = jax.jit(env.step)
    returns = []
    for ep_key in jax.random.split(key, num_episodes):
        k_reset, k_steps = jax.random.split(ep_key)
        obs, state = env.reset(k_reset, env_params)
        total = 0.0
        for k in jax.random.split(k_steps, num_steps):
            out = step(k, state, act(agent_state, obs), env_params)
            obs, state, reward, done = out[0], out[1], out[2], out[3]
            if len(out) == 6:  # gymnax >= 1.0: terminated, truncated
                done = jnp.logical_or(out[3], out[4])
            total += float(reward)
            if bool(done):
                break
        returns.append(total)
    return np.array(returns)


def _agent_state(env, env_params, act_dim, obs_dim, max_action):
    """An untrained TD3+BC policy (a fixed, non-trivial deterministic function)."""
    agent = agents.make_agent("td3bc", max_action=max_action, **TINY)
    key = jax.random.key(0)

    fake = Transitions(
        observations=jax.random.normal(key, (32, obs_dim)),
        actions=jnp.zeros((32, act_dim)),
        rewards=jnp.zeros((32,)),
        next_observations=jnp.zeros((32, obs_dim)),
        terminals=jnp.zeros((32,)),
        timeouts=jnp.zeros((32,)),
    )
    return agent, agent.init(jax.random.key(1), fake)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize(
    "env_name, act_dim, obs_dim, max_action",
    [
        # the maze's rollouts are also checked by the evaluate test below
        pytest.param("maze2d-umaze", 2, 4, 1.0, marks=pytest.mark.slow),
        ("Pendulum-v1", 1, 3, 2.0),
    ],
)
def test_rollout_returns_equal_a_python_loop(env_name, act_dim, obs_dim, max_action):
    # A short time limit (12) inside a longer scan (15) checks the masking after done.
    env, params = envs.make(env_name, max_steps_in_episode=12)
    agent, state = _agent_state(env, params, act_dim, obs_dim, max_action)
    key = jax.random.key(7)
    fast = rollout_returns(
        key,
        state,
        act=agent.act,
        env=env,
        env_params=params,
        num_episodes=3,
        num_steps=15,
    )
    slow = naive_returns(key, state, agent.act, env, params, 3, 15)
    np.testing.assert_allclose(np.asarray(fast), slow, rtol=1e-5, atol=1e-4)


def test_evaluate_adds_normalised_scores_for_maze_tasks():
    env, params = envs.make("maze2d-umaze", max_steps_in_episode=10)
    agent, state = _agent_state(env, params, 2, 4, 1.0)
    res = agents.evaluate(
        jax.random.key(0),
        state,
        act=agent.act,
        env=env,
        env_params=params,
        num_episodes=4,
        env_name="maze2d-umaze",
    )
    r_random, r_expert = reference_returns("maze2d-umaze")
    np.testing.assert_allclose(
        res["scores"],
        100 * (res["returns"] - r_random) / (r_expert - r_random),
        rtol=1e-5,
    )
    assert res["returns"].shape == (4,)
    assert res["score_mean"] == pytest.approx(float(np.mean(res["scores"])), rel=1e-6)


def test_evaluate_without_reference_returns_gives_raw_returns_only():
    env, params = envs.make("Pendulum-v1", max_steps_in_episode=5)
    agent, state = _agent_state(env, params, 1, 3, 2.0)
    res = agents.evaluate(
        jax.random.key(0),
        state,
        act=agent.act,
        env=env,
        env_params=params,
        num_episodes=2,
        env_name="Pendulum-v1",
    )
    assert "scores" not in res and res["returns"].shape == (2,)
    with pytest.raises(ValueError, match="num_episodes=0"):
        agents.evaluate(
            jax.random.key(0),
            state,
            act=agent.act,
            env=env,
            env_params=params,
            num_episodes=0,
        )
