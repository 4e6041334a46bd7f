"""D4RL's maze2d dataset protocol for the maze2d-*-v1 tasks: jitted, vmapped streams.

Our re-implementation of the behaviour of d4rl/scripts/generation/
generate_maze2d_datasets.py (one stream per collector, never reset):

* A behaviour goal is drawn like D4RL's `MazeEnv.set_target()`: a free cell index (goal
  cell included) plus U(-0.1, 0.1) per axis. D4RL's stateful waypoint controller
  (`_d4rl_expert.py`: path planned to the rounded goal, waypoint jitter, waypoint
  memory) steers to it; Gaussian action noise (std 0.5 for D4RL's datasets) is added
  after the controller's clip, then the action is clipped again.
* A segment ends (`timeouts = 1` here; D4RL stores it as its `done`) when the
  controller reports the goal solved or after the env's time limit in steps; then a
  new goal is drawn. As in D4RL's script, the observation recorded (and fed to the
  controller) at the step after a segment end is the previous one again: the script
  does not advance its copy of the state on that step, while the simulation goes on.
* Rewards are those of the evaluation task (the env's fixed goal), at the next
  position, as the env returns them (D4RL's relabel script uses the current one).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from flax import struct

from privrl_jax.data import Transitions
from privrl_jax.envs._d4rl_expert import (
    D4RLControllerState,
    d4rl_controller_action,
    init_d4rl_controller_state,
)
from privrl_jax.envs._expert import WaypointController
from privrl_jax.envs._maze import (
    MazeParams,
    MazeState,
    PointMaze,
    maze_dynamics,
    maze_reward,
)


@struct.dataclass
class D4RLCollectState:
    """One collector's state (leading axis = num_envs when vmapped).

    Attributes:
      maze: the simulated ball; `maze.time` counts steps of the current segment.
      seen: [4] the observation the script acts on (stale for one step after a
        segment end).
      goal: [2] the behaviour goal.
      controller: D4RL's controller memory.
    """

    maze: MazeState
    seen: jax.Array
    goal: jax.Array
    controller: D4RLControllerState


def _sample_goal(key: jax.Array, params: MazeParams) -> jax.Array:
    key_cell, key_noise = jax.random.split(key)
    idx = jax.random.randint(key_cell, (), 0, params.free_cells.shape[0])
    noise = jax.random.uniform(key_noise, (2,), minval=-0.1, maxval=0.1)
    return params.free_cells[idx].astype(jnp.float32) + noise


def init_d4rl_collect_state(
    key: jax.Array,
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    num_envs: int,
) -> D4RLCollectState:
    """Resets `num_envs` collectors: ball reset, first goal, controller without plan."""

    def init_one(k: jax.Array) -> D4RLCollectState:
        key_reset, key_goal = jax.random.split(k)
        obs, maze = env.reset_env(key_reset, params)
        return D4RLCollectState(
            maze=maze,
            seen=obs,
            goal=_sample_goal(key_goal, params),
            controller=init_d4rl_controller_state(controller),
        )

    return jax.vmap(init_one)(jax.random.split(key, num_envs))


def d4rl_collect_step(
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    key: jax.Array,
    state: D4RLCollectState,
) -> tuple[D4RLCollectState, Transitions]:
    """One transition of one collector (vmap it)."""
    key_act, key_goal = jax.random.split(key)
    obs = state.seen
    action, cstate = d4rl_controller_action(
        controller, key_act, state.controller, obs, state.goal
    )
    done = cstate.solved | (state.maze.time >= params.max_steps_in_episode)
    position, velocity = maze_dynamics(
        state.maze.position, state.maze.velocity, action, params
    )
    maze = MazeState(position=position, velocity=velocity, time=state.maze.time + 1)
    next_obs = env.get_obs(maze)
    transition = Transitions(
        observations=obs,
        actions=action,
        rewards=maze_reward(position, params.goal, params),
        next_observations=next_obs,
        terminals=jnp.float32(0.0),
        timeouts=done.astype(jnp.float32),
    )
    state = D4RLCollectState(
        maze=maze.replace(time=jnp.where(done, 0, maze.time)),
        seen=jnp.where(done, obs, next_obs),
        goal=jnp.where(done, _sample_goal(key_goal, params), state.goal),
        controller=cstate,
    )
    return state, transition


@partial(jax.jit, static_argnames=("env", "num_steps"))
def d4rl_collect_chunk(
    key: jax.Array,
    state: D4RLCollectState,
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    num_steps: int,
) -> tuple[D4RLCollectState, Transitions]:
    """`num_steps` steps of every collector (`lax.scan` over a vmapped step).

    Returns:
      `(state, transitions)`, transitions with leading axes [num_envs, num_steps].
    """
    num_envs = state.goal.shape[0]
    step = jax.vmap(partial(d4rl_collect_step, env, params, controller))

    def body(s: D4RLCollectState, k: jax.Array):
        return step(jax.random.split(k, num_envs), s)

    state, transitions = jax.lax.scan(body, state, jax.random.split(key, num_steps))
    return state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), transitions)
