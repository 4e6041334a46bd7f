"""Point-maze family with D4RL's maze2d layouts (umaze, medium, large).

Two physics, chosen by `MazeParams.physics` (static):

* "d4rl" (the `maze2d-*-v1` tasks): D4RL's MuJoCo point mass, see `_point_mass.py`
  (dt 0.01, gear / mass and joint damping of the MJCF model, velocity clipped to
  [-5, 5] before the step, MuJoCo's soft wall contact). Positions are in D4RL's
  qpos frame, where cell index (i, j) lies 0.2 off the centre of cell (i, j).
* "legacy" (the `maze2d-*` and `maze2d-*-legacy` tasks, privrl_jax's original maze):
  a fast point mass whose walls stop it dead, kept so that results measured with it
  keep their meaning. Cell (i, j) is the unit square centred at (i, j). The ball (radius
  0.1) is driven by a force `a` in [-1, 1]^2 with linear damping:

      v' = clip((1 - damping * dt) * v + dt * force_scale * a, -max_speed, max_speed)
      x' = x + dt * v'       (resolved axis by axis against the wall grid)

  `max_speed * dt < 0.5`, so one step moves the ball less than half a cell along each
  axis; the ball therefore can only enter the one column (row) adjacent to those it
  already overlaps, and when that column holds a wall in an overlapped row the ball is
  clamped to the wall face and that velocity component zeroed (an inelastic
  collision). Walls are one cell thick, so the ball never tunnels through them.

Both: a position `(x, y)` is in cell `(round(x), round(y))` for the waypoint expert
(D4RL's controller rounds qpos the same way). Reward (D4RL `maze2d` and
`maze2d-*-dense`): sparse `1[||x' - goal|| <= 0.5]` or dense `exp(-||x' - goal||)`,
evaluated at the next position as D4RL's `MazeEnv.step` does. There is no terminal
state; episodes end at the time limit (300 / 600 / 800 steps as D4RL's
maze2d-umaze / medium / large-v1). Resets start at a uniformly drawn free cell index
(goal included) plus U(-0.1, 0.1) noise, velocity N(0, 0.1^2), as D4RL's
`MazeEnv.reset_model`; the evaluation goal is the 'G' cell index, as D4RL's fixed
target.

Reference: Fu et al., "D4RL: Datasets for Deep Data-Driven Reinforcement Learning",
arXiv:2004.07219 (layouts and task settings from d4rl/pointmaze/maze_model.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from privrl_jax.envs._base import Environment
from privrl_jax.envs._point_mass import (
    CONTACT_MARGIN,
    D4RL_FRAME_OFFSET,
    D4RL_GEAR,
    D4RL_JOINT_DAMPING,
    D4RL_MASS,
    D4RL_MAX_SPEED,
    D4RL_TIMESTEP,
    d4rl_point_mass_step,
)

UMAZE = "#####\n#GOO#\n###O#\n#OOO#\n#####"

MEDIUM_MAZE = (
    "########\n#OO##OO#\n#OO#OOO#\n##OOO###\n#OO#OOO#\n#O#OO#O#\n#OOO#OG#\n########"
)

LARGE_MAZE = (
    "############\n"
    "#OOOO#OOOOO#\n"
    "#O##O#O#O#O#\n"
    "#OOOOOO#OOO#\n"
    "#O####O###O#\n"
    "#OO#O#OOOOO#\n"
    "##O#O#O#O###\n"
    "#OO#OOO#OGO#\n"
    "############"
)

# Clearance kept between the ball and a wall face after a collision, so that the
# clamped position is strictly outside the wall in float32 (positions are < 16, where
# float32 spacing is ~1e-6).
_WALL_MARGIN = 1e-4

PHYSICS = ("legacy", "d4rl")

# MazeParams values of the "d4rl" physics: the MuJoCo model's, per unit mass.
D4RL_PHYSICS: dict[str, float] = {
    "dt": D4RL_TIMESTEP,
    "force_scale": D4RL_GEAR / D4RL_MASS,
    "damping": D4RL_JOINT_DAMPING / D4RL_MASS,
    "max_speed": D4RL_MAX_SPEED,
}


def parse_layout(layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Parses a maze string into a wall grid and the goal cell.

    Args:
      layout: rows separated by newlines; `#` wall, `O` free, `G` goal (exactly one).
        The border must be all walls.

    Returns:
      `(walls, goal_cell)`: `walls` is a [H, W] bool array; `goal_cell` an int [2].

    Raises:
      ValueError: ragged rows, unknown characters, no or several goals, an open border,
        or free cells that cannot reach each other.
    """
    rows = [r for r in layout.strip().split("\n")]
    if len({len(r) for r in rows}) != 1:
        raise ValueError(f"layout rows must all have the same length, got {rows!r}")
    chars = np.array([list(r) for r in rows])
    if not np.isin(chars, ["#", "O", "G"]).all():
        raise ValueError(f"layout may only contain '#', 'O' and 'G', got {layout!r}")
    goals = np.argwhere(chars == "G")
    if len(goals) != 1:
        raise ValueError(
            f"layout must contain exactly one goal 'G', found {len(goals)}"
        )
    walls = chars == "#"
    if not (
        walls[0].all() and walls[-1].all() and walls[:, 0].all() and walls[:, -1].all()
    ):
        raise ValueError("layout border must be all walls '#' so the ball stays inside")
    free = np.argwhere(~walls)
    seen = {tuple(free[0])}
    frontier = [tuple(free[0])]
    while frontier:
        i, j = frontier.pop()
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            n = (i + di, j + dj)
            if not walls[n] and n not in seen:
                seen.add(n)
                frontier.append(n)
    if len(seen) != len(free):
        raise ValueError("layout has free cells that are not connected to each other")
    return walls, goals[0].astype(np.int32)


@struct.dataclass
class MazeState:
    """Point-maze state.

    Attributes:
      position: [2] float32, maze-array coordinates (row, column).
      velocity: [2] float32.
      time: int32 scalar, steps since reset.
    """

    position: jax.Array
    velocity: jax.Array
    time: jax.Array


@struct.dataclass
class MazeParams:
    """Point-maze constants (all traced leaves except the layout-dependent shapes).

    Attributes:
      walls: [H, W] bool occupancy grid.
      free_cells: [K, 2] int32 coordinates of the free cells (reset locations).
      goal: [2] float32 evaluation goal (D4RL fixes it at the 'G' cell index).
      max_steps_in_episode: time limit (D4RL: umaze 300, medium 600, large 800).
      dense: dense reward exp(-distance) instead of the sparse indicator.
      goal_radius: sparse reward radius (D4RL: 0.5).
      dt: integration step (d4rl: 0.01).
      force_scale: acceleration per unit action (d4rl: gear / mass = 23.87).
      damping: linear velocity damping rate (d4rl: joint damping / mass = 0.2387,
        integrated implicitly as MuJoCo does).
      max_speed: per-axis speed limit; `max_speed * dt` must be < 0.5 (no tunnelling).
        Legacy clips after the update, d4rl before it (D4RL's `clip_velocity`).
      radius: ball radius (D4RL's point mass: 0.1).
      reset_noise: half-width of the uniform position noise at reset (D4RL: 0.1).
      velocity_noise: std of the Gaussian velocity at reset (D4RL: 0.1).
      physics: "d4rl" (D4RL's MuJoCo model) or "legacy" (static).
    """

    walls: jax.Array
    free_cells: jax.Array
    goal: jax.Array
    max_steps_in_episode: int = 300
    dense: bool = False
    goal_radius: float = 0.5
    dt: float = 0.1
    force_scale: float = 10.0
    damping: float = 2.5
    max_speed: float = 4.5
    radius: float = 0.1
    reset_noise: float = 0.1
    velocity_noise: float = 0.1
    physics: str = struct.field(pytree_node=False, default="legacy")


def make_maze_params(
    layout: str,
    *,
    max_steps_in_episode: int,
    dense: bool = False,
    physics: str = "legacy",
    **overrides: float,
) -> MazeParams:
    """Builds `MazeParams` from a layout string (host side).

    Args:
      layout: maze string, see `parse_layout`.
      max_steps_in_episode: time limit.
      dense: dense reward.
      physics: "d4rl" (D4RL's MuJoCo constants are the defaults) or "legacy".
      **overrides: any other `MazeParams` field (dt, damping, ...).

    Raises:
      ValueError: bad layout, unknown physics, or constants that would allow
        tunnelling or collide at reset.
    """
    if physics not in PHYSICS:
        raise ValueError(f"physics must be one of {PHYSICS}, got {physics!r}")
    walls, goal = parse_layout(layout)
    defaults = D4RL_PHYSICS if physics == "d4rl" else {}
    params = MazeParams(
        walls=jnp.asarray(walls),
        free_cells=jnp.asarray(np.argwhere(~walls).astype(np.int32)),
        goal=jnp.asarray(goal, jnp.float32),
        max_steps_in_episode=max_steps_in_episode,
        dense=dense,
        physics=physics,
    ).replace(**{**defaults, **overrides})
    if not float(params.max_speed) * float(params.dt) < 0.5:
        raise ValueError(
            f"max_speed * dt must be < 0.5 (half a cell per step) so the ball cannot "
            f"tunnel through walls, got {params.max_speed} * {params.dt}"
        )
    # d4rl resets sit 0.2 off the cell centre and touch a wall within the margin.
    slack = D4RL_FRAME_OFFSET + CONTACT_MARGIN if physics == "d4rl" else 0.0
    if not 0.0 < float(params.radius) < 0.5 - slack - float(params.reset_noise):
        raise ValueError(
            f"radius must be in (0, {0.5 - slack:g} - reset_noise) so resets are "
            f"collision-free, got radius={params.radius}, "
            f"reset_noise={params.reset_noise}"
        )
    if max_steps_in_episode < 1:
        raise ValueError(
            f"max_steps_in_episode must be >= 1, got {max_steps_in_episode}"
        )
    return params


def _cell_span(lo: jax.Array, hi: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Indices of the first and last cells that the open interval (lo, hi) overlaps."""
    first = jnp.floor(lo - 0.5).astype(jnp.int32) + 1
    last = jnp.ceil(hi + 0.5).astype(jnp.int32) - 1
    return first, last


def _move_axis(
    walls: jax.Array,
    position: jax.Array,
    velocity: jax.Array,
    axis: int,
    dt: jax.Array,
    radius: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Moves the ball along one axis and resolves a collision with the wall grid."""
    other = 1 - axis
    new = position[axis] + dt * velocity[axis]
    lo, hi = _cell_span(new - radius, new + radius)
    olo, ohi = _cell_span(position[other] - radius, position[other] + radius)
    h, w = walls.shape
    size = (h, w)

    def is_wall(c: jax.Array, o: jax.Array) -> jax.Array:
        idx = [None, None]
        idx[axis] = jnp.clip(c, 0, size[axis] - 1)
        idx[other] = jnp.clip(o, 0, size[other] - 1)
        return walls[idx[0], idx[1]]

    hit = is_wall(lo, olo) | is_wall(lo, ohi) | is_wall(hi, olo) | is_wall(hi, ohi)
    # The previous position was collision-free and the move is < half a cell, so a wall
    # can only be in the newly entered cell row/column: `hi` when moving up, `lo` down.
    clamped = jnp.where(
        velocity[axis] > 0,
        hi.astype(jnp.float32) - 0.5 - radius - _WALL_MARGIN,
        lo.astype(jnp.float32) + 0.5 + radius + _WALL_MARGIN,
    )
    new = jnp.where(hit, clamped, new)
    position = position.at[axis].set(new)
    velocity = velocity.at[axis].set(jnp.where(hit, 0.0, velocity[axis]))
    return position, velocity


def maze_dynamics(
    position: jax.Array, velocity: jax.Array, action: jax.Array, params: MazeParams
) -> tuple[jax.Array, jax.Array]:
    """One step of the point-mass dynamics with wall collisions (either physics).

    Args:
      position: [2] current position.
      velocity: [2] current velocity.
      action: [2] force, clipped to [-1, 1].
      params: maze constants.

    Returns:
      `(position, velocity)` after the step.
    """
    if params.physics == "d4rl":
        return d4rl_point_mass_step(
            params.walls,
            position,
            velocity,
            action,
            dt=params.dt,
            force_scale=params.force_scale,
            damping=params.damping,
            max_speed=params.max_speed,
            radius=params.radius,
        )
    action = jnp.clip(action, -1.0, 1.0)
    velocity = (1.0 - params.damping * params.dt) * velocity
    velocity = velocity + params.dt * params.force_scale * action
    velocity = jnp.clip(velocity, -params.max_speed, params.max_speed)
    for axis in (0, 1):
        position, velocity = _move_axis(
            params.walls, position, velocity, axis, params.dt, params.radius
        )
    return position, velocity


def maze_reward(position: jax.Array, goal: jax.Array, params: MazeParams) -> jax.Array:
    """D4RL's maze2d reward at `position`: sparse indicator or dense exp(-distance)."""
    dist = jnp.linalg.norm(position - goal, axis=-1)
    sparse = (dist <= params.goal_radius).astype(jnp.float32)
    return jnp.where(params.dense, jnp.exp(-dist), sparse)


class PointMaze(Environment[MazeState, MazeParams]):
    """A D4RL-like maze2d task: point mass, 4-dim obs (x, y, vx, vy), 2-dim force.

    Args:
      name: registry name, e.g. "maze2d-umaze-v1" or "maze2d-large-dense-legacy".
      layout: maze string.
      max_steps_in_episode: time limit.
      dense: dense reward.
      physics: "d4rl" or "legacy" (see the module docstring).
    """

    def __init__(
        self,
        name: str,
        layout: str,
        max_steps_in_episode: int,
        dense: bool,
        physics: str = "legacy",
    ):
        self._name = name
        self.layout = layout
        self._max_steps = max_steps_in_episode
        self._dense = dense
        self.physics = physics

    def _key(self) -> tuple:
        return (self._name, self.layout, self._max_steps, self._dense, self.physics)

    # Equal envs hash equal, so every `make("maze2d-umaze")` hits the same jit cache
    # entries (`self` is a static argument of the jitted `step` / `reset`).
    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def name(self) -> str:
        return self._name

    @property
    def default_params(self) -> MazeParams:
        return make_maze_params(
            self.layout,
            max_steps_in_episode=self._max_steps,
            dense=self._dense,
            physics=self.physics,
        )

    def get_obs(self, state: MazeState) -> jax.Array:
        """[4] float32 observation (x, y, vx, vy), D4RL's maze2d observation."""
        return jnp.concatenate([state.position, state.velocity]).astype(jnp.float32)

    def reset_env(
        self, key: jax.Array, params: MazeParams
    ) -> tuple[jax.Array, MazeState]:
        key_cell, key_pos, key_vel = jax.random.split(key, 3)
        idx = jax.random.randint(key_cell, (), 0, params.free_cells.shape[0])
        noise = jax.random.uniform(
            key_pos, (2,), minval=-params.reset_noise, maxval=params.reset_noise
        )
        position = params.free_cells[idx].astype(jnp.float32) + noise
        velocity = params.velocity_noise * jax.random.normal(key_vel, (2,))
        velocity = jnp.clip(velocity, -params.max_speed, params.max_speed)
        state = MazeState(position=position, velocity=velocity, time=jnp.int32(0))
        return self.get_obs(state), state

    def step_env(
        self, key: jax.Array, state: MazeState, action: jax.Array, params: MazeParams
    ) -> tuple[jax.Array, MazeState, jax.Array, jax.Array, dict[str, jax.Array]]:
        del key  # deterministic dynamics
        position, velocity = maze_dynamics(
            state.position, state.velocity, action, params
        )
        state = MazeState(position=position, velocity=velocity, time=state.time + 1)
        reward = maze_reward(position, params.goal, params)
        return self.get_obs(state), state, reward, jnp.bool_(False), {}

    def observation_space(self, params: MazeParams) -> spaces.Box:
        h, w = params.walls.shape
        v = params.max_speed
        if params.physics == "d4rl":
            # The clip acts before the step, so one step of full force can exceed it.
            v = params.max_speed + params.dt * params.force_scale
        low = jnp.array([0.0, 0.0, -v, -v], jnp.float32)
        high = jnp.array([h - 1.0, w - 1.0, v, v], jnp.float32)
        return spaces.Box(low, high, (4,), jnp.float32)

    def action_space(self, params: MazeParams) -> spaces.Box:
        del params
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)
