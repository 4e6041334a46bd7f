"""`make(name) -> (env, params)` for privrl_jax's own tasks and gymnax's.

Maze names (see `_maze.py` for the two physics):

* `maze2d-{umaze,medium,large}[-dense]-v1`: D4RL's tasks of the same name, with D4RL's
  MuJoCo point mass (physics "d4rl") and D4RL's published reference scores.
* `maze2d-{umaze,medium,large}[-dense]-legacy`: privrl_jax's original fast maze
  (physics "legacy"), under an explicit name so that results measured with it keep
  their meaning.
* `maze2d-{umaze,medium,large}[-dense]` (no suffix): today still the legacy maze, so
  that existing configs and stored results are unchanged. Until release 0.1.0 these
  names accepted "-v1" as an alias of the legacy maze; "-v1" now means D4RL's physics.

Inventory names (see `_inventory.py`, POOL's task):

* `inventory-w<w>-h<H>`: lost-sales inventory control of w products over H stages with
  lower one-sided feedback (Definition 2 of POOL, pool.txt), for any w, H >= 1; params
  from `make_inventory_params` (overrides are its keyword arguments, e.g.
  `boundary=0.8`, `demand_series=...`). `registered_envs` lists `INVENTORY_ENVS`, a few
  common ones.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import gymnax

from privrl_jax.envs._base import Environment, GymnaxAdapter
from privrl_jax.envs._inventory import InventoryControl, make_inventory_params
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

# suffix -> physics.
_VERSIONS: dict[str, str] = {"": "legacy", "-legacy": "legacy", "-v1": "d4rl"}

# The D4RL-faithful tasks, named as in D4RL.
D4RL_MAZE_ENVS: tuple[str, ...] = tuple(
    name + dense + "-v1" for name in _MAZES for dense in ("", "-dense")
)

# Every maze name `make` accepts: unsuffixed (legacy), explicit legacy, D4RL's.
MAZE_ENVS: tuple[str, ...] = tuple(
    name + dense + version
    for version in _VERSIONS
    for name in _MAZES
    for dense in ("", "-dense")
)


# Listed inventory names; `make` accepts any inventory-w<w>-h<H> with w, H >= 1.
INVENTORY_ENVS: tuple[str, ...] = (
    "inventory-w1-h5",
    "inventory-w2-h5",
    "inventory-w1-h10",
)
_INVENTORY_NAME = re.compile(r"inventory-w([1-9][0-9]*)-h([1-9][0-9]*)")
_INVENTORY_KWARGS = tuple(
    p
    for p in inspect.signature(make_inventory_params).parameters
    if p not in ("num_products", "horizon")
)


def registered_envs() -> tuple[str, ...]:
    """Names `make` accepts: the maze2d family, listed inventory tasks and gymnax's."""
    return MAZE_ENVS + INVENTORY_ENVS + tuple(gymnax.registered_envs)


def canonical_name(name: str) -> str:
    """The registry's spelling of an env name (today every accepted name is its own).

    Args:
      name: an env name.

    Returns:
      The name `make` looks up; today `name` itself.
    """
    return name


def _parse_maze_name(name: str) -> tuple[str, bool, str] | None:
    """`(base, dense, physics)` of a maze name, or None if it is not one."""
    for suffix, physics in _VERSIONS.items():
        if suffix and not name.endswith(suffix):
            continue
        stem = name[: len(name) - len(suffix)]
        dense = stem.endswith("-dense")
        base = stem[: -len("-dense")] if dense else stem
        if base in _MAZES:
            return base, dense, physics
    return None


def make(name: str, **param_overrides: Any) -> tuple[Environment, Any]:
    """Creates an environment and its default parameters.

    Args:
      name: a maze2d task ("maze2d-umaze", "maze2d-medium", "maze2d-large", each with an
        optional "-dense" and then "-v1" (D4RL's physics) or "-legacy" / nothing
        (privrl_jax's original maze)) or a gymnax name ("MountainCar-v0", ...).
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
    inv = _INVENTORY_NAME.fullmatch(key)
    if inv is not None:
        w, horizon = int(inv.group(1)), int(inv.group(2))
        unknown = set(param_overrides) - set(_INVENTORY_KWARGS)
        if unknown:
            raise ValueError(
                f"unknown params {sorted(unknown)} for env {name!r}; its params are "
                "the keyword arguments of make_inventory_params: "
                f"{list(_INVENTORY_KWARGS)}"
            )
        return InventoryControl(w, horizon), make_inventory_params(
            w, horizon, **param_overrides
        )
    maze = _parse_maze_name(key)
    if maze is not None:
        base, dense, physics = maze
        layout, length = _MAZES[base]
        env = PointMaze(key, layout, length, dense, physics)
        unknown = set(param_overrides) - set(MazeParams.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown params {sorted(unknown)} for env {name!r}; its params are "
                f"{sorted(MazeParams.__dataclass_fields__)}"
            )
        if "physics" in param_overrides:
            raise ValueError(
                "a maze's physics is chosen by its name ('-v1': d4rl, '-legacy': "
                "legacy), not by a param override"
            )
        # Built through make_maze_params so overrides are validated (no tunnelling).
        kwargs = {
            "max_steps_in_episode": length,
            "dense": dense,
            "physics": physics,
            **param_overrides,
        }
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
