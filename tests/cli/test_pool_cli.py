"""`privrl pool run`: one clear error line for a bad demand file and a bad key."""

from typer.testing import CliRunner

from privrl_jax.cli.main import app


def test_bad_rossmann_file_is_one_line(tmp_path):
    bad = tmp_path / "train.csv"
    bad.write_text("a,b\n1,2\n")
    res = CliRunner().invoke(
        app,
        [
            "pool",
            "run",
            "--config",
            "pool/test",
            "--out",
            str(tmp_path / "run"),
            "--set",
            "env.demand=rossmann",
            "--set",
            f"env.demand_file={bad}",
        ],
    )
    assert res.exit_code != 0
    assert "lacks the column(s)" in res.output and "Traceback" not in res.output


def test_unknown_method_is_refused(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "pool",
            "run",
            "--config",
            "pool/test",
            "--out",
            str(tmp_path / "run"),
            "--set",
            "pool.method=magic",
        ],
    )
    assert res.exit_code != 0 and "pool.method must be 'pool', 'grid'" in res.output
