"""The CLI's multi-process options fail with one line on incomplete settings."""

import pytest
from typer.testing import CliRunner

from privrl_jax.cli.main import app


def test_incomplete_distributed_settings_are_one_line_errors():
    result = CliRunner().invoke(
        app, ["--num-processes", "2", "privacy", "epsilon", "--help"]
    )
    assert result.exit_code == 2
    assert "error: a multi-process run needs the coordinator address" in result.output
    assert "Traceback" not in result.output


def test_launch_needs_a_command():
    result = CliRunner().invoke(app, ["launch", "-n", "2"])
    assert (
        result.exit_code == 2
        and "give the privrl command to run after --" in result.output
    )


@pytest.mark.parametrize(
    "sig", ["SIGKILL", pytest.param("SIGTERM", marks=pytest.mark.slow)]
)
def test_killing_the_launcher_stops_its_workers(tmp_path, sig):
    """Workers must not outlive a killed launcher (they would go on spending and holding
    the
    run directory's lock): SIGKILL via the kernel's parent-death signal, SIGTERM via
    clean-up."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    worker = (
        f"import os, time; open(os.path.join({str(tmp_path)!r}, "
        "os.environ['PRIVRL_PROCESS_ID']), "
        "'w').write(str(os.getpid())); time.sleep(120)"
    )
    launcher = textwrap.dedent(f"""
        import sys
        from privrl_jax.pipelines._launch import launch_local
        launch_local([sys.executable, "-c", {worker!r}], 2)
    """)
    proc = subprocess.Popen([sys.executable, "-c", launcher])
    deadline = time.time() + 60
    while len([p for p in tmp_path.iterdir()]) < 2:
        assert time.time() < deadline and proc.poll() is None, (
            "the workers never started"
        )
        time.sleep(0.1)
    pids = [int(p.read_text()) for p in tmp_path.iterdir()]
    proc.send_signal(getattr(signal, sig))
    proc.wait(timeout=60)

    def alive(pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                return "\nState:\tZ" not in f.read()  # a zombie has exited
        except FileNotFoundError:
            return False

    deadline = time.time() + 30
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    survivors = [p for p in pids if alive(p)]
    for p in survivors:
        os.kill(p, signal.SIGKILL)
    assert not survivors
