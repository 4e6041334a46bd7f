"""Two processes (jax.distributed, gloo on loopback, 2 CPU devices each) make the same
DP release as one process with one device: same parameters, same ledger, one writer; a
process killed mid-run fails the run with a clear error and a rerun resumes to the same
end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privrl_jax import privacy
from privrl_jax.pipelines._launch import ProcessFailedError, launch_local

WORKER = str(Path(__file__).with_name("_multihost_worker.py"))
STEPS, EVERY = 12, 3
ROOT = str(Path(__file__).resolve().parents[2])


def _env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVRL_")}
    env.update(
        JAX_PLATFORMS="cpu",
        PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""),
        XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} "
        f"--xla_force_host_platform_device_count={devices}",
    )
    return env


def _cfg(out, methods, data_parallel, die=None) -> str:
    cfg = {
        "out": str(out),
        "methods": methods,
        "steps": STEPS,
        "every": EVERY,
        "data_parallel": data_parallel,
    }
    if die:
        cfg["die"] = die
    return json.dumps(cfg)


def _one_process(out, devices, methods):
    cmd = [sys.executable, WORKER, _cfg(out, methods, devices > 1)]
    res = subprocess.run(
        cmd, env=_env(devices), capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(Path(f"{out}-result-0.json").read_text())


def _two_processes(out, methods, die=None):
    env = _env(2)
    env["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")  # launch_local adds the devices
    launch_local(
        [sys.executable, WORKER, _cfg(out, methods, True, die)],
        2,
        devices_per_process=2,
        env=env,
    )
    return [json.loads(Path(f"{out}-result-{p}.json").read_text()) for p in (0, 1)]


def _releases(run_dir):
    ledger = privacy.Ledger.load(run_dir)
    return [(r.what, r.count, r.event) for r in ledger.releases]


def _max_diff(a, b):
    return max(float(np.max(np.abs(np.array(x) - np.array(y)))) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multihost")
    methods = ["vmap", "ghost"]
    return tmp, {
        "one": _one_process(tmp / "one", 1, methods),
        "two": _two_processes(tmp / "two", methods),
    }


@pytest.mark.parametrize("method", ["vmap", "ghost"])
def test_two_processes_release_what_one_process_releases(runs, method):
    tmp, res = runs
    # One process with 4 devices equals one device in tests/privacy/test_multidevice.py.
    one, (p0, p1) = res["one"][method], res["two"]
    assert p0["devices"] == p1["devices"] == 2
    assert p0["num_processes"] == 2
    # Empty batches happen and still take their noisy step.
    assert 0 in one["sampled_units"] and len(one["sampled_units"]) == STEPS
    # Same global sample everywhere; each process clipped only the units of its own
    # block.
    assert (
        p0[method]["sampled_units"]
        == p1[method]["sampled_units"]
        == one["sampled_units"]
    )
    np.testing.assert_array_equal(
        np.add(p0[method]["local_units"], p1[method]["local_units"]),
        one["sampled_units"],
    )
    # Process 1 was handed a different secret: process 0's was broadcast and used.
    assert p1[method]["secret"] == p0[method]["secret"] == one["secret"]
    # Same parameters, up to float summation order; identical on both processes (noise
    # drawn once from the replicated key, the sum replicated bit for bit).
    assert _max_diff(one["params"], p0[method]["params"]) < 1e-5
    assert p0[method]["params"] == p1[method]["params"]
    # One writer: the 2-process ledger is the 1-process ledger, entry for entry.
    two_releases = _releases(tmp / f"two-{method}")
    assert two_releases == _releases(tmp / f"one-{method}")
    assert sum(count for _, count, _ in two_releases) == STEPS


# Default run (issue 47): a kill and a resume of two processes, vmap only; one-process
# resume is in test_dp_loop and test_fit.
def test_a_killed_process_fails_the_run_and_a_rerun_resumes_to_the_same_release(
    runs, tmp_path
):
    tmp, res = runs
    out = tmp_path / "killed"
    with pytest.raises(
        ProcessFailedError, match=r"process 1 of 2 exited with code 3.*Rerun"
    ):
        _two_processes(out, ["vmap"], die="1:7")
    # The steps before the last checkpoint are recorded; the ones after it are not yet
    # spent.
    assert sum(c for _, c, _ in _releases(tmp_path / "killed-vmap")) == 6
    p0, p1 = _two_processes(out, ["vmap"])
    assert (
        p0["vmap"]["params"] == p1["vmap"]["params"] == res["two"][0]["vmap"]["params"]
    )
    assert _releases(tmp_path / "killed-vmap") == _releases(tmp / "two-vmap")
