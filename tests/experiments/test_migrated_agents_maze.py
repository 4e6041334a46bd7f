"""The agent experiments that replaced benchmarks/agents_maze.py and
benchmarks/agents_v1_budget.py: their stored rows give the legacy runs' numbers, the
importer refuses a merged file that is not its parts, and the cells resolve through
the maze_agent pipeline to the configs the scripts ran."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path

import pytest

from privrl_jax import experiments
from privrl_jax.experiments._runner import resolve
from privrl_jax.experiments._spec import cell_key
from privrl_jax.experiments._tables import build_table

ROOT = Path(__file__).resolve().parents[2]
_V1 = ("random_td3bc", "random_iql", "umaze_td3bc", "umaze_iql")


def _legacy(file: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / file).read_text())


def _importer():
    spec = importlib.util.spec_from_file_location(
        "import_legacy", ROOT / "results" / "import_legacy.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_agents_maze_rows_give_the_legacy_summaries():
    """Each legacy summary row (the merged file's and the four -v1 files') is the
    mean of its group's rows; the legacy std is ddof = 0, ours ddof = 1."""
    exp = experiments.load_experiment("agents_maze")
    spec = next(t for t in exp.tables if t["id"] == "scores")
    table = build_table(spec, experiments.read_rows(ROOT / "results", "agents_maze"))
    groups = {
        (g["cell"]["env"], g["cell"]["data"], g["cell"]["algo"].split(" ")[0]): g[
            "metrics"
        ]
        for g in table["groups"]
    }
    summaries = _legacy("agents_maze.json")["summary"] + [
        s for tag in _V1 for s in _legacy(f"agents_maze_v1_{tag}.json")["summary"]
    ]
    assert len(summaries) == len(groups) == 11
    for s in summaries:
        got = groups[(s["env"], s["data"], s["algo"])]
        n = len(s["seeds"])
        assert got["final"]["n"] == n
        assert got["final"]["mean"] == pytest.approx(s["score_mean"], rel=1e-12)
        assert got["best"]["mean"] == pytest.approx(s["best_eval_mean"], rel=1e-12)
        if n > 1:
            ddof0 = got["final"]["std"] * math.sqrt((n - 1) / n)
            assert ddof0 == pytest.approx(s["score_std"], rel=1e-9)


def test_the_merged_file_must_be_its_parts():
    mod = _importer()
    merged = _legacy("agents_maze.json")
    assert list(mod._agents_maze_merged(merged)) == []  # checked, adds no row
    bad = copy.deepcopy(merged)
    bad["runs"][0]["final"]["score_mean"] += 1e-9
    with pytest.raises(ValueError, match="differ from its parts"):
        list(mod._agents_maze_merged(bad))


def test_the_importer_refuses_a_run_its_cell_does_not_describe():
    mod = _importer()
    d = _legacy("agents_maze_umaze_edac_s1.json")
    d["runs"][0]["config"]["hidden_dims"] = [256, 256]
    with pytest.raises(ValueError, match="EDAC seed 1"):
        list(mod._agents_maze(d))
    d = _legacy("agents_maze_v1_umaze_iql.json")
    d["runs"][0]["curve"] = d["runs"][0]["curve"][::2]
    with pytest.raises(ValueError, match="steps"):
        list(mod._agents_maze(d))


def test_agents_maze_cells_resolve_to_the_scripts_configs():
    exp = experiments.load_experiment("agents_maze")
    by_key = {cell_key(c): c for c in exp.cells()}
    rows = {r["key"]: r for r in experiments.read_rows(ROOT / "results", "agents_maze")}
    assert set(rows) == set(by_key)
    edac = next(c for c in exp.cells() if c["algo"].startswith("edac"))
    _, cfg, _ = resolve(exp, edac)
    assert cfg["train"]["agent"] == {"hidden_dims": [64, 64, 64]}
    assert cfg["data"] == {
        "env": edac["env"],
        "kind": "expert",
        "size": 100_000,
        "seed": 12345,
        "action_noise": 0.5,
    }
    for key, row in rows.items():
        assert row["config_hash"] == resolve(exp, by_key[key])[2], key
    reran = [r for r in rows.values() if r["source"] == "run"]
    assert [r["cell"]["env"] for r in reran] == ["maze2d-umaze-v1"]
    legacy = _legacy("agents_maze_v1_random_td3bc.json")["runs"][0]
    assert legacy["seed"] == reran[0]["cell"]["seed"] == 0
    assert reran[0]["metrics"]["final"] == legacy["final"]["score_mean"]  # bit-equal


def test_iql_budget_rows_are_the_legacy_curves():
    rows = {
        r["cell"]["data"]: r
        for r in experiments.read_rows(ROOT / "results", "agents_iql_budget")
    }
    for data in ("d4rl", "task"):
        legacy = _legacy(f"agents_v1_budget_{data}_s1.json")
        m = rows[data]["metrics"]
        for e in legacy["curve"]:
            assert m[f"s{e['step']}"] == e["score_mean"]
        assert m["final"] == legacy["curve"][-1]["score_mean"]
        assert m["q_final"] == legacy["curve"][-1]["q_mean"]
    # docs/evaluator.md quotes the d4rl curve at 3k, 21k and 30k updates
    d4rl = rows["d4rl"]["metrics"]
    assert [round(d4rl[k], 1) for k in ("s3000", "s21000", "s30000")] == [
        8.4,
        27.0,
        45.6,
    ]
    assert rows["task"]["config_hash"] is None  # imported only: no pipeline runs it
    exp = experiments.load_experiment("agents_iql_budget")
    _, cfg, digest = resolve(exp, {"data": "d4rl", "seed": 1})
    assert rows["d4rl"]["config_hash"] == digest
    assert (cfg["data"]["seed"], cfg["data"]["size"], cfg["train"]["updates"]) == (
        0,
        101_000,
        30_000,
    )
