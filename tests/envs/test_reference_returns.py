"""Normalised scores and the stored reference returns."""

import jax
import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs._expert import make_waypoint_controller, waypoint_action
from privrl_jax.envs._reference import MEASURED_D4RL_RETURNS, reference_returns
from privrl_jax.envs._registry import D4RL_MAZE_ENVS


def test_normalized_score_endpoints_and_shape():
    for name in envs.MAZE_ENVS:
        r_random, r_expert = reference_returns(name)
        assert r_expert > r_random
        scores = envs.normalized_score(name, np.array([[r_random, r_expert]]))
        assert scores.shape == (1, 2)
        np.testing.assert_allclose(scores, [[0.0, 100.0]], atol=1e-4)
    r_random, r_expert = reference_returns("maze2d-umaze")
    mid = (r_random + r_expert) / 2
    np.testing.assert_allclose(
        envs.normalized_score("maze2d-umaze-legacy", mid), 50.0, rtol=1e-5
    )


@pytest.mark.parametrize(
    "name, r_random, r_expert",
    [  # D4RL's REF_MIN_SCORE / REF_MAX_SCORE (d4rl/infos.py)
        ("maze2d-umaze-v1", 23.85, 161.86),
        ("maze2d-medium-v1", 13.13, 277.39),
        ("maze2d-large-v1", 6.7, 273.99),
        ("maze2d-umaze-dense-v1", 68.537689, 193.66285642381482),
        ("maze2d-medium-dense-v1", 44.264742, 297.4552547777125),
        ("maze2d-large-dense-v1", 30.569041, 303.4857382709002),
    ],
)
def test_v1_tasks_use_d4rls_published_references(name, r_random, r_expert):
    assert reference_returns(name) == (r_random, r_expert)
    scores = envs.normalized_score(name, [r_random, r_expert, 2 * r_expert - r_random])
    np.testing.assert_allclose(scores, [0.0, 100.0, 200.0], rtol=1e-5, atol=1e-4)
    measured = MEASURED_D4RL_RETURNS[name]
    assert measured[0] < measured[1]


def test_normalized_score_unknown_env():
    with pytest.raises(ValueError, match="no reference returns.*maze2d-umaze"):
        envs.normalized_score("CartPole-v1", 10.0)


def _expert(controller, goal):
    def policy(key, obs):
        return waypoint_action(controller, key, obs, goal)

    return policy


def _random(key, obs):
    return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)


def test_stored_expert_reference_reproduces():
    env, params = envs.make("maze2d-umaze")
    controller = make_waypoint_controller(params)
    returns = envs.episode_returns(
        jax.random.key(123), env, params, _expert(controller, params.goal), 100, 300
    )
    # 1000-episode std of the expert is ~6.8, so 100 episodes have se ~0.7.
    np.testing.assert_allclose(
        float(returns.mean()), reference_returns("maze2d-umaze")[1], atol=3.0
    )
    np.testing.assert_allclose(
        float(envs.normalized_score("maze2d-umaze", returns).mean()), 100, atol=2
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in envs.MAZE_ENVS if n not in D4RL_MAZE_ENVS])
def test_stored_references_reproduce_with_a_new_seed(name):
    env, params = envs.make(name)
    length = int(params.max_steps_in_episode)
    controller = make_waypoint_controller(params)
    r_random, r_expert = reference_returns(name)
    key_r, key_e = jax.random.split(jax.random.key(7))
    random_returns = np.asarray(
        envs.episode_returns(key_r, env, params, _random, 1000, length)
    )
    expert_returns = np.asarray(
        envs.episode_returns(
            key_e, env, params, _expert(controller, params.goal), 1000, length
        )
    )
    # Two independent 1000-episode means differ by < 5 combined standard errors.
    se = random_returns.std() / np.sqrt(1000)
    assert abs(random_returns.mean() - r_random) < 5 * np.sqrt(2) * se
    se = expert_returns.std() / np.sqrt(1000)
    assert abs(expert_returns.mean() - r_expert) < 5 * np.sqrt(2) * se + 1e-3


def test_episode_returns_counts_until_done():
    # With a 5-step limit and a constant reward of 1 per step (dense reward is
    # exp(-d) <= 1, so use the sparse reward with the goal radius covering the maze).
    env, params = envs.make("maze2d-umaze", max_steps_in_episode=5, goal_radius=100.0)
    returns = envs.episode_returns(jax.random.key(0), env, params, _random, 8, 12)
    np.testing.assert_array_equal(returns, 5.0)
