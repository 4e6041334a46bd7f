"""MuJoCo locomotion and FrankaKitchen tasks for the MuJoCo evaluation backend.

PrivORL's other two domains, for a user who has D4RL or Minari files of them on disk:
gymnasium's HalfCheetah, Hopper and Walker2d and gymnasium-robotics' FrankaKitchen,
run as they come (no JAX version), with an adapter per domain that hands the policy
the observation layout of the dataset it was trained on, and D4RL's reference returns
for the normalised score.

Names (`mujoco_task`):

* D4RL: `{halfcheetah,hopper,walker2d}-{random,medium,expert,medium-replay,
  medium-expert,full-replay}-v2` run in gymnasium's `-v4` envs, the closest to the
  mujoco-py `-v3` envs D4RL's v2 datasets were collected in (same MJCF files, same
  reward, same observation; only the simulator bindings differ). `kitchen-{complete,
  partial,mixed}-v0` run in gymnasium-robotics' `FrankaKitchen-v1` with D4RL's four
  task elements, and the adapter rebuilds D4RL's 60-dim observation.
* Minari: `mujoco/{halfcheetah,hopper,walker2d}/<dataset>-v<k>` run in gymnasium's
  `-v5` envs (Minari's MuJoCo datasets were recorded in them); `D4RL/kitchen/
  {complete,partial,mixed}-v<k>` as the D4RL kitchen names (the observation fed to
  the policy is D4RL's 60-dim layout; `kitchen_observation` flattens Minari's dict
  observations the same way).

Reference returns (`REFERENCE_RETURNS`, per domain): D4RL's `REF_MIN_SCORE` /
`REF_MAX_SCORE` (d4rl/infos.py; the v1 / v2 locomotion datasets take the v0 values,
all kitchen datasets 0 / 4): halfcheetah -280.178953 / 12135.0, hopper -20.272305 /
3234.3, walker2d 1.629008 / 4592.3, kitchen 0 / 4.

mujoco, gymnasium and gymnasium-robotics are imported inside functions, so this module
imports without the extra.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable

import numpy as np

# D4RL's REF_MIN_SCORE / REF_MAX_SCORE, d4rl/infos.py (Fu et al., arXiv:2004.07219).
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    "halfcheetah": (-280.178953, 12135.0),
    "hopper": (-20.272305, 3234.3),
    "walker2d": (1.629008, 4592.3),
    "kitchen": (0.0, 4.0),
}

# domain -> (gymnasium env name without version, observation dim, action dim).
_LOCOMOTION = {
    "halfcheetah": ("HalfCheetah", 17, 6),
    "hopper": ("Hopper", 11, 3),
    "walker2d": ("Walker2d", 17, 6),
}
LOCOMOTION_DATASETS = (
    "random",
    "medium",
    "expert",
    "medium-replay",
    "medium-expert",
    "full-replay",
)
# D4RL kitchen dataset -> its TASK_ELEMENTS (d4rl/kitchen/__init__.py, kitchen_envs.py).
KITCHEN_DATASETS: dict[str, tuple[str, ...]] = {
    "complete": ("microwave", "kettle", "light switch", "slide cabinet"),
    "partial": ("microwave", "kettle", "light switch", "slide cabinet"),
    "mixed": ("microwave", "kettle", "bottom burner", "light switch"),
}
# D4RL's OBS_ELEMENT_INDICES (into the 30-dim robot + object qpos) and OBS_ELEMENT_GOALS
# (d4rl/kitchen/kitchen_envs.py; gymnasium-robotics 1.4.2 uses the same values).
KITCHEN_ELEMENT_INDICES: dict[str, tuple[int, ...]] = {
    "bottom burner": (11, 12),
    "top burner": (15, 16),
    "light switch": (17, 18),
    "slide cabinet": (19,),
    "hinge cabinet": (20, 21),
    "microwave": (22,),
    "kettle": (23, 24, 25, 26, 27, 28, 29),
}
KITCHEN_ELEMENT_GOALS: dict[str, tuple[float, ...]] = {
    "bottom burner": (-0.88, -0.01),
    "top burner": (-0.92, -0.01),
    "light switch": (-0.69, -0.05),
    "slide cabinet": (0.37,),
    "hinge cabinet": (0.0, 1.45),
    "microwave": (-0.75,),
    "kettle": (-0.23, 0.75, 1.62, 0.99, 0.0, 0.0, -0.06),
}
KITCHEN_OBS_DIM = 60  # D4RL: robot qpos (9) + object qpos (21) + goal (30)
KITCHEN_EPISODE_STEPS = 280  # D4RL's and gymnasium-robotics' max_episode_steps

D4RL_TASK_NAMES: tuple[str, ...] = tuple(
    f"{d}-{s}-v2" for d in _LOCOMOTION for s in LOCOMOTION_DATASETS
) + tuple(f"kitchen-{s}-v0" for s in KITCHEN_DATASETS)

NAME_FORMS = (
    "{halfcheetah,hopper,walker2d}-{" + ",".join(LOCOMOTION_DATASETS) + "}-v2, "
    "kitchen-{complete,partial,mixed}-v0, mujoco/{halfcheetah,hopper,walker2d}/"
    "<dataset>-v<k> (Minari) and D4RL/kitchen/{complete,partial,mixed}-v<k> (Minari)"
)

_PREFIXES = tuple(f"{d}-" for d in _LOCOMOTION) + (
    "kitchen-",
    "mujoco/",
    "D4RL/kitchen/",
)


@dataclasses.dataclass(frozen=True)
class MujocoTask:
    """One task of the backend.

    Attributes:
      name: the name it was looked up by.
      domain: "halfcheetah", "hopper", "walker2d" or "kitchen".
      gym_id: the gymnasium / gymnasium-robotics env id it runs in.
      obs_dim: the dataset's (and the adapter's) observation width.
      act_dim: action width.
      max_steps: episode length (1000 locomotion, 280 kitchen).
      kitchen_tasks: the kitchen's task elements (empty for locomotion).
    """

    name: str
    domain: str
    gym_id: str
    obs_dim: int
    act_dim: int
    max_steps: int
    kitchen_tasks: tuple[str, ...] = ()

    @property
    def reference_returns(self) -> tuple[float, float]:
        """D4RL's (random, expert) reference returns of the domain."""
        return REFERENCE_RETURNS[self.domain]


def is_mujoco_task_name(env_name: str) -> bool:
    """Whether `env_name` names (or tries to name) a locomotion or kitchen task.

    The test is by prefix, so a malformed name of such a task is True too (and
    `mujoco_task` then raises).

    Args:
      env_name: any object; only a str can be True.

    Returns:
      True when `env_name` starts with a locomotion or kitchen prefix.
    """
    return isinstance(env_name, str) and env_name.startswith(_PREFIXES)


def mujoco_task(env_name: str) -> MujocoTask:
    """The task behind a D4RL or Minari dataset name.

    Args:
      env_name: a D4RL name (e.g. "hopper-medium-v2", "kitchen-mixed-v0") or a
        Minari one (e.g. "mujoco/hopper/medium-v0", "D4RL/kitchen/mixed-v2"); the
        module docstring lists the forms.

    Returns:
      The `MujocoTask`: gymnasium env id, observation / action widths, episode
      length and the kitchen's task elements.

    Raises:
      ValueError: one line listing the accepted name forms.
    """
    m = re.fullmatch(r"(halfcheetah|hopper|walker2d)-([a-z-]+)-v2", env_name)
    if m and m.group(2) in LOCOMOTION_DATASETS:
        return _locomotion(env_name, m.group(1), "v4")
    m = re.fullmatch(r"mujoco/(halfcheetah|hopper|walker2d)/[a-z-]+-v\d+", env_name)
    if m:
        return _locomotion(env_name, m.group(1), "v5")
    m = re.fullmatch(r"kitchen-([a-z]+)-v0|D4RL/kitchen/([a-z]+)-v\d+", env_name)
    dataset = m and (m.group(1) or m.group(2))
    if dataset in KITCHEN_DATASETS:
        return MujocoTask(
            name=env_name,
            domain="kitchen",
            gym_id="FrankaKitchen-v1",
            obs_dim=KITCHEN_OBS_DIM,
            act_dim=9,
            max_steps=KITCHEN_EPISODE_STEPS,
            kitchen_tasks=KITCHEN_DATASETS[dataset],
        )
    raise ValueError(
        f"unknown MuJoCo task {env_name!r}; the MuJoCo backend runs {NAME_FORMS}"
    )


def _locomotion(name: str, domain: str, version: str) -> MujocoTask:
    gym_name, obs_dim, act_dim = _LOCOMOTION[domain]
    return MujocoTask(
        name=name,
        domain=domain,
        gym_id=f"{gym_name}-{version}",
        obs_dim=obs_dim,
        act_dim=act_dim,
        max_steps=1000,
    )


def kitchen_goal(tasks: tuple[str, ...]) -> np.ndarray:
    """D4RL's 30-dim kitchen goal: the task elements' goal values, zeros elsewhere."""
    goal = np.zeros(30)
    for t in tasks:
        goal[list(KITCHEN_ELEMENT_INDICES[t])] = KITCHEN_ELEMENT_GOALS[t]
    return goal


def kitchen_observation(observation: np.ndarray, tasks: tuple[str, ...]) -> np.ndarray:
    """D4RL's 60-dim kitchen observation from gymnasium-robotics' 59-dim one.

    gymnasium-robotics' `observation` is robot qpos (9), robot qvel (9), object qpos
    (21), object qvel (20); D4RL's is robot qpos (9), object qpos (21), goal (30).

    Args:
      observation: [..., 59] FrankaKitchen-v1's `observation` entry (or a Minari
        kitchen dataset's).
      tasks: the task elements (`KITCHEN_DATASETS[...]`).

    Returns:
      [..., 60] float64.
    """
    obs = np.asarray(observation, np.float64)
    if obs.shape[-1] != 59:
        raise ValueError(
            f"kitchen observation: expected FrankaKitchen-v1's 59 entries, got "
            f"{obs.shape[-1]}"
        )
    goal = np.broadcast_to(kitchen_goal(tasks), obs.shape[:-1] + (30,))
    return np.concatenate([obs[..., :9], obs[..., 18:39], goal], -1)


def _patch_joint_readers() -> None:
    """Lets gymnasium-robotics 1.4.2 read joints under mujoco >= 4.

    Its `mujoco_utils.get_joint_qpos` / `get_joint_qvel` (used by FrankaKitchen's robot
    observation) assert `model.jnt_type[i] in (mjJNT_HINGE, mjJNT_SLIDE)`, and mujoco
    4.0's enums no longer compare equal to the numpy integers of `jnt_type`, so making
    FrankaKitchen-v1 fails. Where that comparison fails, the two readers are replaced
    by ones that compare integers (same slices of qpos / qvel); nothing else changes.
    """
    import mujoco
    from gymnasium_robotics.utils import mujoco_utils

    hinge = mujoco.mjtJoint.mjJNT_HINGE
    if hinge == np.int32(int(hinge)) or getattr(mujoco_utils, "_privrl_patched", False):
        return
    free, ball = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)

    def reader(field: str, widths: dict[int, int], address: str):
        def read(model, data, name):
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid == -1:
                raise ValueError(f"joint {name!r} is not part of the model")
            start = int(getattr(model, address)[jid])
            width = widths.get(int(model.jnt_type[jid]), 1)
            return getattr(data, field)[start : start + width].copy()

        return read

    mujoco_utils.get_joint_qpos = reader("qpos", {free: 7, ball: 4}, "jnt_qposadr")
    mujoco_utils.get_joint_qvel = reader("qvel", {free: 6, ball: 3}, "jnt_dofadr")
    mujoco_utils._privrl_patched = True


def make_gym_env(task: MujocoTask, max_steps: int | None = None):
    """Makes gymnasium's env of `task` (time limit `max_steps`, default the task's)."""
    import gymnasium as gym

    steps = task.max_steps if max_steps is None else int(max_steps)
    if task.domain == "kitchen":
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        _patch_joint_readers()
        return gym.make(
            task.gym_id,
            tasks_to_complete=list(task.kitchen_tasks),
            max_episode_steps=steps,
        )
    with warnings.catch_warnings():
        # gymnasium flags the v4 envs as out of date; they are D4RL's closest match.
        warnings.simplefilter("ignore", DeprecationWarning)
        return gym.make(task.gym_id, max_episode_steps=steps)


def adapt_observation(task: MujocoTask, observation) -> np.ndarray:
    """The dataset-layout observation from what gymnasium's env returned."""
    if task.domain == "kitchen":
        return kitchen_observation(observation["observation"], task.kitchen_tasks)
    # D4RL v2 (mujoco-py v3 envs) and gymnasium v4 / v5 share the layout:
    # qpos without the x coordinate, then qvel (clipped to +-10 for hopper/walker2d).
    return np.asarray(observation, np.float64)


def task_returns(
    policy: Callable[[np.ndarray], np.ndarray],
    task: MujocoTask,
    *,
    num_episodes: int,
    seed: int = 0,
    num_steps: int | None = None,
) -> np.ndarray:
    """Undiscounted returns of `num_episodes` episodes run side by side.

    Episode i resets its env with `seed + i`; an episode ends when gymnasium's env
    terminates (an unhealthy hopper or walker, a kitchen with all tasks done) or after
    `num_steps` (default: the task's length). The policy sees the adapter's
    observations of every episode each step (finished ones are ignored).

    Returns:
      [num_episodes] float64.
    """
    if not (isinstance(num_episodes, int) and num_episodes > 0):
        raise ValueError(f"num_episodes={num_episodes!r}: expected a positive int")
    steps = task.max_steps if num_steps is None else int(num_steps)
    envs = [make_gym_env(task, steps) for _ in range(num_episodes)]
    try:
        obs = np.stack(
            [
                adapt_observation(task, e.reset(seed=seed + i)[0])
                for i, e in enumerate(envs)
            ]
        )
        returns = np.zeros(num_episodes)
        alive = np.ones(num_episodes, bool)
        for _ in range(steps):
            actions = np.asarray(policy(obs), np.float64).reshape(num_episodes, -1)
            for i in np.flatnonzero(alive):
                o, r, terminated, truncated, _ = envs[i].step(actions[i])
                returns[i] += r
                obs[i] = adapt_observation(task, o)
                alive[i] = not (terminated or truncated)
            if not alive.any():
                break
    finally:
        for e in envs:
            e.close()
    return returns


def normalized_task_score(env_name: str, returns) -> np.ndarray:
    """D4RL's normalised score, `100 (R - R_random) / (R_expert - R_random)`."""
    r_min, r_max = mujoco_task(env_name).reference_returns
    return 100.0 * (np.asarray(returns, np.float64) - r_min) / (r_max - r_min)
