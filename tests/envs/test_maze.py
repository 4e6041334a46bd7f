"""Point-maze dynamics: geometry, no tunnelling, rewards, time limits,
jit/vmap parity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs._maze import (
    LARGE_MAZE,
    MEDIUM_MAZE,
    UMAZE,
    PointMaze,
    maze_dynamics,
    maze_reward,
    parse_layout,
)

MAZES = ["maze2d-umaze", "maze2d-medium", "maze2d-large"]


def _overlaps_wall(positions: np.ndarray, walls: np.ndarray, radius: float, tol: float):
    """Naive reference: does the ball's box [p - r, p + r]^2 overlap any wall square?"""
    wall_cells = np.argwhere(walls).astype(np.float64)  # [K, 2]
    d = np.abs(positions.reshape(-1, 1, 2).astype(np.float64) - wall_cells[None])
    overlap = (d < 0.5 + radius - tol).all(-1)  # [M, K]
    return overlap.any(-1)


@pytest.mark.parametrize(
    "layout, shape, goal, num_free",
    [
        (UMAZE, (5, 5), (1, 1), 7),
        (MEDIUM_MAZE, (8, 8), (6, 6), 26),
        (LARGE_MAZE, (9, 12), (7, 9), 46),
    ],
)
def test_parse_layout(layout, shape, goal, num_free):
    walls, goal_cell = parse_layout(layout)
    assert walls.shape == shape
    assert tuple(goal_cell) == goal
    assert (~walls).sum() == num_free
    assert not walls[goal]


@pytest.mark.parametrize(
    "layout, match",
    [
        ("###\n#O#\n###", "exactly one goal"),
        ("###\n#GX\n###", "only contain"),
        ("####\n#GO\n####", "same length"),
        ("###\nGO#\n###", "border"),
        ("#####\n#G#O#\n#####", "not connected"),
    ],
)
def test_parse_layout_errors(layout, match):
    with pytest.raises(ValueError, match=match):
        parse_layout(layout)


def test_params_reject_tunnelling_speed():
    with pytest.raises(ValueError, match="max_speed"):
        envs.make("maze2d-umaze", max_speed=5.0)


def test_free_motion_closed_form():
    _, params = envs.make("maze2d-large")
    # Centre of a free cell in an open corridor; one small step touches no wall.
    x0, v0, a = jnp.array([3.0, 2.0]), jnp.array([0.3, -0.2]), jnp.array([0.5, -0.25])
    x1, v1 = maze_dynamics(x0, v0, a, params)
    v_expected = (1 - 2.5 * 0.1) * v0 + 0.1 * 10.0 * a
    np.testing.assert_allclose(v1, v_expected, rtol=1e-6)
    np.testing.assert_allclose(x1, x0 + 0.1 * v_expected, rtol=1e-6)


def test_collision_clamps_to_wall_face_and_stops_that_axis():
    _, params = envs.make("maze2d-umaze")
    # umaze: cell (1, 1) is free, (2, 1) is a wall. Move down at full speed.
    x0, v0 = jnp.array([1.2, 1.0]), jnp.array([4.5, 1.0])
    x1, v1 = maze_dynamics(x0, v0, jnp.array([1.0, 0.0]), params)
    np.testing.assert_allclose(x1[0], 1.5 - 0.1, atol=2e-4)  # wall face minus radius
    assert float(x1[0]) < 1.4
    assert float(v1[0]) == 0.0
    # The tangential axis moves freely.
    np.testing.assert_allclose(v1[1], 0.75 * 1.0, rtol=1e-6)
    np.testing.assert_allclose(x1[1], 1.0 + 0.1 * 0.75, rtol=1e-6)


def _uniform(k, vel):
    return jax.random.uniform(k, (2,), minval=-1.0, maxval=1.0)


def _bang_bang(k, vel):
    # Full force in a random corner direction, switched often: hits walls at top speed.
    return jnp.where(jax.random.bernoulli(k, 0.5, (2,)), 1.0, -1.0)


def _push_on(k, vel):
    # Keep accelerating in the direction of travel: rams walls and corners head-on.
    return jnp.where(vel >= 0, 1.0, -1.0)


@jax.jit
def _rollout_positions(params, key):
    """[T + 1, 3 * 16, 2] positions; envs 0-15 uniform, 16-31 bang-bang,
    32-47 push-on."""
    num_envs, num_steps = 48, 300
    policy_ids = jnp.arange(num_envs) // 16
    env = PointMaze("m", UMAZE, 1, False)  # only reset_env is used
    key_reset, key_act = jax.random.split(key)
    _, state = jax.vmap(env.reset_env, (0, None))(
        jax.random.split(key_reset, num_envs), params
    )

    def act(i, k, vel):
        return jax.lax.switch(i, (_uniform, _bang_bang, _push_on), k, vel)

    def body(carry, k):
        pos, vel = carry
        a = jax.vmap(act)(policy_ids, jax.random.split(k, num_envs), vel)
        pos, vel = jax.vmap(maze_dynamics, (0, 0, 0, None))(pos, vel, a, params)
        return (pos, vel), pos

    _, traj = jax.lax.scan(
        body, (state.position, state.velocity), jax.random.split(key_act, num_steps)
    )
    return jnp.concatenate([state.position[None], traj])


@pytest.mark.parametrize("name", MAZES)
def test_no_wall_penetration(name):
    # Random and adversarial actions, at the default constants and at the fastest
    # allowed speed (0.499 cells per step) with a huge force and no damping.
    for overrides in ({}, {"max_speed": 4.99, "force_scale": 100.0, "damping": 0.0}):
        _, params = envs.make(name, **overrides)
        positions = np.asarray(_rollout_positions(params, jax.random.key(0)))
        walls = np.asarray(params.walls)
        assert not _overlaps_wall(positions, walls, 0.1, tol=1e-5).any()
        steps = np.abs(np.diff(positions, axis=0))
        assert steps.max() < 0.5
        # Non-vacuous: the balls travel fast and do touch walls.
        assert steps.max() > 0.35
        assert _overlaps_wall(positions, walls, 0.1, tol=-1e-3).any()


_UMAZE_ENV, _UMAZE_PARAMS = envs.make("maze2d-umaze")


@jax.jit
def _random_rewards(params, key):
    env = _UMAZE_ENV

    def one(k):
        k0, k1 = jax.random.split(k)
        _, state = env.reset(k0, params)

        def body(state, k):
            ka, ks = jax.random.split(k)
            a = jax.random.uniform(ka, (2,), minval=-1, maxval=1)
            _, state, r, _, info = env.step(ks, state, a, params)
            return state, (r, info["final_observation"])

        return jax.lax.scan(body, state, jax.random.split(k1, 100))[1]

    return jax.vmap(one)(jax.random.split(key, 64))


@pytest.mark.parametrize("dense", [False, True])
def test_reward_only_within_goal_radius(dense):
    # `dense` is a traced leaf of the params, so both cases share one compilation.
    params = _UMAZE_PARAMS.replace(dense=dense)
    rewards, final_obs = map(np.asarray, _random_rewards(params, jax.random.key(3)))
    dist = np.linalg.norm(final_obs[..., :2] - np.array([1.0, 1.0]), axis=-1)
    if dense:
        np.testing.assert_allclose(rewards, np.exp(-dist), rtol=1e-5)
    else:
        np.testing.assert_array_equal(rewards, (dist <= 0.5).astype(np.float32))
        assert 0 < rewards.sum() < rewards.size  # both cases occur


def test_maze_reward_boundary():
    _, params = envs.make("maze2d-umaze")
    goal = params.goal
    inside = goal + jnp.array([0.3, 0.39])  # |d| = 0.492
    outside = goal + jnp.array([0.3, 0.41])  # |d| = 0.508
    assert float(maze_reward(inside, goal, params)) == 1.0
    assert float(maze_reward(outside, goal, params)) == 0.0


@pytest.mark.parametrize("length", [7, 300])
def test_episode_length_and_timeouts(length):
    env, params = envs.make("maze2d-umaze", max_steps_in_episode=length)
    num_steps = 2 * length + 3

    @jax.jit
    def run(key):
        k0, k1 = jax.random.split(key)
        obs, state = env.reset(k0, params)

        def body(carry, k):
            _, state = carry
            obs2, state2, _, done, info = env.step(
                k, state, jnp.array([1.0, -1.0]), params
            )
            return (obs2, state2), (
                done,
                info["terminated"],
                info["truncated"],
                state2.time,
                obs2,
                info["final_observation"],
            )

        return jax.lax.scan(body, (obs, state), jax.random.split(k1, num_steps))[1]

    done, terminated, truncated, time, obs, final_obs = map(
        np.asarray, run(jax.random.key(0))
    )
    expected = np.zeros(num_steps, bool)
    expected[length - 1 :: length] = True
    np.testing.assert_array_equal(done, expected)
    np.testing.assert_array_equal(truncated, expected)
    assert not terminated.any()
    np.testing.assert_array_equal(time[expected], 0)  # auto-reset
    np.testing.assert_array_equal(time[~expected] > 0, True)
    # Without reset the returned obs is the final obs; on reset they differ.
    np.testing.assert_array_equal(obs[~expected], final_obs[~expected])
    assert (np.abs(obs[expected] - final_obs[expected]).max(-1) > 0).all()


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_jit_and_vmap_match_unjitted_step():
    env, params = envs.make("maze2d-medium")
    n = 2
    keys = jax.random.split(jax.random.key(0), n)
    _, states = jax.vmap(env.reset, (0, None))(keys, params)
    # Push states near walls with large velocities so collisions are exercised.
    states = states.replace(velocity=4.0 * jnp.sign(jax.random.normal(keys[0], (n, 2))))
    actions = jax.random.uniform(keys[1], (n, 2), minval=-1.5, maxval=1.5)
    step_keys = jax.random.split(keys[2], n)
    batched = jax.vmap(env.step, (0, 0, 0, None))(step_keys, states, actions, params)
    with jax.disable_jit():
        for i in range(n):
            state_i = jax.tree.map(lambda x, i=i: x[i], states)
            single = env.step(step_keys[i], state_i, actions[i], params)
            jax.tree.map(
                lambda a, b, i=i: np.testing.assert_allclose(
                    a, b[i], rtol=1e-6, atol=1e-6
                ),
                single,
                batched,
            )


def test_reset_distribution():
    env, params = envs.make("maze2d-medium")
    obs, _ = jax.vmap(env.reset, (0, None))(
        jax.random.split(jax.random.key(1), 4000), params
    )
    obs = np.asarray(obs)
    cells = np.round(obs[:, :2]).astype(int)
    assert not np.asarray(params.walls)[cells[:, 0], cells[:, 1]].any()
    assert np.abs(obs[:, :2] - cells).max() <= 0.1
    # Every one of the 26 free cells is a start, roughly uniformly (4000 / 26 ~ 154).
    _, counts = np.unique(cells, axis=0, return_counts=True)
    assert len(counts) == 26 and counts.min() > 100 and counts.max() < 215
    assert 0.08 < obs[:, 2:].std() < 0.12


def test_spaces():
    env, params = envs.make("maze2d-large")
    assert env.action_space(params).shape == (2,)
    space = env.observation_space(params)
    assert space.shape == (4,)
    obs, _ = env.reset(jax.random.key(0), params)
    assert bool(space.contains(obs))
