"""D4RL-style maze2d data collection: jitted, vmapped, `lax.scan` over steps.

For the maze2d-*-v1 tasks `collect_dataset` follows D4RL's protocol with D4RL's
stateful controller (`_d4rl_collect.py`). For the legacy mazes it uses the protocol
below with the stateless expert.

Legacy protocol (d4rl/scripts/generation/generate_maze2d_datasets.py): one long run per
environment, never reset. The noisy waypoint expert steers to a behaviour goal drawn
uniformly among the free cells (+U(-0.1, 0.1) noise, D4RL's `set_target`); when the
ball comes within `solve_threshold` (D4RL: 0.1) of that goal, or the segment reaches the
env's time limit, the transition is marked `timeouts = 1` and a new behaviour goal is
drawn. `terminals` are all 0 (maze2d has no terminal states). Rewards are those of the
evaluation task: relative to the env's fixed goal (`params.goal`), sparse or dense, as
D4RL's relabel_maze2d_rewards.py does with `env._target`. One deliberate difference:
D4RL relabels with the current position, we use the next position (the reward the env
returns for that transition), so dataset and env rewards agree.

Rows of the flattened result are grouped per parallel env (env 0's stream, then env 1's,
...), and the last row of every stream is marked `timeouts = 1`, so consecutive rows
belong to one trajectory until a terminal or timeout: what
`privrl_jax.data.transitions_to_trajectories` assumes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from privrl_jax.data import Transitions
from privrl_jax.envs._d4rl_collect import d4rl_collect_chunk, init_d4rl_collect_state
from privrl_jax.envs._expert import (
    WaypointController,
    make_waypoint_controller,
    waypoint_action,
)
from privrl_jax.envs._maze import (
    MazeParams,
    MazeState,
    PointMaze,
    maze_dynamics,
    maze_reward,
)
from privrl_jax.envs._registry import make

# D4RL's WaypointController default `solve_thresh`.
SOLVE_THRESHOLD = 0.1


@struct.dataclass
class CollectState:
    """Per-env collection state (leading axis = num_envs when vmapped).

    Attributes:
      maze: the ball's state; `maze.time` counts steps of the current segment.
      goal: [2] the behaviour goal the expert currently steers to.
    """

    maze: MazeState
    goal: jax.Array


def _sample_goal(key: jax.Array, params: MazeParams) -> jax.Array:
    key_cell, key_noise = jax.random.split(key)
    idx = jax.random.randint(key_cell, (), 0, params.free_cells.shape[0])
    noise = jax.random.uniform(
        key_noise, (2,), minval=-params.reset_noise, maxval=params.reset_noise
    )
    return params.free_cells[idx].astype(jnp.float32) + noise


def init_collect_state(
    key: jax.Array, env: PointMaze, params: MazeParams, num_envs: int
) -> CollectState:
    """Resets `num_envs` balls and draws their first behaviour goals.

    Returns:
      A `CollectState` with leading axis `num_envs`.
    """

    def init_one(k: jax.Array) -> CollectState:
        key_reset, key_goal = jax.random.split(k)
        _, maze = env.reset_env(key_reset, params)
        return CollectState(maze=maze, goal=_sample_goal(key_goal, params))

    return jax.vmap(init_one)(jax.random.split(key, num_envs))


def collect_step(
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    key: jax.Array,
    state: CollectState,
) -> tuple[CollectState, Transitions]:
    """One transition of one env (vmap it).

    Returns:
      `(state, transition)` with scalar-shaped rewards/flags and [4]/[2] obs/actions.
    """
    key_act, key_goal = jax.random.split(key)
    obs = env.get_obs(state.maze)
    action = waypoint_action(controller, key_act, obs, state.goal)
    position, velocity = maze_dynamics(
        state.maze.position, state.maze.velocity, action, params
    )
    maze = MazeState(position=position, velocity=velocity, time=state.maze.time + 1)
    next_obs = env.get_obs(maze)
    reached = jnp.linalg.norm(position - state.goal) <= SOLVE_THRESHOLD
    timeout = reached | (maze.time >= params.max_steps_in_episode)
    goal = jnp.where(timeout, _sample_goal(key_goal, params), state.goal)
    maze = maze.replace(time=jnp.where(timeout, 0, maze.time))
    transition = Transitions(
        observations=obs,
        actions=action,
        rewards=maze_reward(position, params.goal, params),
        next_observations=next_obs,
        terminals=jnp.float32(0.0),
        timeouts=timeout.astype(jnp.float32),
    )
    return CollectState(maze=maze, goal=goal), transition


@partial(jax.jit, static_argnames=("env", "num_steps"))
def collect_chunk(
    key: jax.Array,
    state: CollectState,
    env: PointMaze,
    params: MazeParams,
    controller: WaypointController,
    num_steps: int,
) -> tuple[CollectState, Transitions]:
    """`num_steps` steps of every env, as one jitted `lax.scan` over a vmapped step.

    Args:
      key: PRNG key.
      state: `CollectState` with leading axis num_envs.
      env: the maze.
      params: its constants.
      controller: the (noisy) expert.
      num_steps: steps per env (static).

    Returns:
      `(state, transitions)`, transitions with leading axes [num_envs, num_steps].
    """
    num_envs = state.goal.shape[0]
    step = jax.vmap(partial(collect_step, env, params, controller))

    def body(s: CollectState, k: jax.Array) -> tuple[CollectState, Transitions]:
        return step(jax.random.split(k, num_envs), s)

    state, transitions = jax.lax.scan(body, state, jax.random.split(key, num_steps))
    # [num_steps, num_envs, ...] -> [num_envs, num_steps, ...]: one stream per env.
    return state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), transitions)


def collect_dataset(
    key: jax.Array,
    env_name: str,
    size: int,
    *,
    action_noise: float = 0.5,
    num_envs: int = 100,
    chunk_steps: int = 1000,
    on_chunk: Callable[[int], None] | None = None,
) -> Transitions:
    """Collects a D4RL-style maze2d dataset with the noisy waypoint expert.

    ``maze2d-*-v1``: D4RL's protocol and stateful controller (`_d4rl_collect.py`);
    legacy mazes: the stateless expert (module docstring).

    The loop over chunks runs on the host so that a caller can show progress; each
    chunk is one jitted call (`collect_chunk`), compiled once.

    Args:
      key: PRNG key.
      env_name: a maze2d name, e.g. "maze2d-umaze" (or "-dense": only rewards differ).
      size: number of transitions N (D4RL: 1M umaze, 2M medium, 4M large).
      action_noise: Gaussian action-noise std (D4RL: 0.5).
      num_envs: parallel envs (independent streams).
      chunk_steps: steps per env per jitted call.
      on_chunk: called after each chunk with the number of transitions collected in it.

    Returns:
      `Transitions` with leading axis `size`, float32 fields, rows grouped per env
      stream.

    Raises:
      ValueError: non-maze env, or non-positive size / num_envs / chunk_steps.
    """
    for arg, value in (
        ("size", size),
        ("num_envs", num_envs),
        ("chunk_steps", chunk_steps),
    ):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{arg} must be a positive int, got {value!r}")
    env, params = make(env_name)
    if not isinstance(env, PointMaze):
        raise ValueError(
            f"collect_dataset supports the maze2d envs only (the expert is a maze "
            f"planner), got env_name={env_name!r}"
        )
    num_envs = min(num_envs, size)
    controller = make_waypoint_controller(params, action_noise=action_noise)
    steps_per_env = -(-size // num_envs)
    key_init, key = jax.random.split(key)
    if params.physics == "d4rl":
        state = init_d4rl_collect_state(key_init, env, params, controller, num_envs)
        chunk_fn = d4rl_collect_chunk
    else:
        state = init_collect_state(key_init, env, params, num_envs)
        chunk_fn = collect_chunk
    chunks = []
    done = 0
    while done < steps_per_env:
        n = min(chunk_steps, steps_per_env - done)
        key, key_chunk = jax.random.split(key)
        state, chunk = chunk_fn(key_chunk, state, env, params, controller, n)
        chunks.append(jax.device_get(chunk))
        done += n
        if on_chunk is not None:
            on_chunk(n * num_envs)
    data = {
        f: np.concatenate([getattr(c, f) for c in chunks], axis=1)
        for f in Transitions.__dataclass_fields__
    }
    data["timeouts"][:, -1] = 1.0  # a stream's end is an episode end
    data = {f: v.reshape((-1,) + v.shape[2:])[:size] for f, v in data.items()}
    data["timeouts"][-1] = 1.0
    return Transitions(**{f: jnp.asarray(v) for f, v in data.items()})
