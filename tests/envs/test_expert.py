"""Waypoint expert: shortest-path table and goal reaching from every free cell."""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs._collect import SOLVE_THRESHOLD
from privrl_jax.envs._expert import (
    make_waypoint_controller,
    shortest_path_table,
    waypoint_action,
    waypoint_target,
)
from privrl_jax.envs._maze import (
    LARGE_MAZE,
    MEDIUM_MAZE,
    UMAZE,
    maze_dynamics,
    parse_layout,
)

MAZES = ["maze2d-umaze", "maze2d-medium", "maze2d-large"]


def _naive_distances(walls: np.ndarray) -> dict:
    """Bellman-Ford style relaxation over free cells: an independent reference."""
    free = [tuple(c) for c in np.argwhere(~walls)]
    dist = {(a, b): (0 if a == b else np.inf) for a in free for b in free}
    for _ in range(len(free)):
        for a, b in itertools.product(free, free):
            i, j = a
            for n in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
                if n in set(free):
                    dist[a, b] = min(dist[a, b], dist[n, b] + 1)
    return dist


def test_shortest_path_table_matches_naive_reference_on_umaze():
    walls, _ = parse_layout(UMAZE)
    _, distance = shortest_path_table(walls)
    w = walls.shape[1]
    reference = _naive_distances(walls)
    for (a, b), d in reference.items():
        assert distance[b[0] * w + b[1], a[0] * w + a[1]] == d
    # The far end of the U is 6 cells from the goal.
    assert distance[1 * w + 1, 3 * w + 1] == 6


@pytest.mark.parametrize("layout", [MEDIUM_MAZE, LARGE_MAZE])
def test_next_cell_is_an_adjacent_free_cell_one_step_closer(layout):
    walls, _ = parse_layout(layout)
    next_cell, distance = shortest_path_table(walls)
    w = walls.shape[1]
    free = [int(i * w + j) for i, j in np.argwhere(~walls)]
    for g in free:
        for c in free:
            n = next_cell[g, c]
            if c == g:
                assert n == c
                continue
            ci, cj, ni, nj = c // w, c % w, n // w, n % w
            assert abs(ci - ni) + abs(cj - nj) == 1
            assert not walls[ni, nj]
            assert distance[g, n] == distance[g, c] - 1


@functools.partial(jax.jit, static_argnames="num_steps")
def _expert_rollout(params, controller, starts, goals, key, num_steps):
    """[num_starts, num_steps] distance to the goal, starting at rest at `starts`."""

    def one(start, goal, k):
        def body(carry, k):
            pos, vel = carry
            a = waypoint_action(controller, k, jnp.concatenate([pos, vel]), goal)
            pos, vel = maze_dynamics(pos, vel, a, params)
            return (pos, vel), jnp.linalg.norm(pos - goal)

        init = (start.astype(jnp.float32), jnp.zeros(2))
        return jax.lax.scan(body, init, jax.random.split(k, num_steps))[1]

    keys = jax.random.split(key, starts.shape[0])
    return jax.vmap(one)(starts, goals, keys)


@pytest.mark.parametrize("name", MAZES)
def test_expert_reaches_goal_from_every_free_cell(name):
    _, params = envs.make(name)
    length = int(params.max_steps_in_episode)
    starts = params.free_cells
    n = starts.shape[0]
    goals = jnp.broadcast_to(params.goal, (n, 2))
    for noise in (0.0, 0.5):
        controller = make_waypoint_controller(params, action_noise=noise)
        dist = np.asarray(
            _expert_rollout(
                params, controller, starts, goals, jax.random.key(0), length
            )
        )
        reached = dist <= 0.5
        assert reached.any(axis=1).all(), (
            f"noise={noise}: some start never reaches the goal"
        )
        first = reached.argmax(axis=1)
        assert first.max() < length // 4
        # Once there, the expert stays (noise-free: always; noisy: almost always).
        late = reached[:, length // 2 :].mean()
        assert late == 1.0 if noise == 0.0 else late > 0.95


@pytest.mark.slow
@pytest.mark.parametrize("name", MAZES)
def test_expert_reaches_every_goal_from_every_cell(name):
    _, params = envs.make(name)
    cells = np.asarray(params.free_cells)
    pairs = np.array(list(itertools.product(range(len(cells)), repeat=2)))
    controller = make_waypoint_controller(params, action_noise=0.5)
    starts = jnp.asarray(cells[pairs[:, 0]])
    goals = jnp.asarray(cells[pairs[:, 1]], jnp.float32)
    length = int(params.max_steps_in_episode)
    dist = np.asarray(
        _expert_rollout(params, controller, starts, goals, jax.random.key(1), length)
    )
    assert (dist <= SOLVE_THRESHOLD).any(axis=1).all()


def test_waypoint_target_and_action():
    _, params = envs.make("maze2d-umaze")
    controller = make_waypoint_controller(params)
    goal = params.goal
    # From (3, 1) the path to (1, 1) runs right along the bottom: next cell (3, 2).
    np.testing.assert_array_equal(
        waypoint_target(controller, jnp.array([3.1, 0.9]), goal), [3.0, 2.0]
    )
    # In the goal cell, the target is the goal itself.
    np.testing.assert_array_equal(
        waypoint_target(controller, jnp.array([1.2, 0.8]), goal), goal
    )
    # PD law, unsaturated: 10 * (target - x) - 1 * v.
    obs = jnp.array([1.02, 0.97, 0.1, -0.05])
    action = waypoint_action(controller, jax.random.key(0), obs, goal)
    np.testing.assert_allclose(action, [10 * -0.02 - 0.1, 10 * 0.03 + 0.05], rtol=1e-5)


def test_action_noise_statistics_and_validation():
    _, params = envs.make("maze2d-umaze")
    controller = make_waypoint_controller(params, action_noise=0.2)
    obs = jnp.array([1.0, 1.0, 0.0, 0.0])  # at the goal: mean action 0
    actions = jax.vmap(lambda k: waypoint_action(controller, k, obs, params.goal))(
        jax.random.split(jax.random.key(0), 20000)
    )
    np.testing.assert_allclose(np.asarray(actions).std(0), 0.2, rtol=0.03)
    np.testing.assert_allclose(np.asarray(actions).mean(0), 0.0, atol=0.01)
    with pytest.raises(ValueError, match="action_noise"):
        make_waypoint_controller(params, action_noise=-0.1)
