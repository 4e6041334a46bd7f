"""The experiment adaptive_clipping (the former benchmarks/adaptive_clipping.py): its
rerun rows are the legacy script's runs, bit for bit, and its tables its tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privrl_jax import experiments
from privrl_jax.experiments._tables import build_table

ROOT = Path(__file__).resolve().parents[2]
NAME = "adaptive_clipping"


def _legacy() -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / f"{NAME}.json").read_text())


def _table(table_id: str) -> dict:
    exp = experiments.load_experiment(NAME)
    spec = next(t for t in exp.tables if t["id"] == table_id)
    return build_table(spec, experiments.read_rows(ROOT / "results", NAME))


def test_the_rerun_rows_are_the_legacy_runs_bit_for_bit():
    legacy = _legacy()
    rows = experiments.read_rows(ROOT / "results", NAME)
    assert {r["source"] for r in rows} == {"run"}
    got = {
        (r["cell"]["epsilon"], r["cell"]["seed"], r["cell"]["clip"]): r["metrics"]
        for r in rows
    }
    assert len(got) == len(legacy["runs"]) == 60
    for run in legacy["runs"]:
        m = got[(run["target_epsilon"], run["seed"], run["row"])]
        assert m["test_mse"] == run["test_mse"], run
        if "final_clip_norm" in run:
            assert m["final_clip_norm"] == run["final_clip_norm"], run
    for target, section in legacy["by_target_epsilon"].items():
        mine = [m for k, m in got.items() if k[0] == float(target)]
        assert {m["epsilon_accounted"] for m in mine} == {section["epsilon"]}
        assert {m["noise_multiplier"] for m in mine} == {section["noise_multiplier"]}


def test_the_tables_are_the_legacy_tables():
    legacy = _legacy()["by_target_epsilon"]
    table = _table("clip")
    for g in table["groups"]:
        want = legacy[f"{g['cell']['epsilon']:g}"]["table"][g["cell"]["clip"]]
        for k in ("n", "mean", "std", "ci95"):
            assert g["metrics"]["test_mse"][k] == pytest.approx(want[k], rel=1e-12)
    pairs = {
        (g["cell"]["epsilon"], g["cell"]["clip"]): g["metrics"]["test_mse"]
        for g in _table("fixed_minus_adaptive")["groups"]
    }
    for target, section in legacy.items():
        assert section["best_fixed"] == "fixed C = 3"
        diff = pairs[(float(target), "fixed C = 3")]
        # fixed - adaptive here, adaptive - best fixed there.
        want = section["adaptive_minus_best_fixed"]
        assert diff["mean"] == pytest.approx(-want["mean"], rel=1e-9)
        assert diff["std"] == pytest.approx(want["std"], rel=1e-9)
