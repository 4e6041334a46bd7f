"""Waypoint expert for the point mazes: grid shortest paths + a PD controller.

This is the behaviour policy D4RL used to collect maze2d (d4rl/pointmaze/
waypoint_controller.py): plan a shortest path over the grid cells, then steer toward
the next waypoint with `a = p_gain * (waypoint - x) - d_gain * v` (D4RL: p_gain 10,
d_gain 1), clipped to [-1, 1], plus Gaussian action noise (D4RL's noisy datasets: std
0.5). Unlike D4RL's stateful controller, ours is a pure function of the observation and
the goal, so it jits and vmaps: the next waypoint is the centre of the next cell on a
shortest path from the ball's current cell, read from a table.

Host side (NumPy): `make_waypoint_controller` runs one BFS per goal cell and stores a
[num_cells, num_cells] next-cell table. Device side (JAX): `waypoint_action`.
"""

from __future__ import annotations

from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from privrl_jax.envs._maze import MazeParams


def shortest_path_table(walls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs next-cell table over the free cells of a grid (host side, BFS).

    Args:
      walls: [H, W] bool occupancy grid.

    Returns:
      `(next_cell, distance)`, both [H*W, H*W] int32 over flat cell ids `i * W + j`.
      `next_cell[g, c]` is the neighbour of cell `c` on a shortest path to goal `g`
      (`c` itself when `c == g`, and for walls or unreachable pairs); ties are broken
      in the fixed order down, up, right, left. `distance[g, c]` is the path length in
      cells (-1 when unreachable).
    """
    walls = np.asarray(walls, bool)
    h, w = walls.shape
    n = h * w
    moves = ((1, 0), (-1, 0), (0, 1), (0, -1))
    next_cell = np.tile(np.arange(n, dtype=np.int32), (n, 1))
    distance = np.full((n, n), -1, np.int32)
    for gi, gj in np.argwhere(~walls):
        g = gi * w + gj
        dist = distance[g].reshape(h, w)
        dist[gi, gj] = 0
        queue = deque([(gi, gj)])
        while queue:
            i, j = queue.popleft()
            for di, dj in moves:
                a, b = i + di, j + dj
                if 0 <= a < h and 0 <= b < w and not walls[a, b] and dist[a, b] < 0:
                    dist[a, b] = dist[i, j] + 1
                    queue.append((a, b))
        for ci, cj in np.argwhere(dist > 0):
            for di, dj in moves:
                a, b = ci + di, cj + dj
                if 0 <= a < h and 0 <= b < w and dist[a, b] == dist[ci, cj] - 1:
                    next_cell[g, ci * w + cj] = a * w + b
                    break
    return next_cell, distance


@struct.dataclass
class WaypointController:
    """The expert's constants.

    Attributes:
      next_cell: [H*W, H*W] int32 table from `shortest_path_table`.
      width: maze width W (static).
      p_gain: proportional gain (D4RL: 10).
      d_gain: velocity damping gain (D4RL: 1, i.e. D4RL's `d_gain=-1` times `+v`).
      action_noise: std of the Gaussian noise added before clipping (D4RL noisy: 0.5).
    """

    next_cell: jax.Array
    width: int = struct.field(pytree_node=False)
    p_gain: float = 10.0
    d_gain: float = 1.0
    action_noise: float = 0.0


def make_waypoint_controller(
    params: MazeParams,
    *,
    p_gain: float = 10.0,
    d_gain: float = 1.0,
    action_noise: float = 0.0,
) -> WaypointController:
    """Precomputes the shortest-path table for a maze (host side).

    Args:
      params: maze constants (only `walls` is used).
      p_gain: proportional gain.
      d_gain: velocity gain.
      action_noise: Gaussian action-noise std, >= 0.

    Raises:
      ValueError: negative `action_noise`.
    """
    if not float(action_noise) >= 0.0:
        raise ValueError(f"action_noise must be >= 0, got {action_noise}")
    walls = np.asarray(params.walls, bool)
    next_cell, _ = shortest_path_table(walls)
    return WaypointController(
        next_cell=jnp.asarray(next_cell),
        width=int(walls.shape[1]),
        p_gain=p_gain,
        d_gain=d_gain,
        action_noise=action_noise,
    )


def waypoint_target(
    controller: WaypointController, position: jax.Array, goal: jax.Array
) -> jax.Array:
    """The point the controller steers to: the next cell's centre, or the goal itself.

    Args:
      controller: expert constants.
      position: [2] ball position.
      goal: [2] goal position.

    Returns:
      [2] float32 waypoint.
    """
    w = controller.width
    cell = jnp.round(position).astype(jnp.int32)
    goal_cell = jnp.round(goal).astype(jnp.int32)
    c = cell[0] * w + cell[1]
    g = goal_cell[0] * w + goal_cell[1]
    nxt = controller.next_cell[g, c]
    centre = jnp.stack([nxt // w, nxt % w]).astype(jnp.float32)
    return jnp.where(c == g, goal.astype(jnp.float32), centre)


def waypoint_action(
    controller: WaypointController, key: jax.Array, obs: jax.Array, goal: jax.Array
) -> jax.Array:
    """The expert's action: PD toward the next waypoint, plus noise, clipped.

    Args:
      controller: expert constants.
      key: PRNG key for the action noise.
      obs: [4] observation (x, y, vx, vy).
      goal: [2] goal position.

    Returns:
      [2] float32 action in [-1, 1].
    """
    position, velocity = obs[:2], obs[2:4]
    target = waypoint_target(controller, position, goal)
    action = controller.p_gain * (target - position) - controller.d_gain * velocity
    action = action + controller.action_noise * jax.random.normal(key, (2,))
    return jnp.clip(action, -1.0, 1.0)
