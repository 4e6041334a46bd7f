"""D4RL-style data collection: consistency of every transition with the env."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import data, envs
from privrl_jax.envs._collect import SOLVE_THRESHOLD, collect_step, init_collect_state
from privrl_jax.envs._expert import make_waypoint_controller
from privrl_jax.envs._maze import maze_dynamics

NUM_ENVS, SIZE = 4, 1998  # not a multiple of NUM_ENVS: the last stream is cut


@pytest.fixture(scope="module")
def dataset():
    return envs.collect_dataset(
        jax.random.key(0), "maze2d-umaze", SIZE, num_envs=NUM_ENVS, chunk_steps=250
    )


def test_shapes_and_dtypes(dataset):
    assert len(dataset) == SIZE
    assert dataset.observations.shape == (SIZE, 4)
    assert dataset.actions.shape == (SIZE, 2)
    for k in data.TRANSITION_FIELDS:
        assert getattr(dataset, k).dtype == jnp.float32
    data.validate_transitions(dataset)  # passes validation as is
    assert float(jnp.abs(dataset.actions).max()) <= 1.0


def test_transitions_follow_the_dynamics_and_the_eval_reward(dataset):
    _, params = envs.make("maze2d-umaze")
    obs, act = dataset.observations, dataset.actions
    pos, vel = jax.vmap(maze_dynamics, (0, 0, 0, None))(
        obs[:, :2], obs[:, 2:], act, params
    )
    np.testing.assert_allclose(
        dataset.next_observations, jnp.concatenate([pos, vel], 1), atol=1e-6
    )
    dist = np.linalg.norm(np.asarray(pos) - np.array([1.0, 1.0]), axis=1)
    np.testing.assert_array_equal(dataset.rewards, (dist <= 0.5).astype(np.float32))
    assert 0 < float(dataset.rewards.sum()) < SIZE


def test_streams_are_contiguous_and_never_reset(dataset):
    # D4RL's maze2d protocol never resets the ball: within a stream, the next row
    # starts where this one ended, even across timeouts (only the goal changes).
    steps = -(-SIZE // NUM_ENVS)
    stream_end = np.zeros(SIZE, bool)
    stream_end[steps - 1 :: steps] = True
    stream_end[-1] = True
    nxt, obs = np.asarray(dataset.next_observations), np.asarray(dataset.observations)
    inner = ~stream_end[:-1]
    np.testing.assert_array_equal(nxt[:-1][inner], obs[1:][inner])
    assert (np.asarray(dataset.timeouts)[stream_end] == 1).all()


def test_timeouts_and_terminals(dataset):
    _, params = envs.make("maze2d-umaze")
    assert float(dataset.terminals.sum()) == 0.0  # maze2d has no terminal states
    _, lengths = data.episode_boundaries(dataset)
    assert lengths.max() <= params.max_steps_in_episode
    # Goal-reached segments dominate: most segments are far shorter than the limit.
    assert len(lengths) > 50 and np.median(lengths) < 50


def test_timeout_rows_reach_the_goal_or_the_time_limit():
    limit = 8
    env, params = envs.make("maze2d-umaze", max_steps_in_episode=limit)
    controller = make_waypoint_controller(params, action_noise=0.5)
    state = init_collect_state(jax.random.key(1), env, params, 8)

    @jax.jit
    def run(state):
        def body(state, k):
            step = jax.vmap(lambda k, s: collect_step(env, params, controller, k, s))
            new_state, t = step(jax.random.split(k, 8), state)
            return new_state, (
                state.goal,
                state.maze.time,
                t.timeouts,
                t.next_observations,
            )

        return jax.lax.scan(body, state, jax.random.split(jax.random.key(2), 100))[1]

    goals, times, timeouts, next_obs = map(np.asarray, run(state))
    reached = np.linalg.norm(next_obs[..., :2] - goals, axis=-1) <= SOLVE_THRESHOLD
    at_limit = times + 1 >= limit
    np.testing.assert_array_equal(timeouts == 1, reached | at_limit)
    assert reached.any() and (at_limit & ~reached).any()  # both causes occur
    # A new goal is drawn exactly after a timeout (continuous goals never repeat).
    changed = (goals[1:] != goals[:-1]).any(-1)
    np.testing.assert_array_equal(changed, timeouts[:-1] == 1)


def test_collection_is_deterministic_in_the_key(dataset):
    again = envs.collect_dataset(
        jax.random.key(0), "maze2d-umaze", SIZE, num_envs=NUM_ENVS, chunk_steps=250
    )
    jax.tree.map(np.testing.assert_array_equal, dataset, again)
    other = envs.collect_dataset(
        jax.random.key(1), "maze2d-umaze", SIZE, num_envs=NUM_ENVS, chunk_steps=250
    )
    assert not np.array_equal(dataset.actions, other.actions)


def test_collect_dataset_errors():
    with pytest.raises(ValueError, match="maze2d"):
        envs.collect_dataset(jax.random.key(0), "CartPole-v1", 10)
    with pytest.raises(ValueError, match="size"):
        envs.collect_dataset(jax.random.key(0), "maze2d-umaze", 0)
    with pytest.raises(ValueError, match="num_envs"):
        envs.collect_dataset(jax.random.key(0), "maze2d-umaze", 10, num_envs=-1)
    with pytest.raises(ValueError, match="unknown env"):
        envs.collect_dataset(jax.random.key(0), "maze2d-tiny", 10)
