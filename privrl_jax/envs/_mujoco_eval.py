"""Scores a policy in real MuJoCo (the optional `mujoco` extra).

The tasks are D4RL's point maze, gymnasium's locomotion tasks and gymnasium-robotics'
FrankaKitchen.

The `maze2d-*-v1` tasks run in gymnasium-robotics' PointMaze model (the same MJCF as
D4RL's maze2d), stepped as D4RL's `MazeEnv.step` does: clip the action to [-1, 1],
clip the velocity to [-5, 5], one `mj_step`. The adapter (as in the runs behind
experiment maze_vs_mujoco) maps gymnasium-robotics' frame (x right, y up, origin
at the maze centre; its dict observation's `observation` is that frame's (x, y, vx,
vy)) to D4RL's qpos frame (row, column of the cell whose centre is 0.2 behind), so
the policy sees D4RL's 4-dim observation. Resets, the fixed evaluation goal (the 'G'
cell index), rewards and episode lengths are D4RL's, taken from `make(name)`'s
params; returns are normalised with D4RL's published reference returns.

The locomotion (HalfCheetah, Hopper, Walker2d) and FrankaKitchen tasks, for a user
with D4RL or Minari files of them on disk, are in `_mujoco_tasks.py` (task table,
observation adapters, reference returns); `evaluate_mujoco` dispatches on the name.
docs/evaluator.md lists the observation-layout differences between D4RL's env
versions and gymnasium's.

mujoco and gymnasium-robotics are imported inside functions, so `privrl_jax.envs`
imports without the extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax.envs import _mujoco_tasks
from privrl_jax.envs._point_mass import D4RL_FRAME_OFFSET
from privrl_jax.envs._reference import normalized_score
from privrl_jax.envs._registry import D4RL_MAZE_ENVS, make

EVAL_BACKENDS: tuple[str, ...] = ("jax", "mujoco")
# Exact names; the locomotion / kitchen names are patterns (`_mujoco_tasks.NAME_FORMS`).
MUJOCO_EVAL_ENVS: tuple[str, ...] = D4RL_MAZE_ENVS + _mujoco_tasks.D4RL_TASK_NAMES

# maze name -> gymnasium-robotics env id (its map is checked against ours).
_GYM_IDS = {
    "umaze": "PointMaze_UMaze-v3",
    "medium": "PointMaze_Medium-v3",
    "large": "PointMaze_Large-v3",
}

BatchPolicy = Callable[[np.ndarray], np.ndarray]


class MujocoExtraMissing(ImportError, ValueError):
    """The `mujoco` extra is not installed (a ValueError too: the CLI's one line)."""


def mujoco_available() -> bool:
    """Whether mujoco and gymnasium-robotics can be imported."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("mujoco", "gymnasium_robotics")
    )


def require_mujoco() -> None:
    """Raises `MujocoExtraMissing`, one line naming the fix, without the extra."""
    missing = [
        m
        for m in ("mujoco", "gymnasium_robotics")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise MujocoExtraMissing(
            f"the MuJoCo evaluation backend needs {' and '.join(missing)}: "
            'pip install -e ".[mujoco]"'
        )


def check_eval_backend(
    backend: str, env_name: str, *, key: str = "eval_backend"
) -> None:
    """Checks that an evaluation backend can score an environment.

    "mujoco" scores only the ``maze2d-*-v1`` tasks and the MuJoCo locomotion /
    kitchen tasks, and those tasks run only with "mujoco" (they have no JAX version).

    Args:
      backend: "jax" or "mujoco".
      env_name: the environment's name, as for `make` or `mujoco_task`.
      key: the setting's name, used in the error messages (a config key).

    Raises:
      ValueError: an unknown backend, a pair that does not go together, or a
        malformed MuJoCo task name; one line naming `key`, the value and the
        choices.
    """
    if backend not in EVAL_BACKENDS:
        raise ValueError(f"{key}={backend!r}: expected one of {list(EVAL_BACKENDS)}")
    mujoco_only = _mujoco_tasks.is_mujoco_task_name(env_name)
    if backend == "jax" and mujoco_only:
        raise ValueError(
            f"env {env_name!r} runs only in MuJoCo (there is no JAX version of it); "
            f"set {key}='mujoco'"
        )
    if backend == "mujoco" and env_name not in D4RL_MAZE_ENVS and not mujoco_only:
        raise ValueError(
            f"{key}='mujoco' scores D4RL's maze2d-*-v1 tasks "
            f"({', '.join(D4RL_MAZE_ENVS)}) and the MuJoCo tasks "
            f"{_mujoco_tasks.NAME_FORMS}, not env {env_name!r}; choose one of those "
            f"or {key}='jax'"
        )
    if mujoco_only:
        _mujoco_tasks.mujoco_task(env_name)  # a bad dataset / task part: its own line


def _maze_of(env_name: str) -> str:
    return env_name.split("-")[1]


class MujocoPointMaze:
    """A batch of D4RL maze2d MuJoCo models, in D4RL's qpos frame.

    Args:
      env_name: a `maze2d-*-v1` task.
      batch: number of parallel (independent) simulations.
    """

    def __init__(self, env_name: str, batch: int):
        check_eval_backend("mujoco", env_name, key="backend")
        require_mujoco()
        import gymnasium as gym
        import gymnasium_robotics
        import mujoco

        gym.register_envs(gymnasium_robotics)
        self._mujoco = mujoco
        _, self.params = make(env_name)
        walls = np.asarray(self.params.walls)
        gym_env = gym.make(_GYM_IDS[_maze_of(env_name)])
        try:
            maze_map = np.asarray(gym_env.unwrapped.maze.maze_map) == 1
            if maze_map.tolist() != walls.tolist():
                raise RuntimeError(f"{gym_env.spec.id}'s map is not D4RL's layout")
            self.model = gym_env.unwrapped.point_env.model
        finally:
            gym_env.close()
        self.data = [mujoco.MjData(self.model) for _ in range(batch)]
        self.h, self.w = walls.shape

    # gymnasium-robotics: x = column + 0.5 - W/2, y = H/2 - row - 0.5 (cell centres);
    # D4RL: qpos = (row, column) of the cell whose centre is 0.2 behind.
    def _to_gym(self, q: np.ndarray) -> np.ndarray:
        off = D4RL_FRAME_OFFSET + 0.5
        return np.stack(
            [q[..., 1] + off - self.w / 2, self.h / 2 - q[..., 0] - off], -1
        )

    def _from_gym(self, g: np.ndarray) -> np.ndarray:
        off = D4RL_FRAME_OFFSET + 0.5
        return np.stack(
            [self.h / 2 - off - g[..., 1], g[..., 0] - off + self.w / 2], -1
        )

    def set_state(self, q: np.ndarray, v: np.ndarray) -> None:
        """Puts every simulation at D4RL position `q` [B, 2], velocity `v` [B, 2]."""
        gq, gv = self._to_gym(q), np.stack([v[:, 1], -v[:, 0]], -1)
        for d, a, b in zip(self.data, gq, gv):
            self._mujoco.mj_resetData(self.model, d)
            d.qpos[:], d.qvel[:] = a, b

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        """D4RL's reset_model: a free cell + U(-0.1, 0.1), velocity N(0, 0.1^2)."""
        p, n = self.params, len(self.data)
        cells = np.asarray(p.free_cells, np.float64)
        noise = float(p.reset_noise)
        q = cells[rng.integers(len(cells), size=n)] + rng.uniform(-noise, noise, (n, 2))
        self.set_state(q, float(p.velocity_noise) * rng.standard_normal((n, 2)))
        return self.obs()

    def step(self, actions: np.ndarray) -> np.ndarray:
        """D4RL's MazeEnv.step for every simulation; returns [B, 4] observations."""
        a = np.asarray(actions, np.float64).reshape(len(self.data), 2)
        ctrl = np.clip(np.stack([a[:, 1], -a[:, 0]], -1), -1.0, 1.0)
        vmax = float(self.params.max_speed)
        for d, c in zip(self.data, ctrl):
            d.qvel[:] = np.clip(d.qvel, -vmax, vmax)
            d.ctrl[:] = c
            self._mujoco.mj_step(self.model, d)
        return self.obs()

    def obs(self) -> np.ndarray:
        """[B, 4] D4RL observations (x, y, vx, vy) in the qpos frame."""
        gq = np.array([d.qpos for d in self.data])
        gv = np.array([d.qvel for d in self.data])
        return np.concatenate(
            [self._from_gym(gq), np.stack([-gv[:, 1], gv[:, 0]], -1)], -1
        )

    def reward(self, obs: np.ndarray) -> np.ndarray:
        """D4RL's reward at the new observation: sparse indicator or exp(-distance)."""
        p = self.params
        dist = np.linalg.norm(obs[:, :2] - np.asarray(p.goal, np.float64), axis=-1)
        if p.dense:
            return np.exp(-dist)
        return (dist <= float(p.goal_radius)).astype(np.float64)


def mujoco_returns(
    policy: BatchPolicy,
    env_name: str,
    *,
    num_episodes: int,
    seed: int = 0,
    num_steps: int | None = None,
) -> np.ndarray:
    """Undiscounted returns of `num_episodes` MuJoCo episodes run side by side.

    Args:
      policy: `obs [n, obs_dim] float64 -> action [n, act_dim]`.
      env_name: a `maze2d-*-v1` task, or a locomotion / kitchen task
        (`_mujoco_tasks.mujoco_task`).
      num_episodes: episodes (n).
      seed: seeds the reset states (maze: numpy; other tasks: episode i resets
        gymnasium's env with seed + i).
      num_steps: steps per episode (at most); the task's episode length when None.
        Locomotion and kitchen episodes also end when gymnasium's env terminates.

    Returns:
      [num_episodes] float64 returns.
    """
    if _mujoco_tasks.is_mujoco_task_name(env_name):
        require_mujoco()
        return _mujoco_tasks.task_returns(
            policy,
            _mujoco_tasks.mujoco_task(env_name),
            num_episodes=num_episodes,
            seed=seed,
            num_steps=num_steps,
        )
    sim = MujocoPointMaze(env_name, num_episodes)
    steps = int(sim.params.max_steps_in_episode if num_steps is None else num_steps)
    obs = sim.reset(np.random.default_rng(seed))
    ret = np.zeros(num_episodes)
    for _ in range(steps):  # D4RL's maze2d never terminates: time limit only
        obs = sim.step(np.asarray(policy(obs)))
        ret += sim.reward(obs)
    return ret


def evaluate_mujoco(
    policy: BatchPolicy,
    env_name: str,
    *,
    num_episodes: int = 100,
    seed: int = 0,
    num_steps: int | None = None,
) -> dict[str, Any]:
    """`agents.evaluate`'s result, with the episodes run in MuJoCo.

    Args:
      policy: a batch policy, `obs [n, obs_dim] float64 -> action [n, act_dim]`
        (`batch_policy` builds one from an agent's `act`).
      env_name: a ``maze2d-*-v1`` task, or a locomotion / kitchen task
        (`mujoco_task`).
      num_episodes: episodes, run side by side.
      seed: seeds the reset states (maze: numpy; other tasks: episode i resets
        gymnasium's env with seed + i).
      num_steps: steps per episode (at most); the task's episode length when None.

    Returns:
      {"returns", "return_mean", "return_std", "scores", "score_mean", "score_std"}
      (scores: D4RL's normalisation with its published reference returns).

    Raises:
      ValueError: not a ``maze2d-*-v1``, locomotion or kitchen task, or a bad
        `num_episodes`.
      MujocoExtraMissing: the extra is not installed.
    """
    if not (isinstance(num_episodes, int) and num_episodes > 0):
        raise ValueError(f"num_episodes={num_episodes!r}: expected a positive int")
    check_eval_backend("mujoco", env_name, key="backend")
    returns = mujoco_returns(
        policy, env_name, num_episodes=num_episodes, seed=seed, num_steps=num_steps
    )
    if _mujoco_tasks.is_mujoco_task_name(env_name):
        scores = _mujoco_tasks.normalized_task_score(env_name, returns)
    else:
        scores = np.asarray(normalized_score(env_name, returns), np.float64)
    return {
        "returns": returns,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "scores": scores,
        "score_mean": float(scores.mean()),
        "score_std": float(scores.std()),
    }


def batch_policy(
    act: Callable[[Any, jax.Array], jax.Array], agent_state: Any
) -> BatchPolicy:
    """A numpy batch policy from a per-observation JAX `act(agent_state, obs)`.

    `act` is vmapped over the batch and jitted once per `act` (cached), so
    repeated evaluations do not recompile.

    Args:
      act: `act(agent_state, obs [obs_dim]) -> action [act_dim]`.
      agent_state: the state passed to every call of `act`.

    Returns:
      `policy(obs [n, obs_dim]) -> action [n, act_dim]`, numpy in and out
      (observations are cast to float32).
    """
    batched = _batched(act)

    def policy(obs: np.ndarray) -> np.ndarray:
        return np.asarray(batched(agent_state, jnp.asarray(obs, jnp.float32)))

    return policy


def _batched(act: Callable) -> Callable:
    # One jitted, vmapped function per `act` (agents' `act` are stable callables), so
    # repeated evaluations during training do not recompile.
    fn = _BATCHED.get(act)
    if fn is None:
        fn = _BATCHED[act] = jax.jit(jax.vmap(act, in_axes=(None, 0)))
    return fn


_BATCHED: dict[Callable, Callable] = {}


def seed_from_key(key: jax.Array) -> int:
    """A numpy seed drawn from a JAX PRNG key (so runs stay reproducible).

    Args:
      key: a JAX PRNG key.

    Returns:
      An int in [0, 2^31 - 1).
    """
    return int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
