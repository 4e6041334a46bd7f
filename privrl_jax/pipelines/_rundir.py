"""Run directories: one run at a time (a lock), atomic writes, stale temporary files.

A run directory is owned by the process that holds its lock. The lock is an
``fcntl.flock`` on ``run_dir/.lock``: the operating system releases it when the process
exits, however it exits (SIGKILL included), so a stale lock can never block a rerun,
while a live run blocks a second one at once.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from privrl_jax.privacy import Topology

T = TypeVar("T")

LOCK_FILE = ".lock"
# What our atomic writers leave behind when killed mid-write (ledger JSON, HDF5, text).
_TEMP_PATTERNS = ("*.json*.tmp", ".tmp-*.hdf5", ".*.txt.tmp", "*.yaml*.tmp")


class RunDirError(ValueError):
    """The run directory cannot be used.

    It is locked by a live run, not writable, or someone else's.
    """


class RunLock:
    """Holds ``run_dir``'s lock while a run is alive (a context manager).

    Raises:
      RunDirError: another live process holds the lock, or the directory is not
        writable.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> RunLock:
        self._created = not self.run_dir.exists()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirError(
                f"cannot write to the run directory {self.run_dir} ({e.strerror}); "
                "choose a writable "
                "--out directory."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(
                f"another run is using {self.run_dir} right now (it holds "
                f"{self.run_dir / LOCK_FILE}); "
                "wait for it to finish or choose another --out directory."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            # A run refused before it wrote anything leaves the directory as it found
            # it: the lock file goes while we still hold the lock (no other run can own
            # it yet).
            try:
                empty = not any(p.name != LOCK_FILE for p in self.run_dir.iterdir())
            except OSError:  # the directory went away or became unreadable: leave it be
                empty = False
            if empty:
                (self.run_dir / LOCK_FILE).unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            if empty and self._created:
                try:
                    self.run_dir.rmdir()
                except OSError:
                    pass  # something appeared meanwhile: leave it


def lock_holder(run_dir: str | os.PathLike) -> str | None:
    """Who holds ``run_dir``'s lock now (``"pid N"``, as it wrote), or None.

    None when no live process does. A probe: it creates nothing and takes the lock for
    no longer than the probe.
    """
    lock = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None  # no lock file: no live run there
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.read(fd, 32).decode(errors="replace").strip()
        return f"pid {pid}" if pid.isdigit() else "a process"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def private_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and its parents) readable by its owner only.

    It holds a noise secret.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def atomic_write_bytes(
    path: str | os.PathLike,
    data: bytes,
    *,
    suffix: str = ".txt.tmp",
    secret: bool = False,
) -> None:
    """Write ``data`` to ``path`` by write-then-rename.

    Readers see the old file or the new one.

    ``secret=True`` keeps mkstemp's 0600 (owner only): for files that hold a noise
    secret.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if not secret:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(
                tmp, 0o666 & ~umask
            )  # mkstemp makes 0600; give it a normal file's permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_png(
    fig: Any, path: str | os.PathLike, *, dpi: int = 100, tight: bool = False
) -> None:
    """Render a matplotlib ``Figure`` to PNG and write it atomically.

    The pipelines' one PNG writer.

    ``tight`` crops the figure to its drawn contents (``bbox_inches="tight"``).
    """
    buf = io.BytesIO()
    fig.savefig(
        buf, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {})
    )
    atomic_write_bytes(path, buf.getvalue(), suffix=".png.tmp")


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode())


def fresh_run_dir(run_dir: str | os.PathLike, resolved: dict[str, Any]) -> Path:
    """Make a new run directory and write its ``config.yaml`` (a one-shot run's).

    For pipelines that do not resume: a directory holding files is refused.

    Args:
      run_dir: a new or empty directory.
      resolved: the run's config as a dict (what ``config.yaml`` holds).

    Returns:
      ``run_dir`` as a Path.

    Raises:
      ValueError: ``run_dir`` holds files.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ValueError(f"{run_dir} is not empty; pick a new run directory.")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(resolved))
    return run_dir


def write_report(run_dir: Path, report: dict[str, Any]) -> None:
    """Writes ``report`` to ``run_dir/report.json`` (atomically; numbers as floats)."""
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=1, default=float)
    )


def clean_stale_temp_files(directory: str | os.PathLike) -> list[Path]:
    """Delete temporary files a killed write left in ``directory``.

    Returns what was deleted.

    Call it only while holding the directory's :class:`RunLock`, so no live writer owns
    them.
    """
    directory = Path(directory)
    removed = []
    if directory.is_dir():
        for pattern in _TEMP_PATTERNS:
            for p in directory.glob(pattern):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def refuse_other_run(
    run_dir: Path, resolved: dict, method: str, mutable: tuple[str, ...] = ()
) -> None:
    """Raise unless ``run_dir`` is empty or holds this method's run of this config.

    That is, a run of ``method`` with the config ``resolved``.

    Sections named in ``mutable`` (e.g. ``eval``, which only re-reads a finished
    release) may differ; anything else would mix two runs' checkpoints and ledger in one
    directory.
    """
    cfg_file = run_dir / "config.yaml"
    if cfg_file.exists():
        previous = yaml.safe_load(cfg_file.read_text()) or {}
        fixed = lambda d: {k: v for k, v in d.items() if k not in mutable}  # noqa: E731
        if fixed(previous) != fixed(resolved):
            may = (
                f" (only the {' and '.join(mutable)} section may change)"
                if mutable
                else ""
            )
            raise ValueError(
                f"{run_dir} holds a run with a different config ({cfg_file}); resume "
                "it with the same "
                f"config{may} or choose a new --out directory."
            )
    elif any(p.name != LOCK_FILE for p in run_dir.iterdir()):
        raise ValueError(
            f"{run_dir} is not empty and holds no {method} run (no config.yaml); "
            "choose an empty or "
            "new --out directory."
        )


def run_in_dir(run_dir: Path, body: Callable[[Path, Topology], T]) -> T:
    """Run ``body(run_dir, topology)`` with the directory locked.

    On process 0 of a multi-process run.

    The other processes of a ``jax.distributed`` run compute their share without the
    lock (they write nothing; process 0 owns the directory): see docs/multihost.md.
    """
    topo = Topology.current()
    if not topo.is_primary:
        return body(run_dir, topo)
    with RunLock(run_dir):
        clean_stale_temp_files(run_dir)
        return body(run_dir, topo)


def wait_for_primary(topo: Topology, name: str) -> None:
    """Hold every process of a multi-process run at barrier ``name``.

    A no-op in one process.

    Process 0 alone creates a run directory's files: the others call this after the
    point where process 0 has set the directory up (its config and ledger), and only
    then create anything there (their part of the checkpoints). Otherwise a secondary's
    ``checkpoints/dp`` could appear before process 0 opens a fresh ledger, which then
    (rightly) refuses a directory that shows releases without a ledger.
    """
    if topo.distributed:
        from jax.experimental import multihost_utils  # noqa: PLC0415

        multihost_utils.sync_global_devices(name)


def not_private_mark(warning: str, noise_seed: int | None) -> str | None:
    """The ledger's not-private mark for a run whose noise a public seed fixes.

    None if the run is private.
    """
    return None if noise_seed is None else warning.removeprefix("NOT PRIVATE: ")
