"""D4RL's stateful maze2d waypoint controller, in JAX, and its reference-score protocol.

D4RL's `WaypointController` (d4rl/pointmaze/waypoint_controller.py) behaves as
follows; this is our re-implementation of that behaviour, not its code:

* When it sees a new target (rounded to a cell index), it plans the grid path from the
  ball's rounded position to the target cell and stores one waypoint per cell on it:
  the cell index minus U(0, 0.2) per axis (its waypoint jitter), except the target cell
  itself, stored exactly. It also stores the rounded start as "previous position".
* Each step: `moved = |previous - position|`; the task counts as solved when the ball
  is within 0.1 of the target and `moved < 0.1`. Unsolved, it steers to the current
  waypoint, solved to the target, with `a = 10 (waypoint - x) - v`, clipped to [-1, 1].
  When unsolved and within 0.1 of the current waypoint with `moved < 0.1`, it moves on
  to the next waypoint. The waypoints and the index persist until the target changes.

D4RL's expert reference (scripts/reference_scores/maze2d_controller.py) builds one
controller and runs 100 episodes of the fixed-goal task with it. The goal never
changes, so only the first episode plans a path: every later episode starts with the
finished plan (the index on the target), and the controller steers straight at the
goal from wherever the reset put the ball, sliding along or sticking on walls in
between. That is why D4RL's expert returns are far below the episode length (umaze:
161.86 of 300). `d4rl_expert_returns` reproduces this protocol, vmapped over
independent controllers.

Shortest paths come from `shortest_path_table` (BFS, ties broken down, up, right,
left); D4RL's Q-iteration may break ties between equally short paths differently.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from privrl_jax.envs._expert import WaypointController
from privrl_jax.envs._maze import MazeParams, PointMaze

# D4RL's WaypointController defaults: solve_thresh, vel_thresh, waypoint jitter.
D4RL_SOLVE_THRESHOLD = 0.1
D4RL_MOVE_THRESHOLD = 0.1
D4RL_WAYPOINT_JITTER = 0.2


@struct.dataclass
class D4RLControllerState:
    """The controller's memory (leading axis = batch when vmapped).

    Attributes:
      waypoints: [L, 2] the planned waypoints, padded with the target (L = H * W).
      index: int32 index of the current waypoint.
      previous: [2] the position seen at the previous call.
      target: [2] the rounded target the plan is for (-1000 before the first plan).
      solved: bool, whether the last call found the task solved (D4RL's `done`).
    """

    waypoints: jax.Array
    index: jax.Array
    previous: jax.Array
    target: jax.Array
    solved: jax.Array


def init_d4rl_controller_state(controller: WaypointController) -> D4RLControllerState:
    """A controller with no plan yet (its first call plans one)."""
    length = controller.next_cell.shape[0]
    return D4RLControllerState(
        waypoints=jnp.zeros((length, 2), jnp.float32),
        index=jnp.int32(0),
        previous=jnp.zeros(2, jnp.float32),
        target=jnp.full((2,), -1000.0, jnp.float32),
        solved=jnp.bool_(False),
    )


def _plan(
    controller: WaypointController, key: jax.Array, start: jax.Array, target: jax.Array
) -> D4RLControllerState:
    w = controller.width
    length = controller.next_cell.shape[0]
    s = start[0] * w + start[1]
    g = target[0] * w + target[1]

    def advance(c: jax.Array, _: None) -> tuple[jax.Array, jax.Array]:
        nxt = controller.next_cell[g, c]
        return nxt, nxt

    # Path cells after the start; once at the goal the table keeps returning the goal.
    _, cells = jax.lax.scan(advance, s, None, length=length)
    xy = jnp.stack([cells // w, cells % w], axis=-1).astype(jnp.float32)
    jitter = D4RL_WAYPOINT_JITTER * jax.random.uniform(key, (length, 2))
    waypoints = jnp.where((cells == g)[:, None], xy, xy - jitter)
    return D4RLControllerState(
        waypoints=waypoints,
        index=jnp.int32(0),
        previous=start.astype(jnp.float32),
        target=target.astype(jnp.float32),
        solved=jnp.bool_(False),
    )


def d4rl_controller_action(
    controller: WaypointController,
    key: jax.Array,
    state: D4RLControllerState,
    obs: jax.Array,
    target: jax.Array,
) -> tuple[jax.Array, D4RLControllerState]:
    """One call of D4RL's controller: the action and its updated memory.

    Args:
      controller: the maze's shortest-path table and gains (`make_waypoint_controller`;
        `action_noise` is added after the controller, as D4RL's data script does).
      key: PRNG key (waypoint jitter of a new plan, action noise).
      state: the controller's memory.
      obs: [4] observation (x, y, vx, vy) in the qpos frame.
      target: [2] the goal.

    Returns:
      `(action, state)`, action in [-1, 1]^2.
    """
    key_plan, key_noise = jax.random.split(key)
    position, velocity = obs[:2], obs[2:4]
    goal_cell = jnp.round(target).astype(jnp.int32)
    goal = goal_cell.astype(jnp.float32)
    new_target = jnp.linalg.norm(state.target - goal) > 1e-3
    start = jnp.round(position).astype(jnp.int32)
    planned = _plan(controller, key_plan, start, goal_cell)
    state = jax.tree.map(lambda p, s: jnp.where(new_target, p, s), planned, state)

    moved = jnp.linalg.norm(state.previous - position)
    unsolved = (jnp.linalg.norm(position - goal) >= D4RL_SOLVE_THRESHOLD) | (
        moved >= D4RL_MOVE_THRESHOLD
    )
    waypoint = jnp.where(unsolved, state.waypoints[state.index], goal)
    action = controller.p_gain * (waypoint - position) - controller.d_gain * velocity
    reached = jnp.linalg.norm(position - waypoint) < D4RL_SOLVE_THRESHOLD
    step_on = unsolved & reached & (moved < D4RL_MOVE_THRESHOLD)
    index = jnp.minimum(state.index + step_on, state.waypoints.shape[0] - 1)
    state = state.replace(
        index=index.astype(jnp.int32), previous=position, solved=~unsolved
    )
    action = jnp.clip(action, -1.0, 1.0)
    noise = controller.action_noise * jax.random.normal(key_noise, (2,))
    return jnp.clip(action + noise, -1.0, 1.0), state


@partial(
    jax.jit, static_argnames=("env", "num_controllers", "num_episodes", "num_steps")
)
def d4rl_expert_returns(
    key: jax.Array,
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    num_controllers: int,
    num_episodes: int,
    num_steps: int,
) -> jax.Array:
    """Returns of D4RL's expert-reference protocol: consecutive episodes per controller.

    Each of `num_controllers` independent controllers runs `num_episodes` full-length
    episodes of the fixed-goal task one after another, keeping its memory across
    episodes as D4RL's script does (so only each controller's first episode follows a
    planned path).

    Args:
      key: PRNG key.
      env: a maze.
      params: its constants (the goal is `params.goal`).
      controller: shortest-path table and gains (no action noise for the reference).
      num_controllers: independent controllers, run in parallel (static).
      num_episodes: episodes per controller (static).
      num_steps: steps per episode (static; D4RL: `params.max_steps_in_episode`).

    Returns:
      [num_controllers, num_episodes] float32 returns.
    """

    def one_controller(k: jax.Array) -> jax.Array:
        def episode(cstate, k_ep):
            key_reset, key_steps = jax.random.split(k_ep)
            obs, state = env.reset_env(key_reset, params)

            def step(carry, k_t):
                obs, state, cstate = carry
                key_act, key_env = jax.random.split(k_t)
                action, cstate = d4rl_controller_action(
                    controller, key_act, cstate, obs, params.goal
                )
                obs, state, reward, _, _ = env.step_env(key_env, state, action, params)
                return (obs, state, cstate), reward

            (_, _, cstate), rewards = jax.lax.scan(
                step, (obs, state, cstate), jax.random.split(key_steps, num_steps)
            )
            return cstate, rewards.sum()

        _, returns = jax.lax.scan(
            episode,
            init_d4rl_controller_state(controller),
            jax.random.split(k, num_episodes),
        )
        return returns

    return jax.vmap(one_controller)(jax.random.split(key, num_controllers))
