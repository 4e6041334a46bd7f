"""The audit and agent experiments that replaced benchmarks/audit_pipelines.py and
benchmarks/agents_vs_d3rlpy.py: their stored rows give the legacy numbers, and the
runs' accounted epsilons are dp-accounting's."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dp_accounting
import pytest

from privrl_jax import experiments
from privrl_jax.experiments._runner import resolve
from privrl_jax.experiments._tables import build_table

ROOT = Path(__file__).resolve().parents[2]


def _table(name: str, table_id: str) -> dict:
    exp = experiments.load_experiment(name)
    spec = next(t for t in exp.tables if t["id"] == table_id)
    return build_table(spec, experiments.read_rows(ROOT / "results", name))


def _legacy(file: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "results" / file).read_text())


def test_audit_rows_are_the_legacy_audits_bit_for_bit():
    groups = {
        (g["cell"]["method"], g["cell"]["epsilon"]): g["metrics"]
        for g in _table("audit_pipelines", "audit")["groups"]
    }
    names = {"chain_uniform": "GPOPE (one-of-m)"}
    seen = 0
    for r in _legacy("audit_pipelines.json")["rows"]:
        if r["method"] == "POOL":
            continue  # rerun through the pipeline at rho (the experiment's notes)
        got = groups[
            (names.get(r["what"].split(":")[0], r["method"]), r["target_epsilon"])
        ]
        seen += 1
        assert got["audited"]["mean"] == float(r["audited"])
        if not r["audited"]:
            assert got["epsilon_demonstrated"]["n"] == 0  # shown as "-"
            continue
        for k in ("epsilon_accounted", "epsilon_demonstrated"):
            assert got[k]["n"] == 1
            assert got[k]["mean"] == r[k]
    assert seen == len(groups) == 12


def test_pool_audit_rows_account_rho_as_dp_accounting_and_never_violate():
    """POOL's one Gaussian release at rho zCDP: noise multiplier 1 / sqrt(2 rho); the
    ledger's epsilon is dp-accounting's RDP epsilon of that event at delta = 1e-5, and
    the lower bound stays at or under both it and the audit's ceiling (3.91)."""
    table = _table("audit_pipelines", "pool")
    assert [g["cell"]["rho"] for g in table["groups"]] == [0.1, 1.0, 10.0]
    for g in table["groups"]:
        rho, m = g["cell"]["rho"], g["metrics"]
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(1 / math.sqrt(2 * rho)))
        assert m["epsilon_accounted"]["mean"] == pytest.approx(
            acc.get_epsilon(1e-5), rel=1e-9
        )
        assert m["epsilon_demonstrated"]["n"] == 3
        assert m["violation"]["mean"] == 0.0
        assert m["epsilon_demonstrated"]["mean"] <= min(
            m["epsilon_accounted"]["mean"], 3.9091123490971937 + 1e-12
        )
    # At rho = 0.1 (epsilon 1.91, under the ceiling) the audit could have failed.
    assert table["groups"][0]["metrics"]["epsilon_accounted"]["mean"] < 3.9


def test_audit_cells_resolve_to_the_legacy_mechanisms():
    exp = experiments.load_experiment("audit_pipelines")
    cfg = resolve(exp, {"method": "GPOPE", "epsilon": 1.0, "seed": 0})[0]
    assert (cfg.privacy.epsilon, cfg.privacy.delta, cfg.audit.canaries) == (
        1.0,
        1e-5,
        10_000,
    )
    cfg = resolve(exp, {"method": "POOL", "rho": 0.1, "seed": 2})[0]
    assert (cfg.privacy.rho, cfg.audit.seed, cfg.audit.canaries) == (0.1, 2, 10_000)


def test_agents_vs_d3rlpy_rows_give_the_legacy_means_and_welch_tests():
    """Means as published; stds the sample std (the legacy table's were ddof = 0);
    Welch's p-values the legacy verdict's."""
    legacy = _legacy("agents_vs_d3rlpy.json")
    for table_id in ("final", "curve"):
        table = _table("agents_vs_d3rlpy", table_id)
        g = {(x["cell"]["algo"], x["cell"]["impl"]): x for x in table["groups"]}
        for algo, v in legacy["verdict"].items():
            ours = g[(algo, "privrl_jax")]["metrics"][table_id]
            theirs = g[(algo, "d3rlpy")]["metrics"][table_id]
            assert (ours["n"], theirs["n"]) == tuple(v["n"])
            if table_id == "final":
                assert ours["mean"] == pytest.approx(v["ours_mean"], rel=1e-12)
                assert theirs["mean"] <= v["d3rlpy_max"]
            (test,) = [t for t in table["tests"] if t["within"] == {"algo": algo}]
            assert test["p"] == pytest.approx(v[f"{table_id}_welch_p"], rel=1e-9)
            assert test["t"] == pytest.approx(-v[f"{table_id}_welch_t"], rel=1e-9)


def test_imported_only_experiments_refuse_to_run(tmp_path):
    with pytest.raises(ValueError, match="no pipeline runs this experiment"):
        experiments.run_experiment(
            "agents_vs_d3rlpy",
            results_dir=tmp_path / "r",
            runs_dir=tmp_path / "runs",
            jobs=1,
            only={"algo": ["iql"], "impl": ["d3rlpy"], "seed": [0]},
        )


def test_maze_vs_mujoco_rows_are_the_package_references():
    """The stored returns are what privrl_jax/envs/_reference.py states: D4RL's
    published references exactly, our JAX means to the 2 decimals it keeps; and
    every row is the legacy JSON's cell, bit for bit."""
    from privrl_jax.envs._reference import (  # noqa: PLC0415
        D4RL_REFERENCE_RETURNS,
        MEASURED_D4RL_RETURNS,
    )

    table = _table("maze_vs_mujoco", "returns")
    got = {
        (g["cell"]["task"], g["cell"]["policy"]): g["metrics"] for g in table["groups"]
    }
    assert len(got) == 12
    for task, (random_ret, expert_ret) in D4RL_REFERENCE_RETURNS.items():
        for policy, want in (("random", random_ret), ("expert", expert_ret)):
            assert got[(task, policy)]["d4rl_published"]["mean"] == pytest.approx(
                want, abs=0.005
            )
    for task, (random_ret, expert_ret) in MEASURED_D4RL_RETURNS.items():
        assert round(got[(task, "random")]["jax_mean"]["mean"], 2) == random_ret
        assert round(got[(task, "expert")]["jax_mean"]["mean"], 2) == expert_ret
    legacy = _legacy("maze_vs_mujoco.json")
    for r in legacy["returns"]:
        for k in ("jax_mean", "jax_se", "mujoco_mean", "mujoco_se", "gap_in_se"):
            assert got[(r["task"], r["policy"])][k]["mean"] == r[k]
    dyn = _table("maze_vs_mujoco", "dynamics")
    cells = {
        (g["cell"]["maze"], g["cell"]["actions"]): g["metrics"] for g in dyn["groups"]
    }
    assert len(cells) == len(legacy["dynamics"]) == 6
    for r in legacy["dynamics"]:
        assert (
            cells[(r["maze"], r["actions"])]["float32_gap_300"]["mean"]
            == (r["float32_gap_300"])
        )


def test_audit_blackbox_rows_are_the_legacy_audits_and_never_violate():
    table = _table("audit_blackbox", "blackbox")
    got = {
        (g["cell"]["generator"], g["cell"]["epsilon"]): g["metrics"]
        for g in table["groups"]
    }
    legacy = _legacy("audit_blackbox.json")["rows"]
    assert len(got) == len(legacy) == 11
    by_value = sorted(
        (r["epsilon"], r["epsilon_lower_bound"], r["correct"], r["included"])
        for r in legacy
    )
    ours = sorted(
        (
            eps,
            m["epsilon_demonstrated"]["mean"],
            m["correct"]["mean"],
            m["included"]["mean"],
        )
        for (_, eps), m in got.items()
    )
    assert ours == by_value
    for (_, eps), m in got.items():
        assert m["epsilon_demonstrated"]["mean"] <= min(eps, m["ceiling"]["mean"])
        assert m["correct"]["mean"] <= m["guesses"]["mean"]


def test_audit_mechanisms_rows_are_the_legacy_audits_where_the_score_is_unchanged():
    """Full batch (q = 1: the likelihood score ranks as the old sum), POOL's Gaussian
    and the fault are bit-equal to benchmarks/audit_epsilon.py's stored audits; the
    fault is the only violation."""
    table = _table("audit_mechanisms", "audit")
    got = {
        (g["cell"]["mechanism"], g["cell"]["epsilon"]): g["metrics"]
        for g in table["groups"]
    }
    assert len(got) == 9
    checked = 0
    for r in _legacy("audit_epsilon.json")["rows"]:
        fault = r["row"].startswith("fault")
        key = (r["row"], 2.17 if fault else r["target"])
        m = got[key]
        assert m["violation"]["mean"] == float(fault)
        assert m["epsilon_accounted"]["mean"] == r["epsilon_accounted"]
        if "Poisson" in r["row"] and not math.isinf(r["target"]):
            continue
        checked += 1
        assert m["epsilon_demonstrated"]["mean"] == r["epsilon_demonstrated"]
        assert m["correct"]["mean"] == r["audit"]["correct"]
    assert checked == 7


def test_audit_selection_cells_are_aims_round_epsilons_and_rows_the_legacy_audits():
    """Each AIM cell's epsilon is one AIM selection's at its target (rho of the
    calibrated Gaussian at delta = 1e-6, / 24 rounds, x 4 per annealing, 10% share:
    sqrt(8 * 0.1 * rho_t)); the stored rows are the legacy audits, and a rerun (where
    stored) is bit-equal to them."""
    from privrl_jax import privacy  # noqa: PLC0415

    exp = experiments.load_experiment("audit_selection")
    legacy = {r["row"]: r for r in _legacy("audit_selection.json")["rows"]}
    for cell in exp.cells():
        cfg = resolve(exp, cell)[0]
        name = cell["selection"]
        assert cfg.mechanism.kind == "exponential"
        assert cfg.privacy.epsilon == legacy[name]["epsilon_accounted"]
        assert cfg.mechanism.candidates == legacy[name]["candidates"]
        if name.startswith("AIM"):
            target = 1.0 if "eps = 1," in name else 10.0
            sigma = (
                privacy.GaussianMechanism(l2_sensitivity=1.0)
                .calibrate(target, 1e-6, "rdp")
                .noise_multiplier
            )
            rho_t = 1 / (2 * sigma**2) / 24 * (4 if "annealing" in name else 1)
            assert cfg.privacy.epsilon == pytest.approx(
                math.sqrt(0.8 * rho_t), rel=1e-12
            )
    stored = experiments.read_rows(ROOT / "results", "audit_selection")
    assert len(stored) == 6
    for row in stored:
        want = legacy[row["cell"]["selection"]]
        assert row["metrics"]["epsilon_demonstrated"] == want["epsilon_demonstrated"]
        assert row["metrics"]["violation"] == want["row"].startswith("fault")
    for row in experiments.read_rows(ROOT / "results" / "reruns", "audit_selection"):
        want = legacy[row["cell"]["selection"]]
        assert row["metrics"]["epsilon_demonstrated"] == want["epsilon_demonstrated"]
        assert (row["metrics"]["hits"], row["metrics"]["neighbour_hits"]) == (
            want["hits"],
            want["neighbour_hits"],
        )
