"""`privrl launch` and launch_local with workers that join jax.distributed: they die
with the launcher however it dies, a busy run directory is named as busy (no resume
offered), and fresh two-process runs of a pipeline set their directory up once, from
process 0, every time."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from privrl_jax import pipelines, privacy
from privrl_jax.cli.main import app
from privrl_jax.pipelines._launch import ProcessFailedError, launch_local
from privrl_jax.pipelines._rundir import RunLock, lock_holder

WORKER = str(Path(__file__).with_name("_launch_worker.py"))
ROOT = str(Path(__file__).resolve().parents[2])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIVRL_")}
    env.update(
        JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", "")
    )
    return env


def _alive(pid: int) -> bool:
    """Running (a zombie, killed and waiting for its new parent to reap it, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_workers_in_jax_distributed_die_when_the_launcher_is_killed(tmp_path):
    prefix = tmp_path / "pid"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from privrl_jax.pipelines._launch import launch_local; "
            "launch_local(sys.argv[1:], 2, devices_per_process=1)",
            sys.executable,
            WORKER,
            json.dumps({"mode": "sleep", "pids": str(prefix)}),
        ],
        env=_env(),
    )
    files = [Path(f"{prefix}-{p}") for p in (0, 1)]
    pids: list[int] = []
    try:
        # Both wrote their pid after jax.distributed.initialize returned.
        assert _wait_for(lambda: all(f.exists() for f in files), 120), "no workers"
        pids = [int(f.read_text()) for f in files]
        assert all(_alive(p) for p in pids)
        launcher.send_signal(signal.SIGKILL)  # no clean-up of its own can run
        launcher.wait()
        assert _wait_for(lambda: not any(_alive(p) for p in pids), 15), (
            "workers outlived the launcher"
        )
    finally:
        launcher.kill()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_busy_run_directory_is_named_busy_not_offered_a_resume(tmp_path, monkeypatch):
    out = tmp_path / "run"
    with RunLock(out):
        (out / "config.yaml").write_text("seed: 0\n")  # a run's directory
        assert lock_holder(out) == f"pid {os.getpid()}"
        # The CLI refuses before it starts any process.
        with monkeypatch.context() as m:
            m.setattr(pipelines, "launch_local", lambda *a, **k: pytest.fail("ran"))
            res = CliRunner().invoke(
                app, ["launch", "-n", "2", "--", "ope", "run", "--out", str(out)]
            )
        assert res.exit_code == 2
        assert "another run is using" in res.output and "Rerun" not in res.output
        # A process refused by the lock after the launch: the error says who holds it.
        with pytest.raises(ProcessFailedError, match="in use by another running") as e:
            launch_local(
                [sys.executable, "-c", "import sys; sys.exit(2)"], 2, run_dir=out
            )
        assert f"pid {os.getpid()}" in str(e.value) and "Rerun" not in str(e.value)
    assert lock_holder(out) is None
    with pytest.raises(ProcessFailedError, match="Rerun the same command"):
        launch_local([sys.executable, "-c", "import sys; sys.exit(2)"], 2, run_dir=out)


def test_only_process_0_probes_the_lock(tmp_path, monkeypatch):
    """A secondary must not be refused by the lock its own process 0 took."""
    import jax

    from privrl_jax.cli._common import refuse_busy_out

    out = tmp_path / "run"
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    with RunLock(out):
        monkeypatch.setattr(jax, "process_index", lambda: 1)
        refuse_busy_out(out)  # no error
        monkeypatch.setattr(jax, "process_index", lambda: 0)
        with pytest.raises(typer.Exit):
            refuse_busy_out(out)


def test_fresh_two_process_runs_are_set_up_by_process_0_alone(tmp_path):
    """Three fresh directories in one launch, process 0 holding back 2 s before each
    ledger: a secondary that created checkpoints/dp meanwhile would make process 0
    refuse the directory."""
    outs = [str(tmp_path / f"fresh{i}") for i in range(3)]
    launch_local(
        [
            sys.executable,
            WORKER,
            json.dumps({"mode": "gpope", "outs": outs, "delay_primary_s": 2.0}),
        ],
        2,
        devices_per_process=1,
        env=_env(),
    )
    releases = [
        [(r.what, r.count, r.event) for r in privacy.Ledger.load(o).releases]
        for o in outs
    ]
    weights = [json.loads(Path(f"{o}-weights.json").read_text()) for o in outs]
    assert sum(c for _, c, _ in releases[0]) == 40  # gpope/test's steps
    assert releases[1] == releases[2] == releases[0]
    assert weights[1] == weights[2] == weights[0]  # noise_seed: the same release
