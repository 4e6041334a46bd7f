"""D4RL's maze2d point mass in JAX: the MuJoCo model's step, wall contact included.

D4RL's maze2d-*-v1 tasks (d4rl/pointmaze/maze_model.py, `point_maze` and `MazeEnv`) are
a MuJoCo model: a sphere of radius 0.1 and density 1000 (mass m = 4/3 pi 0.1^3 1000 =
4.18879) on two slide joints with damping B = 1, two motors of gear 100, timestep 0.01,
integrator "Euler", one simulation step per env step, walls that are unit boxes, and
the velocity clipped to [-5, 5] before each step. gymnasium-robotics' PointMaze
(assets/point/point.xml) is the same model. This module integrates it the way MuJoCo
does, written from MuJoCo's documented equations (mujoco.readthedocs.io, "Computation"):

* Semi-implicit Euler with implicit joint damping (MuJoCo's Euler integrator treats
  dof damping implicitly): `v' = v + h (F - B v + f_c) / (m + h B)`, `x' = x + h v'`,
  with `F = gear * action`; all in per-unit-mass form below (force_scale = gear / m,
  damping = B / m, contact acceleration f_c / m).
* Soft contact. Every wall box whose distance to the ball is below the contact margin
  (0.004: MuJoCo adds the two geoms' margins of 0.002) contributes one frictionless
  contact (condim 1) with normal n from the box to the ball. MuJoCo's constraint
  solver finds the accelerations `a` minimising
  `1/2 |a - a0|^2 + sum_i 1/2 D_i min(0, n_i.a - aref_i)^2` (the primal problem with
  the ball's mass factored out), with the reference acceleration
  `aref = -b (n.v) - k imp(r) r`, `r = distance - margin`, `b = 2 / (dmax tc)`,
  `k = 1 / (dmax^2 tc^2 zeta^2)` (solref tc = 0.02, zeta = 1) and
  `D = imp / (1 - imp)` (the regulariser R = (1 - imp) / imp / m); `imp(r)` is the
  solimp impedance (0.9, 0.95, 0.001, 0.5, 2). We minimise it with a few Newton steps
  on the 2-D acceleration, which is exact once the active set settles (MuJoCo's Newton
  solver with 20 iterations is too). Contacts are detected at the start of the step,
  so a fast ball sinks up to ~6 cm into a wall and is pushed back out softly over a
  few steps instead of stopping dead. In float64 this reproduces MuJoCo 4.0 running
  gymnasium-robotics' PointMaze to ~1e-12 over 300 steps
  (experiment maze_vs_mujoco).

Positions are in D4RL's observation frame (MuJoCo's qpos): the ball's body sits at
(1.2, 1.2) and wall (i, j) at (i + 1, j + 1), so in the qpos frame wall (i, j) covers
`[i - 0.7, i + 0.3] x [j - 0.7, j + 0.3]`: cell index (i, j) is 0.2 off the cell centre
along both axes, and resets (at cell index + noise) start the ball 0.2 off the centre.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

# The MuJoCo model's constants (d4rl/pointmaze/maze_model.py).
D4RL_MASS = 4.0 / 3.0 * math.pi * 0.1**3 * 1000.0  # sphere r=0.1, density 1000
D4RL_GEAR = 100.0
D4RL_JOINT_DAMPING = 1.0
D4RL_TIMESTEP = 0.01
D4RL_MAX_SPEED = 5.0  # MazeEnv.clip_velocity
D4RL_FRAME_OFFSET = 0.2  # qpos (i, j) is the centre of cell (i, j) plus 0.2 per axis

# MuJoCo's default contact parameters. D4RL's geom defaults give every geom a margin of
# 0.002 and MuJoCo adds the two geoms' margins, so a contact is active within 0.004.
CONTACT_MARGIN = 0.004
SOLREF = (0.02, 1.0)  # (time constant, damping ratio)
SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)  # (dmin, dmax, width, midpoint, power)
NEWTON_STEPS = 4

# The 8 neighbour cells: the only walls a ball of radius < 0.5 in a free cell can touch.
_NEIGHBOURS = np.array(
    [(di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1) if (di, dj) != (0, 0)],
    np.int32,
)


def impedance(r: jax.Array) -> jax.Array:
    """MuJoCo's solimp impedance d(r) in (0, 1) at constraint violation `r`."""
    dmin, dmax, width, mid, power = SOLIMP
    x = jnp.clip(jnp.abs(r) / width, 0.0, 1.0)
    # The sigmoid of MuJoCo's docs: two power-law halves joined at the midpoint.
    lower = x**power / mid ** (power - 1.0)
    upper = 1.0 - (1.0 - x) ** power / (1.0 - mid) ** (power - 1.0)
    y = jnp.where(x <= mid, lower, upper)
    return dmin + y * (dmax - dmin)


def wall_contacts(
    walls: jax.Array, position: jax.Array, radius: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Signed distances and normals between the ball and its 8 neighbouring cells.

    Args:
      walls: [H, W] bool occupancy grid.
      position: [2] ball centre in the qpos frame.
      radius: ball radius.

    Returns:
      `(is_wall, distance, normal)`: [8] bool, [8] signed surface distance (negative
      when penetrating), [8, 2] unit normals pointing from the box to the ball.
    """
    p = position + D4RL_FRAME_OFFSET  # grid frame: cell (i, j) is centred at (i, j)
    cells = jnp.round(p).astype(jnp.int32) + _NEIGHBOURS
    h, w = walls.shape
    is_wall = walls[jnp.clip(cells[:, 0], 0, h - 1), jnp.clip(cells[:, 1], 0, w - 1)]
    centre = cells.astype(p.dtype)
    delta = p - jnp.clip(p, centre - 0.5, centre + 0.5)
    gap = jnp.linalg.norm(delta, axis=-1)
    outside = gap > 1e-9
    # A centre inside a box (never reached with these forces) exits the nearest face.
    rel = p - centre
    axis = jnp.argmax(jnp.abs(rel), axis=-1)
    face = jax.nn.one_hot(axis, 2, dtype=p.dtype) * jnp.sign(rel)
    depth = 0.5 - jnp.max(jnp.abs(rel), axis=-1)
    normal = jnp.where(
        outside[:, None], delta / jnp.where(outside, gap, 1.0)[:, None], face
    )
    distance = jnp.where(outside, gap, -depth) - radius
    return is_wall, distance, normal


def contact_acceleration(
    walls: jax.Array,
    position: jax.Array,
    velocity: jax.Array,
    free_acc: jax.Array,
    radius: float,
) -> jax.Array:
    """The ball's acceleration after MuJoCo's soft wall contacts (per unit mass).

    Args:
      walls: [H, W] bool occupancy grid.
      position: [2] ball centre (qpos frame).
      velocity: [2] ball velocity.
      free_acc: [2] acceleration without contacts, `(F - B v) / m`.
      radius: ball radius.

    Returns:
      [2] constrained acceleration.
    """
    is_wall, distance, normal = wall_contacts(walls, position, radius)
    active = is_wall & (distance < CONTACT_MARGIN)
    r = distance - CONTACT_MARGIN
    imp = impedance(r)
    timeconst, dampratio = SOLREF
    dmax = SOLIMP[1]
    # MuJoCo keeps the time constant >= 2 timesteps; 0.02 = 2 * 0.01 already.
    b = 2.0 / (dmax * timeconst)
    k = 1.0 / (dmax**2 * timeconst**2 * dampratio**2)
    aref = -b * (normal @ velocity) - k * imp * r
    stiff = jnp.where(active, imp / (1.0 - imp), 0.0)

    def newton(acc: jax.Array, _: None) -> tuple[jax.Array, None]:
        jar = normal @ acc - aref
        d = jnp.where(jar < 0.0, stiff, 0.0)
        hess = jnp.eye(2, dtype=acc.dtype) + jnp.einsum(
            "i,ij,ik->jk", d, normal, normal
        )
        grad = acc - free_acc + normal.T @ (d * jar)
        det = hess[0, 0] * hess[1, 1] - hess[0, 1] * hess[1, 0]
        step = jnp.stack(
            [
                hess[1, 1] * grad[0] - hess[0, 1] * grad[1],
                hess[0, 0] * grad[1] - hess[1, 0] * grad[0],
            ]
        )
        return acc - step / det, None

    acc, _ = jax.lax.scan(newton, free_acc, None, length=NEWTON_STEPS)
    return acc


def d4rl_point_mass_step(
    walls: jax.Array,
    position: jax.Array,
    velocity: jax.Array,
    action: jax.Array,
    *,
    dt: float,
    force_scale: float,
    damping: float,
    max_speed: float,
    radius: float,
) -> tuple[jax.Array, jax.Array]:
    """One env step of D4RL's maze2d point mass (MuJoCo's Euler step, frame skip 1).

    Args:
      walls: [H, W] bool occupancy grid.
      position: [2] qpos.
      velocity: [2] qvel.
      action: [2] motor command, clipped to [-1, 1].
      dt: timestep (D4RL: 0.01).
      force_scale: gear / mass (D4RL: 23.87).
      damping: joint damping / mass (D4RL: 0.2387).
      max_speed: per-axis velocity clip applied before the step (D4RL: 5).
      radius: ball radius (D4RL: 0.1).

    Returns:
      `(position, velocity)` after the step.
    """
    action = jnp.clip(action, -1.0, 1.0)
    velocity = jnp.clip(velocity, -max_speed, max_speed)
    free_acc = force_scale * action - damping * velocity
    acc = contact_acceleration(walls, position, velocity, free_acc, radius)
    # Implicit damping, as in MuJoCo's Euler: (m + h B)(v' - v) = h (F - B v + f_c).
    velocity = velocity + dt * acc / (1.0 + dt * damping)
    position = position + dt * velocity
    return position, velocity
