"""One-line errors: every expected failure of every command is `error: ...` on stderr,
exit status 2, no traceback (unless --debug), and nothing written or spent."""

import errno

import pytest
import yaml
from typer.testing import CliRunner

from privrl_jax import privacy
from privrl_jax.cli.main import app
from privrl_jax.pipelines import privorl_n
from privrl_jax.pipelines._rundir import RunDirError


def assert_one_line_error(result, *fragments: str) -> None:
    """Exit 2, one `error:` line on stderr naming every fragment, no traceback."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, (
        result.stderr
    )
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_missing_file(tmp_path):
    result = invoke("data", "info", str(tmp_path / "nope.hdf5"))
    assert_one_line_error(result, "no dataset file", "nope.hdf5", "check the path")


def test_non_hdf5_file(tmp_path):
    path = tmp_path / "notes.hdf5"
    path.write_text("not hdf5\n")
    result = invoke("data", "info", str(path))
    assert_one_line_error(
        result, "is not a readable HDF5 file", "file signature not found", "D4RL-format"
    )


def test_directory_instead_of_file(tmp_path):
    result = invoke("data", "info", str(tmp_path))
    assert_one_line_error(result, "is a directory", "D4RL-format HDF5 file")


@pytest.mark.parametrize("group", ["data collect", "agent train", "synth transitions"])
def test_yaml_syntax_error(tmp_path, group):
    bad = tmp_path / "bad.yaml"
    bad.write_text("size: [1, 2\nseed: 0\n")
    out = tmp_path / "out"
    result = invoke(*group.split(), "--config", str(bad), "--out", str(out))
    assert_one_line_error(result, "not valid YAML", "bad.yaml")
    assert not out.exists()


def test_unknown_env(tmp_path):
    out = tmp_path / "run"
    result = invoke(
        "agent",
        "train",
        "--algo",
        "td3bc",
        "--dataset",
        str(tmp_path / "d.hdf5"),
        "--env",
        "maze2d-tiny",
        "--out",
        str(out),
    )
    assert_one_line_error(result, "unknown env name 'maze2d-tiny'")
    assert not out.exists()


@pytest.fixture
def raising_run(monkeypatch):
    """`privorl_n.run` replaced by one that raises the given error."""
    box = {}

    def fake_run(cfg, out):
        raise box["error"]

    monkeypatch.setattr(privorl_n, "run", fake_run)
    return box


@pytest.mark.parametrize(
    ("error", "fragment"),
    [
        (
            privacy.BudgetExceededError(
                "epsilon 10.99 > budget 10; lower finetune.epochs"
            ),
            "epsilon 10.99 > budget 10",
        ),
        (privacy.LedgerError("ledger.json was edited; restore it"), "was edited"),
        (RunDirError("another run is using runs/x right now"), "another run is using"),
        (
            PermissionError(errno.EACCES, "Permission denied", "runs/x/ckpt"),
            "Permission denied: runs/x/ckpt; check its permissions",
        ),
        (
            yaml.YAMLError("mapping values\nare not allowed here"),
            "mapping values are not allowed here",
        ),
    ],
)
@pytest.mark.parametrize("command", ["quickstart", "synth transitions"])
def test_pipeline_errors_become_one_line(
    tmp_path, raising_run, error, fragment, command
):
    raising_run["error"] = error
    args = [*command.split(), "--out", str(tmp_path / "r")]
    if command != "quickstart":
        args += ["--config", "test"]
    assert_one_line_error(invoke(*args), fragment)


def test_debug_adds_the_traceback(tmp_path, raising_run):
    raising_run["error"] = privacy.BudgetExceededError("over budget")
    args = ["synth", "transitions", "--config", "test", "--out", str(tmp_path / "r")]
    result = invoke("--debug", *args)
    assert result.exit_code == 2
    assert "Traceback" in result.stderr and "BudgetExceededError" in result.stderr
    assert result.stderr.endswith("error: over budget\n")
    result = CliRunner(env={"PRIVRL_DEBUG": "1"}).invoke(app, args)
    assert result.exit_code == 2 and "Traceback" in result.stderr


def test_a_bug_keeps_its_traceback(tmp_path, raising_run):
    raising_run["error"] = KeyError("oops")  # not an expected failure: a bug
    args = ["synth", "transitions", "--config", "test", "--out", str(tmp_path / "r")]
    result = invoke(*args)
    assert result.exit_code == 1 and isinstance(result.exception, KeyError)


def test_privacy_commands_keep_one_line_errors():
    result = invoke(
        "privacy",
        "epsilon",
        "--noise-multiplier",
        "1",
        "--steps",
        "10",
        "--delta",
        "1e-5",
        "--sampling",
        "uniform_one",
    )
    assert_one_line_error(result, "--dataset-size")


@pytest.mark.parametrize(
    "command",
    [
        ["pool", "run"],
        ["ope", "run"],
        ["synth", "transitions"],
        ["synth", "trajectories"],
    ],
)
def test_a_busy_out_directory_is_refused_before_any_set_up(
    tmp_path, command, monkeypatch
):
    """A live run holds the lock: the second command fails on one line before it loads
    its
    config or builds anything (the pipelines' load is made to fail loudly if reached).
    """
    from privrl_jax.cli import _common
    from privrl_jax.pipelines import _rundir

    assert _common.RUN_LOCK_FILE == _rundir.LOCK_FILE
    for mod in ("pool", "ope", "synth"):
        monkeypatch.setattr(
            f"privrl_jax.cli.{mod}.load_or_fail",
            lambda *a, **k: pytest.fail("set-up was reached"),
        )
    with _rundir.RunLock(tmp_path):
        res = CliRunner().invoke(app, [*command, "--out", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert (
        "another run is using" in res.output
        and len(res.output.strip().splitlines()) == 1
    )
    # Without a lock file the probe creates nothing.
    free = tmp_path / "free"
    free.mkdir()
    _common.refuse_busy_out(free)
    assert not (free / ".lock").exists()
