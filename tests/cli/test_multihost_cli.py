"""The CLI's multi-process options fail with one line on incomplete settings."""

from typer.testing import CliRunner

from privrl_jax.cli.main import app


def test_incomplete_distributed_settings_are_one_line_errors():
    result = CliRunner().invoke(app, ["--num-processes", "2", "privacy", "epsilon", "--help"])
    assert result.exit_code == 2
    assert "error: a multi-process run needs the coordinator address" in result.output
    assert "Traceback" not in result.output


def test_launch_needs_a_command():
    result = CliRunner().invoke(app, ["launch", "-n", "2"])
    assert result.exit_code == 2 and "give the privrl command to run after --" in result.output
