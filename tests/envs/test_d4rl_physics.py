"""maze2d-*-v1: D4RL's MuJoCo point mass in closed form, its frame, MuJoCo parity."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs import _point_mass as pm
from privrl_jax.envs._d4rl_collect import d4rl_collect_chunk, init_d4rl_collect_state
from privrl_jax.envs._d4rl_expert import (
    d4rl_controller_action,
    d4rl_expert_returns,
    init_d4rl_controller_state,
)
from privrl_jax.envs._expert import make_waypoint_controller, shortest_path_table
from privrl_jax.envs._maze import maze_dynamics
from privrl_jax.envs._reference import reference_returns

H = 0.01
F = 100.0 / (4.0 / 3.0 * math.pi * 1e-3 * 1000.0)  # gear / mass
C = 1.0 / (4.0 / 3.0 * math.pi * 1e-3 * 1000.0)  # joint damping / mass


def _roll(params, q0, v0, actions):
    def body(c, a):
        q, v = maze_dynamics(c[0], c[1], a, params)
        return (q, v), (q, v)

    _, (q, v) = jax.lax.scan(body, (jnp.asarray(q0), jnp.asarray(v0)), actions)
    return np.asarray(q, np.float64), np.asarray(v, np.float64)


def test_d4rl_params_are_the_mujoco_models():
    _, params = envs.make("maze2d-umaze-v1")
    assert params.physics == "d4rl" and params.dt == 0.01
    np.testing.assert_allclose(params.force_scale, 23.873241, rtol=1e-6)
    np.testing.assert_allclose(params.damping, 0.2387324, rtol=1e-6)
    assert params.max_speed == 5.0 and params.radius == 0.1
    assert params.goal_radius == 0.5
    np.testing.assert_array_equal(params.goal, [1.0, 1.0])
    for name, length in (("umaze", 300), ("medium", 600), ("large", 800)):
        for dense in ("", "-dense"):
            _, p = envs.make(f"maze2d-{name}{dense}-v1")
            assert p.max_steps_in_episode == length and bool(p.dense) == bool(dense)


def test_constant_force_from_rest_matches_the_damped_closed_form():
    _, params = envs.make("maze2d-large-v1")
    # Large maze, row 3 is free from column 1 to 6: 20 steps stay clear of walls.
    n = 20
    q, v = _roll(
        params, [3.0, 1.0], [0.0, 0.0], jnp.tile(jnp.array([0.0, 1.0]), (n, 1))
    )
    # Implicit damping: v_k = (v_{k-1} + h F) / (1 + h C) = (F / C) (1 - rho^k).
    rho = 1.0 / (1.0 + H * C)
    k = np.arange(1, n + 1)
    v_exact = F / C * (1.0 - rho**k)
    x_exact = 1.0 + H * F / C * (k - rho * (1.0 - rho**k) / (1.0 - rho))
    np.testing.assert_allclose(v[:, 1], v_exact, rtol=1e-5)
    np.testing.assert_allclose(q[:, 1], x_exact, rtol=1e-5)
    np.testing.assert_allclose(q[:, 0], 3.0, atol=1e-6)
    # Step 1 moves h^2 F / (1 + h C) = 0.00238 (D4RL's MuJoCo model: 0.0024), and the
    # discrete path stays within O(h) of the continuous damped solution.
    np.testing.assert_allclose(q[0, 1] - 1.0, H * H * F / (1 + H * C), atol=1e-6)
    t = k * H
    x_cont = 1.0 + F / C * (t - (1.0 - np.exp(-C * t)) / C)
    np.testing.assert_allclose(q[:, 1], x_cont, atol=H * v_exact.max())


def test_speed_cap_acts_before_the_step():
    _, params = envs.make("maze2d-large-v1")
    q, v = _roll(
        params, [3.0, 1.0], [0.0, 0.0], jnp.tile(jnp.array([0.0, 1.0]), (40, 1))
    )
    assert q[-1, 1] < 5.6  # still in the corridor (walls from column 6.3 on)
    # Capped at 5 before each step, one step of full force gives (5 + h F) / (1 + h C).
    steady = (5.0 + H * F) / (1.0 + H * C)
    assert v[:, 1].max() <= steady + 1e-5
    np.testing.assert_allclose(v[-10:, 1], steady, rtol=1e-6)
    # About 30 steps per cell at top speed, as in D4RL (the legacy maze: 5).
    np.testing.assert_allclose(1.0 / (H * steady), 19.1, atol=0.1)


def test_pushing_into_a_wall_rests_at_the_soft_contact_equilibrium():
    _, params = envs.make("maze2d-umaze-v1")
    # umaze: cell (1, 1) free, (2, 1) wall, whose face is at qpos row 1.3.
    q, v = _roll(
        params, [1.0, 1.0], [0.0, 0.0], jnp.tile(jnp.array([1.0, 0.0]), (300, 1))
    )
    # Force balance at rest: F = D(r) k imp(r) |r| with D = imp / (1 - imp); the
    # violation |r| < solimp width (1 mm), so imp(r) is on the impedance's sigmoid.
    dmax, timeconst = pm.SOLIMP[1], pm.SOLREF[0]
    k = 1.0 / (dmax**2 * timeconst**2)

    def push(r):
        imp = float(pm.impedance(jnp.float32(r)))
        return imp / (1.0 - imp) * k * imp * r

    lo, hi = 0.0, 0.01
    for _ in range(60):
        lo, hi = ((lo + hi) / 2, hi) if push((lo + hi) / 2) < F else (lo, (lo + hi) / 2)
    distance = pm.CONTACT_MARGIN - lo  # the ball rests just outside the wall (> 0)
    assert 0.0 < distance < pm.CONTACT_MARGIN
    np.testing.assert_allclose(q[-1, 0], 1.3 - 0.1 - distance, atol=1e-5)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-4)
    # It hit the wall at speed and was pushed back softly: never 6 cm inside.
    assert q[:, 0].max() < 1.3 - 0.1 + 0.06
    # Sliding along the wall is frictionless: a tangential push moves it freely.
    q2, _ = _roll(params, q[-1], v[-1], jnp.tile(jnp.array([1.0, 1.0]), (30, 1)))
    assert q2[-1, 1] - q[-1, 1] > 0.5


def _penetration(q: np.ndarray, walls: np.ndarray) -> np.ndarray:
    """Depth by which a ball of radius 0.1 at qpos q overlaps any wall box (>= 0)."""
    p = q.reshape(-1, 1, 2) + pm.D4RL_FRAME_OFFSET
    cells = np.argwhere(walls)[None].astype(np.float64)
    d = np.linalg.norm(np.maximum(np.abs(p - cells) - 0.5, 0.0), axis=-1)
    return np.maximum(0.1 - d, 0.0).max(-1)


@pytest.mark.parametrize("name", ["umaze", "medium", "large"])
def test_walls_keep_the_ball_out(name):
    env, params = envs.make(f"maze2d-{name}-v1")
    num = 32
    _, state = jax.vmap(env.reset_env, (0, None))(
        jax.random.split(jax.random.key(0), num), params
    )
    # Bang-bang actions switched every 25 steps: ram walls and corners at top speed.
    acts = jnp.where(
        jax.random.bernoulli(jax.random.key(1), 0.5, (24, num, 2)), 1.0, -1.0
    ).repeat(25, axis=0)

    def body(c, a):
        q, v = jax.vmap(maze_dynamics, (0, 0, 0, None))(c[0], c[1], a, params)
        return (q, v), q

    _, traj = jax.lax.scan(body, (state.position, state.velocity), acts)
    depth = _penetration(np.asarray(traj, np.float64), np.asarray(params.walls))
    # Contacts are found at the start of a step, so a ball at full speed (0.052 per
    # step) sinks up to ~6 cm before the soft contact pushes it out (so does MuJoCo).
    assert depth.max() < 0.08
    assert (np.abs(np.asarray(traj)) < 20).all()


def test_resets_start_off_centre_in_d4rls_frame():
    env, params = envs.make("maze2d-medium-v1")
    obs, state = jax.vmap(env.reset_env, (0, None))(
        jax.random.split(jax.random.key(3), 500), params
    )
    q = np.asarray(state.position, np.float64)
    cells = np.round(q)
    assert np.abs(q - cells).max() <= 0.1 + 1e-6  # cell index + U(-0.1, 0.1)
    assert not np.asarray(params.walls)[
        cells[:, 0].astype(int), cells[:, 1].astype(int)
    ].any()
    assert _penetration(q, np.asarray(params.walls)).max() == 0.0
    np.testing.assert_array_equal(obs[:, :2], state.position)
    # Every free cell is a start, the goal included (D4RL's empty + goal locations).
    assert len({tuple(c) for c in cells.astype(int)}) == int(params.free_cells.shape[0])


def test_v1_and_legacy_are_distinct_envs():
    env_v1, _ = envs.make("maze2d-umaze-v1")
    env_old, params_old = envs.make("maze2d-umaze-legacy")
    env_bare, params_bare = envs.make("maze2d-umaze")
    assert env_v1 != env_old and params_old.physics == params_bare.physics == "legacy"
    assert reference_returns("maze2d-umaze") == reference_returns("maze2d-umaze-legacy")
    with pytest.raises(ValueError, match="physics is chosen by its name"):
        envs.make("maze2d-umaze", physics="d4rl")


def test_step_is_jittable_and_vmappable():
    env, params = envs.make("maze2d-large-dense-v1")
    keys = jax.random.split(jax.random.key(0), 8)
    obs, state = jax.vmap(env.reset, (0, None))(keys, params)
    actions = jax.random.uniform(jax.random.key(1), (8, 2), minval=-1, maxval=1)
    batched = jax.vmap(env.step, (0, 0, 0, None))(keys, state, actions, params)
    for i in range(8):
        single = env.step(
            keys[i], jax.tree.map(lambda x: x[i], state), actions[i], params
        )
        np.testing.assert_allclose(batched[0][i], single[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(batched[2][i], single[2], rtol=1e-6)


def test_d4rl_controller_plans_jittered_waypoints_and_keeps_them():
    _, params = envs.make("maze2d-medium-v1")
    controller = make_waypoint_controller(params)
    state = init_d4rl_controller_state(controller)
    obs = jnp.array([1.05, 1.0, 0.0, 0.0])
    action, state = d4rl_controller_action(
        controller, jax.random.key(0), state, obs, params.goal
    )
    wp = np.asarray(state.waypoints)
    _, dist = shortest_path_table(np.asarray(params.walls))
    w = params.walls.shape[1]
    n = dist[6 * w + 6, 1 * w + 1]  # path length from cell (1, 1) to the goal (6, 6)
    cells = np.ceil(wp[: n - 1])  # jitter U(0, 0.2) below each cell index
    assert ((cells - wp[: n - 1] >= 0) & (cells - wp[: n - 1] <= 0.2)).all()
    assert (
        np.abs(np.diff(np.concatenate([[[1, 1]], cells, wp[n - 1 : n]]), axis=0)).sum(
            -1
        )
        == 1
    ).all()
    np.testing.assert_array_equal(
        wp[n - 1 :], np.tile([6.0, 6.0], (len(wp) - n + 1, 1))
    )
    assert np.abs(np.asarray(action)).max() <= 1.0
    # Same target: the plan (and its jitter) is kept.
    _, state2 = d4rl_controller_action(
        controller, jax.random.key(5), state, obs, params.goal
    )
    np.testing.assert_array_equal(state2.waypoints, state.waypoints)


def test_d4rl_expert_protocol_first_episode_plans_later_ones_steer_straight():
    env, params = envs.make("maze2d-umaze-v1")
    controller = make_waypoint_controller(params)
    returns = np.asarray(
        d4rl_expert_returns(jax.random.key(0), env, params, controller, 16, 3, 300)
    )
    # Every first episode follows a planned path to the goal.
    assert (returns[:, 0] > 100).all()
    # Later episodes steer straight at the goal and some stick behind the U's wall,
    # as in D4RL's reference protocol (its expert reference is 161.86 of 300).
    assert (returns[:, 1:] == 0).any()
    assert 100 < returns[:, 1:].mean() < 250


# --- parity with MuJoCo (optional extra) ---------------------------------------------


def _mujoco_positions(layout_name, q0, v0, actions):
    gym = pytest.importorskip("gymnasium", reason="needs the mujoco extra")
    gymnasium_robotics = pytest.importorskip(
        "gymnasium_robotics",
        reason='needs the mujoco extra: pip install -e ".[mujoco]"',
    )
    mujoco = pytest.importorskip("mujoco", reason='pip install -e ".[mujoco]"')
    gym.register_envs(gymnasium_robotics)
    env = gym.make(f"PointMaze_{layout_name}-v3")
    model, data = env.unwrapped.point_env.model, env.unwrapped.point_env.data
    h, w = np.array(env.unwrapped.maze.maze_map).shape
    # gymnasium-robotics' frame: x = column + 0.5 - W / 2, y = H / 2 - row - 0.5.
    mujoco.mj_resetData(model, data)
    data.qpos[:] = [q0[1] + 0.7 - w / 2, h / 2 - q0[0] - 0.7]
    data.qvel[:] = [v0[1], -v0[0]]
    out = []
    for a in actions:
        data.qvel[:] = np.clip(data.qvel, -5.0, 5.0)
        data.ctrl[:] = np.clip([a[1], -a[0]], -1.0, 1.0)
        mujoco.mj_step(model, data)
        out.append([h / 2 - 0.7 - data.qpos[1], data.qpos[0] - 0.7 + w / 2])
    return np.array(out)


@pytest.mark.parametrize("layout_name, name", [("UMaze", "umaze"), ("Large", "large")])
def test_matches_mujoco_point_maze(layout_name, name):
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1.0, 1.0, (300, 2))
    q0, v0 = np.array([3.05, 1.02]), np.array([0.1, -0.05])
    ref = _mujoco_positions(layout_name, q0, v0, actions)
    _, params = envs.make(f"maze2d-{name}-v1")
    with jax.enable_x64(True):
        q64, _ = _roll(params, q0, v0, jnp.asarray(actions))
    np.testing.assert_allclose(q64, ref, atol=1e-8)
    q32, _ = _roll(
        params,
        q0.astype(np.float32),
        v0.astype(np.float32),
        jnp.asarray(actions, jnp.float32),
    )
    np.testing.assert_allclose(q32[:100], ref[:100], atol=1e-4)
    np.testing.assert_allclose(q32, ref, atol=1e-2)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_d4rl_data_protocol():
    env, params = envs.make("maze2d-umaze-v1")
    controller = make_waypoint_controller(params, action_noise=0.5)
    state = init_d4rl_collect_state(jax.random.key(0), env, params, controller, 8)
    _, tr = d4rl_collect_chunk(jax.random.key(1), state, env, params, controller, 2000)
    obs, nxt = np.asarray(tr.observations), np.asarray(tr.next_observations)
    timeouts = np.asarray(tr.timeouts)
    assert obs.shape == (8, 2000, 4) and (np.asarray(tr.terminals) == 0).all()
    # D4RL's script keeps its observation for one step after a segment end; otherwise
    # each observation is the previous step's next observation.
    follows = np.where(timeouts[:, :-1, None] > 0, obs[:, :-1], nxt[:, :-1])
    np.testing.assert_array_equal(obs[:, 1:], follows)
    # Goals are reached: ~75 steps per goal in umaze (MuJoCo, same protocol: ~80);
    # segments never exceed the time limit.
    steps_per_goal = timeouts.size / timeouts.sum()
    assert 40 < steps_per_goal < 150
    assert np.asarray(tr.actions).min() >= -1 and np.asarray(tr.actions).max() <= 1
    np.testing.assert_allclose(
        tr.rewards,
        (np.linalg.norm(nxt[..., :2] - np.asarray(params.goal), axis=-1) <= 0.5),
    )


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_collect_dataset_uses_d4rls_protocol_for_v1():
    data = envs.collect_dataset(jax.random.key(0), "maze2d-umaze-v1", 3000, num_envs=3)
    timeouts = np.asarray(data.timeouts)
    assert data.observations.shape == (3000, 4)
    # The legacy stateless expert reaches a goal every ~10 steps; D4RL's ~75.
    assert timeouts.size / timeouts.sum() > 30
