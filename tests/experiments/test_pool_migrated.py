"""POOL experiments migrated from benchmarks/pool_*.py: pool_fig1_rossmann (the
generated Rossmann-format file it evaluates on, its stored rows regenerating both
legacy tables) and pool_additive_zones (its rows regenerating the legacy table and the
legacy settings). Nothing runs here."""

import json
import math
from pathlib import Path

import pytest

from privrl_jax import experiments
from privrl_jax.data._demand import write_synthetic_rossmann_csv
from privrl_jax.experiments._runner import resolve
from privrl_jax.experiments._tables import build_table
from privrl_jax.pipelines.pool.task import build_task

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / "benchmarks" / "results"
EXP = experiments.load_experiment("pool_fig1_rossmann")


def test_the_shipped_file_is_the_generator_at_seed_0(tmp_path):
    """The committed CSV is write_synthetic_rossmann_csv(seed=0), byte for byte (the
    file the legacy scripts generated into a temporary folder), and every cell reads
    it through the pipeline's Rossmann loader (store 1)."""
    shipped = ROOT / EXP.overrides["env.demand_file"]
    fresh = write_synthetic_rossmann_csv(tmp_path / "train.csv", seed=0)
    assert shipped.read_bytes() == fresh.read_bytes()
    cfg = resolve(EXP, EXP.cells()[0])[0]
    assert (cfg.env.demand, cfg.env.stores, cfg.env.demand_file) == (
        "rossmann",
        (1,),
        EXP.overrides["env.demand_file"],
    )


def test_stored_rows_regenerate_both_legacy_tables():
    """Mean, sample std and 95% half-width of every group equal the legacy JSON's, bit
    for bit: experiment 1's methods from pool_exp1_rossmann_format.json, the tuned
    baselines (and POOL above rho = 40) from pool_fair_rossmann_format.json; every
    group is covered."""
    rows = experiments.read_rows(ROOT / "results", EXP.name)
    assert len(rows) == len(EXP.cells()) == 460
    table = build_table(EXP.tables[0], rows)
    ours = {(g["cell"]["method"], g["cell"]["rho"]): g for g in table["groups"]}
    exp1 = json.loads((LEGACY / "pool_exp1_rossmann_format.json").read_text())
    fair = json.loads((LEGACY / "pool_fair_rossmann_format.json").read_text())
    want = {}
    for method, cells in exp1["gaps"].items():
        for c in cells:
            want[(method, math.inf if c["rho"] is None else c["rho"])] = c
    for name, m in fair["methods"].items():
        knobs = ", ".join(f"{k}={v:g}" for k, v in m["chosen"].items())
        label = "POOL" if name == "POOL" else f"{name} ({knobs})"
        for c in m["rows"]:
            if (label, c["rho"]) in want:  # POOL at rho <= 40: the same runs
                assert want[(label, c["rho"])]["gaps"] == c["gaps"]
            want[(label, c["rho"])] = c
    assert set(ours) == set(want)
    for key, c in want.items():
        got = ours[key]["metrics"]["gap"]
        assert (got["mean"], got["std"], got["ci95"]) == (
            c["mean"],
            c["std"],
            c["ci95"],
        ), key


def test_additive_zones_rows_regenerate_the_legacy_tables():
    """pool_additive_zones: each method's mean and sample std at each bonus_scale equal
    the legacy JSON's bit for bit, its 95% half-width the legacy interval's (stored as
    its two ends), and each cell resolves to the legacy setting (cells K, released
    3 H K statistics, the bonus scale)."""
    exp = experiments.load_experiment("pool_additive_zones")
    rows = experiments.read_rows(ROOT / "results", exp.name)
    assert len(rows) == len(exp.cells()) == 280
    ours = {}
    for spec in exp.tables:
        for g in build_table(spec, rows)["groups"]:
            key = (spec["where"]["w"][0], g["cell"]["method"], g["cell"]["bonus"])
            ours[key] = g["metrics"]["gap"]
    files = {
        0.003: "pool_additive_private.json",
        0.01: "pool_additive_private_bs0.01.json",
    }
    checked = 0
    for bonus, file in files.items():
        legacy = json.loads((LEGACY / file).read_text())
        assert f"bonus_scale {bonus:g})" in legacy["setting"]
        for r in legacy["rows"]:
            w = r["w+d"] // 2
            got = ours[(w, r["method"], bonus)]
            assert (got["mean"], got["std"]) == (r["mean"], r["std"])
            lo, hi = r["ci95"]
            assert got["ci95"] == pytest.approx((hi - lo) / 2, rel=1e-12)
            cell = {"w": w, "method": r["method"], "bonus": bonus, "seed": 0}
            cfg = resolve(exp, cell)[0]
            assert cfg.pool.bonus_scale == bonus
            task = build_task(cfg)
            assert int(task.geom.num_cells) == r["cells"]
            assert 3 * cfg.env.horizon * int(task.geom.num_cells) == r["released"]
            checked += 1
    assert checked == len(ours) == 28
