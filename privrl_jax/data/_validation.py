"""Boundary checks for transition datasets (host side, NumPy).

Everything that enters the library from a file or a user goes through
`validate_transitions`, which raises a `ValueError` naming the offending key and what to
do about it, and returns a float32 `Transitions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from privrl_jax.data._types import TRANSITION_FIELDS, Transitions

_VALUE_KEYS = ("observations", "actions", "rewards", "next_observations")
_FLAG_KEYS = ("terminals", "timeouts")
_RANKS = {
    "observations": 2,
    "actions": 2,
    "rewards": 1,
    "next_observations": 2,
    "terminals": 1,
    "timeouts": 1,
}


def _where(source: str) -> str:
    return f" in {source}" if source else ""


def validate_transitions(
    data: Transitions | Mapping[str, Any], *, source: str = ""
) -> Transitions:
    """Checks a transition dataset and returns it as a float32 `Transitions`.

    Checks, in order: every D4RL key is present; values are real numbers (flags may
    also be bool) and flags are 0/1; ranks are `[N, d]` for observations, actions and
    next_observations and `[N]` for rewards and flags; all lengths equal and N >= 1;
    observations and next_observations have the same width; no NaN or inf.

    Args:
      data: a `Transitions` or a mapping with the keys observations, actions, rewards,
        next_observations, terminals, timeouts (extra keys are ignored).
      source: where the data came from (a file name), quoted in error messages.

    Returns:
      `Transitions` with float32 numpy-backed jax arrays.

    Raises:
      ValueError: naming the key, what is wrong, and how to fix it.
    """
    if isinstance(data, Transitions):
        data = {k: getattr(data, k) for k in TRANSITION_FIELDS}
    missing = [k for k in TRANSITION_FIELDS if k not in data]
    if missing:
        hint = ""
        if missing == ["next_observations"]:
            hint = (
                " (load D4RL files with privrl_jax.data.load_hdf5, which derives "
                "next_observations from consecutive observations)"
            )
        raise ValueError(
            f"dataset{_where(source)} is missing key(s) {missing}; a D4RL-format "
            "dataset "
            f"needs {list(TRANSITION_FIELDS)}{hint}"
        )
    arrays = {k: np.asarray(data[k]) for k in TRANSITION_FIELDS}
    for k, x in arrays.items():
        kind = x.dtype.kind
        if k in _FLAG_KEYS:
            ok = kind in "biuf"
        else:
            ok = kind in "iuf"
        if not ok:
            expected = (
                "bool or 0/1 numbers" if k in _FLAG_KEYS else "float or int numbers"
            )
            raise ValueError(
                f"key {k!r}{_where(source)} has dtype {x.dtype}, expected {expected}; "
                f"convert it, e.g. with np.asarray(x, np.float32)"
            )
        if x.ndim != _RANKS[k]:
            shape = "[N]" if _RANKS[k] == 1 else "[N, dim]"
            raise ValueError(
                f"key {k!r}{_where(source)} has shape {x.shape}, expected {shape}; "
                + (
                    "reshape it with x.reshape(len(x), -1)"
                    if _RANKS[k] == 2
                    else "flatten it with x.reshape(-1)"
                )
            )
    n = arrays["observations"].shape[0]
    if n == 0:
        raise ValueError(
            f"key 'observations'{_where(source)} is empty; need N >= 1 rows"
        )
    for k, x in arrays.items():
        if x.shape[0] != n:
            raise ValueError(
                f"key {k!r}{_where(source)} has {x.shape[0]} rows but 'observations' "
                "has "
                f"{n}; every key must have one row per transition"
            )
    if arrays["next_observations"].shape != arrays["observations"].shape:
        raise ValueError(
            f"key 'next_observations'{_where(source)} has shape "
            f"{arrays['next_observations'].shape} but 'observations' has "
            f"{arrays['observations'].shape}; they must match"
        )
    for k, x in arrays.items():
        if x.dtype.kind == "f":
            bad = ~np.isfinite(x)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise ValueError(
                    f"key {k!r}{_where(source)} has {int(bad.sum())} NaN/inf value(s), "
                    f"first at row {row}; drop or repair those rows before loading"
                )
    for k in _FLAG_KEYS:
        x = arrays[k]
        if x.dtype.kind != "b" and not np.isin(x, (0, 1)).all():
            bad = np.unique(x[~np.isin(x, (0, 1))])[:5]
            raise ValueError(
                f"key {k!r}{_where(source)} must hold only 0/1 (or bool), found {bad}; "
                f"threshold it, e.g. (x > 0.5)"
            )
    return Transitions(
        **{k: jnp.asarray(x.astype(np.float32)) for k, x in arrays.items()}
    )
