"""HDF5 files: one-line errors for files that are not HDF5, no-clobber writes, normal
permissions, and removal of what killed writes left behind (never a live writer's)."""

import fcntl
import os

import numpy as np
import pytest

from privrl_jax import data
from privrl_jax.data._hdf5 import remove_stale_hdf5_temps


def _transitions(n: int = 20) -> data.Transitions:
    rng = np.random.default_rng(0)
    return data.Transitions(
        observations=rng.normal(size=(n, 4)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rewards=np.zeros(n, np.float32),
        next_observations=rng.normal(size=(n, 4)).astype(np.float32),
        terminals=np.zeros(n, np.float32),
        timeouts=np.zeros(n, np.float32),
    )


def test_a_file_that_is_not_hdf5_is_a_one_line_value_error(tmp_path):
    path = tmp_path / "d.hdf5"
    path.write_bytes(b"\x00" * 100)
    for read in (data.load_hdf5, data.read_hdf5_metadata):
        with pytest.raises(ValueError, match="not a readable HDF5 file") as e:
            read(path)
        assert "\n" not in str(e.value) and "D4RL-format" in str(e.value)
    with pytest.raises(ValueError, match="is a directory"):
        data.load_hdf5(tmp_path)
    with pytest.raises(FileNotFoundError) as e:
        data.load_hdf5(tmp_path / "nope.hdf5")
    assert e.value.filename == str(tmp_path / "nope.hdf5")


def test_no_overwrite_keeps_an_existing_file(tmp_path):
    path = tmp_path / "d.hdf5"
    path.write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        data.save_hdf5(path, _transitions(), overwrite=False)
    assert path.read_bytes() == b"someone else's"
    assert os.listdir(tmp_path) == ["d.hdf5"]  # no temporary file left
    data.save_hdf5(path, _transitions())  # the default replaces (run directories)
    assert len(data.load_hdf5(path)) == 20


def test_written_with_a_normal_files_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        data.save_hdf5(tmp_path / "d.hdf5", _transitions(), overwrite=False)
    finally:
        os.umask(old)
    assert (tmp_path / "d.hdf5").stat().st_mode & 0o777 == 0o640


def test_stale_temps_are_removed_live_ones_kept(tmp_path):
    target = tmp_path / "d.hdf5"
    stale = tmp_path / ".tmp-d.hdf5-abc123.hdf5"  # a killed writer's (0 bytes)
    stale.write_bytes(b"")
    live = tmp_path / ".tmp-d.hdf5-live99.hdf5"
    live.write_bytes(b"")
    other = tmp_path / ".tmp-e.hdf5-abc123.hdf5"  # another target's: not ours
    other.write_bytes(b"")
    fd = os.open(live, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as save_hdf5 holds it while writing
    try:
        assert remove_stale_hdf5_temps(target) == [str(stale)]
    finally:
        os.close(fd)
    assert not stale.exists() and live.exists() and other.exists()
