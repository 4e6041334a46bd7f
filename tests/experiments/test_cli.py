"""`privrl experiment list | table | pages` on the stored rows (nothing runs)."""

import shutil
from pathlib import Path

from typer.testing import CliRunner

from privrl_jax.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def test_list_names_each_experiment_and_its_paper():
    out = CliRunner().invoke(app, ["experiment", "list"])
    assert out.exit_code == 0, out.output
    assert "pool_gap_vs_rho: pool, 250 cells; POOL Sec. 5, experiment 1" in out.output


def test_table_retabulates_the_stored_rows_into_the_legacy_table(tmp_path):
    shutil.copytree(ROOT / "results" / "pool_gap_vs_rho", tmp_path / "pool_gap_vs_rho")
    (tmp_path / "pool_gap_vs_rho" / "tables.md").unlink()
    out = CliRunner().invoke(
        app,
        [
            "experiment",
            "table",
            "pool_gap_vs_rho",
            "--results",
            str(tmp_path),
            "--no-plots",
        ],
    )
    assert out.exit_code == 0, out.output
    legacy = (ROOT / "benchmarks" / "results" / "pool_exp1.md").read_text()
    rows = [line for line in legacy.splitlines() if line.startswith("| POOL |")]
    assert rows and rows[0] in out.output
    assert rows[0] in (tmp_path / "pool_gap_vs_rho" / "tables.md").read_text()


def test_table_without_rows_and_unknown_names_fail_in_one_line(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["experiment", "table", "pool_fair", "--results", "x"])
    assert out.exit_code != 0 and "no stored rows" in out.output
    out = runner.invoke(app, ["experiment", "run", "nope"])
    assert out.exit_code != 0 and "no experiment 'nope'" in out.output
