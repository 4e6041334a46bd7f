"""`make(name) -> (env, params)` for privrl_jax's own tasks and gymnax's."""

from __future__ import annotations

from typing import Any

import gymnax

from privrl_jax.envs._base import Environment, GymnaxAdapter
from privrl_jax.envs._maze import (
    LARGE_MAZE,
    MEDIUM_MAZE,
    UMAZE,
    MazeParams,
    PointMaze,
    make_maze_params,
)

# name -> (layout, episode length). Episode lengths are D4RL's maze2d-*-v1 time limits.
_MAZES: dict[str, tuple[str, int]] = {
    "maze2d-umaze": (UMAZE, 300),
    "maze2d-medium": (MEDIUM_MAZE, 600),
    "maze2d-large": (LARGE_MAZE, 800),
}

MAZE_ENVS: tuple[str, ...] = tuple(
    name + suffix for name in _MAZES for suffix in ("", "-dense")
)


def registered_envs() -> tuple[str, ...]:
    """All names `make` accepts: the maze2d family, then gymnax's environments."""
    return MAZE_ENVS + tuple(gymnax.registered_envs)


def canonical_name(name: str) -> str:
    """Maps D4RL-style names ("maze2d-umaze-v1", "maze2d-umaze-dense-v1") to ours."""
    if name.startswith("maze2d-") and name.endswith("-v1"):
        return name[: -len("-v1")]
    return name


def make(name: str, **param_overrides: Any) -> tuple[Environment, Any]:
    """Creates an environment and its default parameters.

    Args:
      name: a maze2d task ("maze2d-umaze", "maze2d-medium", "maze2d-large", each with an
        optional "-dense" suffix and D4RL's "-v1" suffix) or a gymnax name
        ("MountainCar-v0", "CartPole-v1", ...).
      **param_overrides: fields of the env params to replace (e.g.
        `max_steps_in_episode=100`).

    Returns:
      `(env, params)`. Every env has privrl_jax's 5-tuple `step` (gymnax envs are
      wrapped in `GymnaxAdapter`).

    Raises:
      ValueError: unknown name (the message lists the valid ones).

    >>> env, params = make("maze2d-umaze")
    >>> params.max_steps_in_episode
    300
    """
    if not isinstance(name, str):
        raise ValueError(f"env name must be a string, got {name!r}")
    key = canonical_name(name)
    dense = key.endswith("-dense")
    base = key[: -len("-dense")] if dense else key
    if base in _MAZES:
        layout, length = _MAZES[base]
        env = PointMaze(key, layout, length, dense)
        unknown = set(param_overrides) - set(MazeParams.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown params {sorted(unknown)} for env {name!r}; its params are "
                f"{sorted(MazeParams.__dataclass_fields__)}"
            )
        # Built through make_maze_params so overrides are validated (no tunnelling).
        kwargs = {"max_steps_in_episode": length, "dense": dense, **param_overrides}
        return env, make_maze_params(layout, **kwargs)
    elif name in gymnax.registered_envs:
        inner, params = gymnax.make(name)
        env = GymnaxAdapter(inner)
    else:
        raise ValueError(
            f"unknown env name {name!r}; valid names are: "
            + ", ".join(registered_envs())
        )
    if param_overrides:
        unknown = set(param_overrides) - set(params.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown params {sorted(unknown)} for env {name!r}; its params are "
                f"{sorted(params.__dataclass_fields__)}"
            )
        params = params.replace(**param_overrides)
    return env, params
