"""`privrl experiment list | table | pages` on the stored rows (nothing runs)."""

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from privrl_jax import experiments
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


def test_status_sorts_cells_into_current_stale_imported_and_missing(tmp_path):
    rows = (ROOT / "results" / "gpope_theorem1" / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 6
    rows = [json.loads(r) for r in rows]
    stale, imported, missing = rows[0]["key"], rows[1]["key"], rows[2]["key"]
    rows[0]["config_hash"] = "000000000000"  # made under another config
    del rows[1]["config_hash"]  # converted from a legacy file
    out_dir = tmp_path / "gpope_theorem1"
    out_dir.mkdir()
    (out_dir / "rows.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for i, r in enumerate(rows) if i != 2)
    )
    st = experiments.row_status("gpope_theorem1", tmp_path)
    assert st["stale"] == [stale]
    assert st["imported"] == [imported]
    assert st["missing"] == [missing]
    assert sorted(st["current"]) == sorted(r["key"] for r in rows[3:])
    # The shipped rows are all of today's configs.
    shipped = experiments.row_status("gpope_theorem1", ROOT / "results")
    assert len(shipped["current"]) == 6
    out = CliRunner().invoke(
        app, ["experiment", "status", "gpope_theorem1", "--results", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        "gpope_theorem1: 3 current, 1 stale, 1 imported, 1 missing",
        f"  stale: {stale}",
    ]
