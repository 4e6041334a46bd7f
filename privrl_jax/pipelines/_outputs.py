"""Checks on a job's output path, made before the job writes anything or starts work.

Each check raises a one-line `ValueError` that names the path, the problem and the
fix (the command-line options are named, since the CLI shows these messages as is).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_creatable(path: str | os.PathLike, *, option: str = "--out") -> None:
    """`path` (a file or directory, existing or not) can be written by this process.

    Raises:
      ValueError: an ancestor is a file, or the nearest existing ancestor (or `path`
        itself when it is an existing directory) is not a writable directory.
    """
    path = Path(path)
    full = Path(os.path.abspath(path))
    base = _nearest_existing(full)
    if base != full and not base.is_dir():
        raise ValueError(
            f"cannot create {option} {os.fspath(path)!r}: {os.fspath(base)!r} is a "
            f"file, not a directory; choose another {option}."
        )
    # Files are written by write-then-rename, so an existing file needs a writable
    # parent, a new path a writable nearest ancestor.
    target = full if full.is_dir() else (full.parent if full.exists() else base)
    if not os.access(target, os.W_OK | os.X_OK):
        raise ValueError(
            f"cannot write {option} {os.fspath(path)!r}: the directory "
            f"{os.fspath(target)!r} is not writable; choose a writable {option} or fix "
            "its permissions."
        )


def check_output_file(
    path: str | os.PathLike, *, overwrite: bool, option: str = "--out"
) -> None:
    """`path` can be written as a new file (or replaced, with `overwrite`).

    Raises:
      ValueError: `path` is a directory, exists without `overwrite`, or cannot be
        created.
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(
            f"{option} {os.fspath(path)!r} is a directory; give a file path, e.g. "
            f"{os.fspath(p / 'data.hdf5')!r}."
        )
    if p.exists() and not overwrite:
        raise ValueError(
            f"{option} {os.fspath(path)!r} exists; pass --overwrite to replace it or "
            f"choose another {option}."
        )
    check_creatable(path, option=option)
    if p.exists() and not os.access(p, os.W_OK):
        raise ValueError(
            f"cannot replace {option} {os.fspath(path)!r}: the file is not writable; "
            f"choose another {option} or fix its permissions."
        )


def check_output_dir(
    path: str | os.PathLike,
    *,
    owned: Iterable[str],
    finished: str,
    overwrite: bool,
    job: str,
    option: str = "--out",
) -> None:
    """`path` can hold this job's outputs: new, empty, or holding only this job's files.

    Args:
      path: the output directory (need not exist).
      owned: names of the files this job writes (hidden files, i.e. locks and
        temporary files, are always accepted).
      finished: the file that marks a finished run; present without `overwrite`, it
        is an error (a finished run's results are never replaced silently).
      overwrite: accept a finished run (its files will be replaced).
      job: the job's name, for messages ("agent train").
      option: the command-line option that gave `path`.

    Raises:
      ValueError: `path` is a file, not writable, holds someone else's files, or
        holds a finished run and `overwrite` is False.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(
            f"{option} {os.fspath(path)!r} is a file; give a directory for {job}'s "
            "outputs."
        )
    check_creatable(path, option=option)
    if not p.is_dir():
        return
    owned = set(owned)
    foreign = sorted(
        q.name
        for q in p.iterdir()
        if q.name not in owned and not q.name.startswith(".")
    )
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ValueError(
            f"{option} {os.fspath(path)!r} holds files that {job} did not write "
            f"({shown}); choose a new or empty {option} directory."
        )
    if (p / finished).exists() and not overwrite:
        raise ValueError(
            f"{option} {os.fspath(path)!r} holds a finished {job} run ({finished}); "
            f"pass --overwrite to replace it or choose another {option}."
        )
