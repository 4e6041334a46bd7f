"""Run directories: a live run blocks a second one, a killed one does not; atomic
writes."""

import os
import subprocess
import sys
import time

import pytest

from privrl_jax.pipelines._rundir import (
    RunDirError,
    RunLock,
    atomic_write_text,
    clean_stale_temp_files,
)


def test_second_lock_fails_at_once_and_release_frees_it(tmp_path):
    with RunLock(tmp_path):
        t0 = time.perf_counter()
        with pytest.raises(RunDirError, match="another run is using"):
            with RunLock(tmp_path):
                pass
        assert time.perf_counter() - t0 < 1.0
    with RunLock(tmp_path):  # free again
        pass


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    code = (
        f"from privrl_jax.pipelines._rundir import RunLock; import time\n"
        f"l = RunLock({str(tmp_path)!r}).__enter__(); print('held', flush=True); "
        "time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(RunDirError):
        RunLock(tmp_path).__enter__()
    proc.kill()
    proc.wait()
    with RunLock(tmp_path):
        pass


def test_unwritable_directory_is_a_clear_error(tmp_path):
    if os.geteuid() == 0:
        target = (
            tmp_path / "file"
        )  # root can write anywhere: use a path under a regular file
        target.write_text("x")
        bad = target / "run"
    else:
        bad = tmp_path / "ro"
        bad.mkdir(mode=0o500)
    with pytest.raises(RunDirError, match="cannot write to the run directory"):
        RunLock(bad).__enter__()


def test_atomic_write_and_temp_cleanup(tmp_path):
    atomic_write_text(tmp_path / "a.yaml", "x: 1\n")
    assert (tmp_path / "a.yaml").read_text() == "x: 1\n"
    assert oct((tmp_path / "a.yaml").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    for name in ("ledger.json12345.tmp", ".tmp-abc.hdf5", ".a.yaml.xyz.txt.tmp"):
        (tmp_path / name).write_text("")
    removed = clean_stale_temp_files(tmp_path)
    assert sorted(p.name for p in removed) == sorted(
        ["ledger.json12345.tmp", ".tmp-abc.hdf5", ".a.yaml.xyz.txt.tmp"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml"]


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m
