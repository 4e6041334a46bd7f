"""D4RL-format HDF5 read/write, and Minari files read (host side).

Layout (D4RL, and Minari datasets exported to D4RL format): top-level datasets
`observations` [N, obs_dim], `actions` [N, act_dim], `rewards` [N], `terminals` [N]
(bool), `timeouts` [N] (bool) and optionally `next_observations` [N, obs_dim]; any other
keys (`infos/*`, `metadata/*`) are ignored. File attributes hold our metadata.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np

from privrl_jax.data._types import TRANSITION_FIELDS, Transitions
from privrl_jax.data._validation import validate_transitions

_REQUIRED = ("observations", "actions", "rewards", "terminals", "timeouts")
_FORMAT_HINT = (
    "give a D4RL-format HDF5 file (datasets observations, actions, rewards, "
    "terminals, timeouts)"
)


def _open_hdf5(path: str) -> h5py.File:
    """`h5py.File(path, "r")` with one-line errors that name the file and the fix.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a directory, an unreadable file, or a file that is not HDF5.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no dataset file", path)
    if os.path.isdir(path):
        raise ValueError(f"dataset path {path!r} is a directory; {_FORMAT_HINT}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        # h5py's messages span lines; the first clause names the problem.
        reason = " ".join(str(e).split()).split(", filename =")[0]
        if isinstance(e, PermissionError) or not os.access(path, os.R_OK):
            raise ValueError(
                f"cannot read dataset {path!r} (permission denied); check its "
                "permissions"
            ) from None
        raise ValueError(
            f"dataset {path!r} is not a readable HDF5 file ({reason}); {_FORMAT_HINT}"
        ) from None


def derive_next_observations(data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Adds `next_observations` to a D4RL dict that lacks it.

    As `d4rl.qlearning_dataset` does: `next_observations[i] = observations[i + 1]`
    inside an episode. Rows whose successor is unknown are dropped: rows with
    `timeouts` set (the next row starts a new episode) and a final row that is not
    terminal. Terminal rows are kept with `next_observations[i] = observations[i]`
    (it is multiplied by `1 - terminal` in any TD target). The row before a dropped
    one gets `timeouts = 1` so episode boundaries survive.

    Args:
      data: mapping with observations, actions, rewards, terminals, timeouts ([N, ...]).

    Returns:
      A new dict with all six keys and M <= N rows.
    """
    obs = np.asarray(data["observations"])
    terminals = np.asarray(data["terminals"]) > 0
    timeouts = np.asarray(data["timeouts"]) > 0
    n = obs.shape[0]
    next_obs = np.empty_like(obs)
    next_obs[:-1] = obs[1:]
    next_obs[-1] = obs[-1]
    next_obs[terminals] = obs[terminals]
    drop = timeouts & ~terminals
    if n and not terminals[-1]:
        drop[-1] = True
    new_timeouts = np.zeros(n, bool)
    prev = np.flatnonzero(drop) - 1
    prev = prev[prev >= 0]
    prev = prev[~drop[prev] & ~terminals[prev]]
    new_timeouts[prev] = True
    keep = ~drop
    out = {k: np.asarray(data[k])[keep] for k in ("observations", "actions", "rewards")}
    out["next_observations"] = next_obs[keep]
    out["terminals"] = terminals[keep]
    out["timeouts"] = new_timeouts[keep]
    return out


def _read_minari(f: h5py.File, path: str, observation_key: str | None) -> dict:
    """Flattens Minari's per-episode groups into D4RL's flat layout."""
    names = sorted(
        (k for k in f if k.startswith("episode_")), key=lambda k: int(k.split("_")[-1])
    )
    parts: dict[str, list[np.ndarray]] = {k: [] for k in TRANSITION_FIELDS}
    for name in names:
        ep = f[name]
        for k in ("observations", "actions", "rewards", "terminations", "truncations"):
            if k not in ep:
                raise ValueError(
                    f"Minari episode {name!r} in {path!r} is missing key {k!r}; a "
                    "Minari "
                    f"episode needs observations, actions, rewards, terminations, "
                    f"truncations"
                )
        obs = ep["observations"]
        if isinstance(obs, h5py.Group):
            if observation_key is None or observation_key not in obs:
                raise ValueError(
                    f"Minari episode {name!r} in {path!r} has dict observations with "
                    f"keys {sorted(obs)}; pass observation_key=<one of them> "
                    f"(got {observation_key!r})"
                )
            obs = obs[observation_key]
        obs = obs[()]
        n = ep["actions"].shape[0]
        if obs.shape[0] != n + 1:
            raise ValueError(
                f"key 'observations' of Minari episode {name!r} in {path!r} has "
                f"{obs.shape[0]} rows, expected len(actions) + 1 = {n + 1}"
            )
        parts["observations"].append(obs[:-1])
        parts["next_observations"].append(obs[1:])
        parts["actions"].append(ep["actions"][()])
        parts["rewards"].append(ep["rewards"][()])
        parts["terminals"].append(ep["terminations"][()])
        truncations = np.asarray(ep["truncations"][()], bool).copy()
        if n and not ep["terminations"][-1]:
            truncations[-1] = True  # an episode's end is a boundary in flat data
        parts["timeouts"].append(truncations)
    return {k: np.concatenate(v) for k, v in parts.items()}


def load_hdf5(
    path: str | os.PathLike,
    *,
    derive_next: bool = True,
    observation_key: str | None = None,
) -> Transitions:
    """Reads a D4RL-format (or Minari) HDF5 file into validated float32 `Transitions`.

    Two layouts are recognised: D4RL's flat datasets (see the module docstring), and
    Minari's `main_data.hdf5` with one `episode_<i>` group per episode
    (`observations` [T + 1, d], `actions`, `rewards`, `terminations`, `truncations`
    [T]), which is flattened episode by episode (the last step of an episode that
    did not terminate is marked as a timeout).

    Args:
      path: the file.
      derive_next: when a D4RL file has no `next_observations` (original D4RL files),
        derive them with `derive_next_observations` (dropping rows whose successor is
        unknown); when False, such a file is an error.
      observation_key: for Minari files with dict observations, the entry to use
        (e.g. "observation" for Minari's point mazes).

    Returns:
      `Transitions` [N].

    Raises:
      FileNotFoundError: no such file.
      ValueError: not an HDF5 file, a missing key, mismatched lengths, NaN/inf or a
        wrong dtype (the message names the key).
    """
    path = os.fspath(path)
    with _open_hdf5(path) as f:
        if "observations" not in f and any(k.startswith("episode_") for k in f):
            return validate_transitions(
                _read_minari(f, path, observation_key), source=path
            )
        missing = [k for k in _REQUIRED if k not in f]
        if missing:
            raise ValueError(
                f"dataset {path!r} is missing key(s) {missing}; a D4RL-format file "
                "needs "
                f"{list(_REQUIRED)} (and optionally 'next_observations')"
            )
        keys = [k for k in TRANSITION_FIELDS if k in f]
        data = {}
        for k in keys:
            if not isinstance(f[k], h5py.Dataset):
                raise ValueError(f"key {k!r} in {path!r} is a group, expected an array")
            data[k] = f[k][()]
    if "next_observations" not in data:
        if not derive_next:
            raise ValueError(
                f"dataset {path!r} is missing key 'next_observations'; pass "
                f"derive_next=True to derive it from consecutive observations"
            )
        # Validate before deriving so that errors name the key in the file.
        validate_transitions(
            {**data, "next_observations": data["observations"]}, source=path
        )
        data = derive_next_observations(data)
    return validate_transitions(data, source=path)


def read_hdf5_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """Reads the file-level attributes written by `save_hdf5` (env name, seed, ...).

    Args:
      path: an HDF5 file.

    Returns:
      The attributes by name; NumPy scalars are converted to Python scalars.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a directory, an unreadable file, or a file that is not HDF5.
    """
    with _open_hdf5(os.fspath(path)) as f:
        return {
            k: (v.item() if isinstance(v, np.generic) else v)
            for k, v in f.attrs.items()
        }


def _temp_prefix(path: str) -> str:
    # Named after the target so a later writer of the same file can find (and remove)
    # what a killed one left; ".tmp-" keeps the pattern run directories clean up.
    return f".tmp-{os.path.basename(path)}-"


def save_hdf5(
    path: str | os.PathLike,
    transitions: Transitions,
    *,
    metadata: Mapping[str, str | int | float | bool] | None = None,
    compression: str | None = None,
    overwrite: bool = True,
) -> None:
    """Writes `Transitions` as a D4RL-format HDF5 file, atomically.

    The data are validated, written to a temporary file in the target directory, then
    moved into place, so a crash never leaves a partial file under `path`. The
    temporary file is locked while it is written (`remove_stale_hdf5_temps` removes
    only unlocked ones). Values are stored as float32 and flags as bool (D4RL's
    dtypes), so `load_hdf5` returns exactly what was saved. The file gets a normal
    file's permissions (0666 minus the umask).

    Args:
      path: destination (parent directories are created).
      transitions: [N] data.
      metadata: scalar file attributes (e.g. env name, seed, size).
      compression: h5py compression ("gzip", "lzf") or None.
      overwrite: replace an existing file; when False an existing file (also one that
        appears while this one is written) is a `FileExistsError` and is kept.

    Raises:
      ValueError: invalid data or metadata.
      FileExistsError: `path` exists and `overwrite` is False.
    """
    data = validate_transitions(transitions)
    path = os.fspath(path)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, "the output file exists", path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=_temp_prefix(path), suffix=".hdf5")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the OS if this process dies
        # HDF5's own file lock would collide with ours; the file is private anyway.
        with h5py.File(tmp, "w", locking=False) as f:
            for k in TRANSITION_FIELDS:
                x = np.asarray(getattr(data, k))
                if k in ("terminals", "timeouts"):
                    x = x > 0
                f.create_dataset(k, data=x, compression=compression)
            for k, v in (metadata or {}).items():
                if not isinstance(v, (str, int, float, bool, np.generic)):
                    raise ValueError(
                        f"metadata[{k!r}] = {v!r} must be a str, int, float or bool"
                    )
                f.attrs[k] = v
        # mkstemp creates the file 0600; give it the permissions of a normal file.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if overwrite:
            os.replace(tmp, path)
        else:
            # link() fails if the name exists: an atomic no-clobber publish, so a
            # concurrent writer's file is never replaced.
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExistsError(
                    errno.EEXIST, "the output file appeared while writing", path
                ) from None
            os.remove(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    finally:
        os.close(fd)


def remove_stale_hdf5_temps(path: str | os.PathLike) -> list[str]:
    """Removes the temporary files killed `save_hdf5(path, ...)` calls left behind.

    A live writer holds a lock on its temporary file, so only files of dead writers
    are removed.

    Args:
      path: the destination that was passed to `save_hdf5`; its temporary files
        live beside it.

    Returns:
      The paths of the removed files (empty when there were none, or when the
      parent directory does not exist).
    """
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    prefix = _temp_prefix(path)
    removed = []
    if not os.path.isdir(parent):
        return removed
    for name in os.listdir(parent):
        if not (name.startswith(prefix) and name.endswith(".hdf5")):
            continue
        tmp = os.path.join(parent, name)
        try:
            fd = os.open(tmp, os.O_RDWR)
        except OSError:
            continue  # gone already, or not ours to touch
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live writer
        else:
            os.remove(tmp)
            removed.append(tmp)
        finally:
            os.close(fd)
    return removed
