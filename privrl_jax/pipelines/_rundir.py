"""Run directories: one run at a time (a lock), atomic text writes, and stale temporary files.

A run directory is owned by the process that holds its lock. The lock is an ``fcntl.flock`` on
``run_dir/.lock``: the operating system releases it when the process exits, however it exits
(SIGKILL included), so a stale lock can never block a rerun, while a live run blocks a second one
at once.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

LOCK_FILE = ".lock"
# What our atomic writers leave behind when killed mid-write (ledger JSON, HDF5, text).
_TEMP_PATTERNS = ("*.json*.tmp", ".tmp-*.hdf5", ".*.txt.tmp", "*.yaml*.tmp")


class RunDirError(ValueError):
    """The run directory cannot be used (locked by a live run, not writable, someone else's)."""


class RunLock:
    """Holds ``run_dir``'s lock while a run is alive (a context manager).

    Raises:
      RunDirError: another live process holds the lock, or the directory is not writable.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise RunDirError(
                f"cannot write to the run directory {self.run_dir} ({e.strerror}); choose a writable "
                "--out directory."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(
                f"another run is using {self.run_dir} right now (it holds {self.run_dir / LOCK_FILE}); "
                "wait for it to finish or choose another --out directory."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, suffix: str = ".txt.tmp") -> None:
    """Writes ``data`` to ``path`` by write-then-rename: readers see the old file or the new one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give it a normal file's permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode())


def clean_stale_temp_files(directory: str | os.PathLike) -> list[Path]:
    """Deletes temporary files a killed write left in ``directory``; returns what was deleted.

    Call it only while holding the directory's :class:`RunLock`, so no live writer owns them.
    """
    directory = Path(directory)
    removed = []
    if directory.is_dir():
        for pattern in _TEMP_PATTERNS:
            for p in directory.glob(pattern):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed
