"""benchmarks/_results.py: the epsilon sweeps' statistics against hand computations."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _results import (  # noqa: E402
    metric_table,
    paired_differences,
    paired_rows,
    summary,
)

METRICS = {"a": ("metric a", "higher")}


def test_summary_is_the_sample_std_and_the_student_t_interval():
    s = summary([1.0, 2.0, 3.0])
    # std (ddof = 1) = 1; t(0.975, 2) = 4.302653 (tables); half-width = t / sqrt(3).
    assert s["n"] == 3 and s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert math.isnan(summary([5.0])["std"])


def test_paired_differences_pair_each_seed_with_itself():
    # Seed 1 sits 10 above seed 0 at every epsilon: the pairs see only the steps.
    runs = [
        {"seed": s, "epsilon": e, "release": {"a": 10.0 * s + v}}
        for s in (0, 1)
        for e, v in ((1.0, 0.0), (10.0, 1.0 + s), (math.inf, 0.5))
    ]
    out, lines = paired_differences(runs, [1.0, 10.0, math.inf], METRICS)
    assert list(out) == ["1->10", "10->inf"]
    assert out["1->10"]["a"]["mean"] == pytest.approx(1.5)  # +1 and +2
    assert out["1->10"]["a"]["std"] == pytest.approx(math.sqrt(0.5))
    assert out["1->10"]["a"]["rose"] == 2 and out["10->inf"]["a"]["rose"] == 0
    assert out["10->inf"]["a"]["mean"] == pytest.approx(-1.0)  # -0.5 and -1.5
    assert lines[2].startswith("| 1->10 | 2 | +1.500 [±")


def test_metric_table_skips_rows_without_scores():
    table, lines = metric_table(
        [("x", [{"a": 1.0}, {"a": 3.0}]), ("empty", [])], METRICS
    )
    assert list(table) == ["x"] and table["x"]["a"]["mean"] == 2.0
    assert len(lines) == 3 and lines[2].startswith("| x | 2 | 2.000 ± 1.414 [±")


def test_benchmark_scripts_call_the_shared_helpers_with_their_arguments():
    # The helpers' signatures change under the scripts (metric_table gained a required
    # ``metrics`` and three scripts kept calling it without, failing only at the end
    # of their runs): every call in benchmarks/*.py must bind to the signature.
    import ast
    import inspect

    import _results

    helpers = {
        n: inspect.signature(f)
        for n, f in vars(_results).items()
        if inspect.isfunction(f) and f.__module__ == "_results"
    }
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    bad = []
    for path in sorted(bench.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in helpers
            ):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords
            ):
                continue
            try:
                helpers[node.func.id].bind(
                    *node.args, **{k.arg: k.value for k in node.keywords}
                )
            except TypeError as e:
                bad.append(f"{path.name}:{node.lineno} {node.func.id}: {e}")
    assert not bad, bad


def test_benchmark_scripts_import_only_names_their_sibling_modules_define():
    # A helper renamed in one script (privorl_pld_runs lost ``_uptime``) broke another
    # that imported it, found only when that study was run again: every
    # ``from SIBLING import NAME`` in benchmarks/*.py must name a top-level definition.
    import ast

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    defined = {}
    for path in bench.glob("*.py"):
        names = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                names |= {
                    n.id
                    for t in targets
                    for n in ast.walk(t)
                    if isinstance(n, ast.Name)
                }
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        defined[path.stem] = names
    bad = [
        f"{path.name}:{node.lineno} {node.module}.{a.name}"
        for path in sorted(bench.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module in defined
        for a in node.names
        if a.name not in defined[node.module]
    ]
    assert not bad, bad


def test_a_retabulation_keeps_the_runs_host_and_load(tmp_path):
    """``ran=False`` (no run started) keeps the stored provenance, XLA flags and load,
    and records the tabulating host's under ``tabulated``; a run writes its own."""
    import json  # noqa: PLC0415

    from _results import write_results  # noqa: PLC0415

    stored = {
        "runs": [1],
        "provenance": {"host": "the runs' host"},
        "xla_flags": "--one-thread",
        "uptime": "load 2.00",
    }
    (tmp_path / "t.json").write_text(json.dumps(stored))
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n", ran=False)
    got = json.loads((tmp_path / "t.json").read_text())
    assert got["runs"] == [1, 2]
    assert {k: got[k] for k in ("provenance", "xla_flags", "uptime")} == {
        k: stored[k] for k in ("provenance", "xla_flags", "uptime")
    }
    assert got["tabulated"]["provenance"] != stored["provenance"]
    assert (
        "`uptime` when the runs were written: load 2.00;"
        in (tmp_path / "t.md").read_text()
    )
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n", ran=True)
    got = json.loads((tmp_path / "t.json").read_text())
    assert "tabulated" not in got and got["uptime"] != "load 2.00"


def test_paired_rows_pair_any_two_rows_over_their_common_seeds():
    # Seed 2 has no "real" row: the pair uses seeds 0 and 1 only.
    rows = {
        "pre": {0: {"a": 1.0}, 1: {"a": 11.0}, 2: {"a": 5.0}},
        "real": {0: {"a": 4.0}, 1: {"a": 13.0}},
    }
    out, lines = paired_rows(rows, [("pre", "real"), ("pre", "missing")], METRICS)
    assert list(out) == ["pre -> real"]
    s = out["pre -> real"]["a"]
    assert s["n"] == 2 and s["mean"] == pytest.approx(2.5)  # +3 and +2
    assert s["std"] == pytest.approx(math.sqrt(0.5)) and s["rose"] == 2
    assert lines[2].startswith("| pre -> real | 2 | +2.500 [±")


def _sweep_runs(seeds: list[int], epsilons: list[float]) -> list[dict]:
    """Agent-mode run dicts as privorl_n_eps_sweep.py stores them; the anchors' agents
    only in each seed's first run, scores that differ across seeds and epsilons."""
    runs = []
    for s in seeds:
        for i, e in enumerate(epsilons):
            fid = {
                "free_cell_share": 0.3 + 0.05 * i + 0.01 * (s * 7 % 5),
                "sliced_wasserstein": 0.2 - 0.01 * i + 0.02 * (s * 3 % 4),
                "marginal": 0.85 + 0.001 * s * i,
                "correlation": 0.97 - 0.002 * (s % 3),
            }
            runs.append(
                {
                    "seed": s,
                    "epsilon": e,
                    "noise_multiplier": 1.0 / (i + 1),
                    "release": fid,
                    "pretrain_only": {k: v / 2 for k, v in fid.items()},
                    "real_holdout": {k: v * 2 for k, v in fid.items()},
                    "wall_time_s": 100.0 + 10 * s + i,
                    "agents": {
                        "release": {"iql": 20.0 + 3.0 * (s * 5 % 7) - i * i},
                        "pretrain_only": {"iql": -30.0 + s} if i == 0 else None,
                        "real": {"iql": 40.0 + 2.0 * s * s} if i == 0 else None,
                    },
                }
            )
    return runs


def test_sweep_pools_stored_runs_as_if_run_at_once(tmp_path):
    import json

    import privorl_n_eps_sweep as sweep

    cmd = ["--agents", "iql", "--epsilons", "1", "10", "inf", "--name", "t"]
    epsilons = [1.0, 10.0, math.inf]
    args_all = sweep.parse_args([*cmd, "--seeds", "0", "1", "2"])
    all_runs = _sweep_runs([0, 1, 2], epsilons)
    # Seeds 0-1 stored (through JSON, as the results file holds them), seed 2 new.
    path = tmp_path / "stored.json"
    stored = {
        "runs": _sweep_runs([0, 1], epsilons),
        "overrides": sweep.base_overrides(args_all),
        "agents": ["iql"],
        "agent_updates": 30_000,
    }
    path.write_text(json.dumps(stored))
    args = sweep.parse_args([*cmd, "--seeds", "2", "--keep-runs-from", str(path)])
    kept = sweep.keep_runs(path, args, sweep.base_overrides(args))
    merged = sweep.pooled(kept["runs"], _sweep_runs([2], epsilons), args.epsilons)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    payload, md = sweep.tabulate(args, merged, tmp_path / "a")
    payload_all, md_all = sweep.tabulate(args_all, all_runs, tmp_path / "b")
    assert merged == all_runs
    assert payload == payload_all and md == md_all
    # The pooled table has every seed: the release at eps 10 scores 20 + 3 (s*5 % 7)
    # - 1 = 19, 34, 28 for seeds 0, 1, 2.
    s = payload["table"]["eps = 10"]["agent_iql"]
    assert s["n"] == 3 and s["mean"] == pytest.approx(27.0)
    assert s["std"] == pytest.approx(math.sqrt(57.0))  # ((8^2 + 7^2 + 1^2) / 2)
    pair = payload["agent_pairs"]["pre-training only (Table IV) -> real data"]
    # real - pre-training = 70 + 2 s^2 - s: 70, 71, 76.
    assert pair["agent_iql"]["n"] == 3
    assert pair["agent_iql"]["mean"] == pytest.approx(217.0 / 3)


def test_sweep_budget_check_is_the_real_agents_rise_over_its_last_evaluations():
    import privorl_n_eps_sweep as sweep

    # Ten evaluations: the last five average 14, the five before 9 -> +5; a curve
    # shorter than two blocks says nothing.
    curve = [[1000 * (i + 1), float(i + 5)] for i in range(10)]
    assert sweep.budget_gain(curve) == pytest.approx(5.0)
    assert sweep.budget_gain(curve[:9]) is None
    runs = _sweep_runs([0, 1], [1.0])
    runs[0]["real_curves"] = {"iql": [curve]}
    flat = [[c[0], 3.0 if i < 5 else 1.0] for i, c in enumerate(curve)]
    runs[1]["real_curves"] = {"iql": [flat]}
    out, lines = sweep.budget_check(runs, ["iql"])
    assert out["iql"]["per_seed"] == {0: pytest.approx(5.0), 1: pytest.approx(-2.0)}
    assert out["iql"]["mean"] == pytest.approx(1.5)
    assert out["iql"]["std"] == pytest.approx(math.sqrt(24.5))  # (3.5^2 * 2) / 1
    assert lines[-1].startswith("- iql: +1.5 [±") and lines[-1].endswith("(+5.0, -2.0)")
    # Runs stored before curves were kept (or --keep-runs-from them) add no section.
    assert sweep.budget_check(_sweep_runs([0], [1.0]), ["iql"]) == ({}, [])


def test_sweep_refuses_to_pool_another_protocol_or_a_stored_seed(tmp_path):
    import json

    import privorl_n_eps_sweep as sweep

    cmd = ["--agents", "iql", "--epsilons", "1", "10", "inf"]
    path = tmp_path / "stored.json"
    stored_args = sweep.parse_args([*cmd, "--seeds", "0", "1"])
    path.write_text(
        json.dumps(
            {
                "runs": _sweep_runs([0, 1], [1.0, 10.0, math.inf]),
                "overrides": sweep.base_overrides(stored_args),
                "agents": ["iql"],
                "agent_updates": 30_000,
            }
        )
    )

    def refusal(*extra: str) -> str:
        args = sweep.parse_args([*cmd, "--keep-runs-from", str(path), *extra])
        with pytest.raises(SystemExit) as err:
            sweep.keep_runs(path, args, sweep.base_overrides(args))
        return str(err.value)

    assert "its overrides" in refusal("--seeds", "2", "--agent-updates", "15000")
    assert "its overrides" in refusal("--seeds", "2", "--set", "seed=3")
    assert "its config" in refusal("--seeds", "2", "--config", "privorl_n/other")
    args = sweep.parse_args(["--agents", "iql", "--epsilons", "1", "10"])
    with pytest.raises(SystemExit, match="its epsilons"):
        sweep.keep_runs(path, args, sweep.base_overrides(args))
    msg = refusal("--seeds", "1", "2")
    assert "both stored and requested" in msg and "(1, '1')" in msg
    assert "\n" not in msg


def test_the_stored_agent_sweep_ran_what_the_script_builds():
    # benchmarks/README.md pools new seeds with this file's: its protocol must be the
    # one the script builds for the documented command.
    import json

    import privorl_n_eps_sweep as sweep

    path = Path(sweep.ROOT) / "benchmarks/results/privorl_n_eps_sweep_agents.json"
    saved = json.loads(path.read_text())
    args = sweep.parse_args(
        ["--agents", "iql", "--agent-updates", "30000", "--epsilons", "1", "10", "inf"]
    )
    assert saved["overrides"] == sweep.base_overrides(args)
    assert saved["agents"] == ["iql"] and saved["agent_updates"] == 30_000


def _variant_run(sweep_run: dict, variant: str, d_iql: float, d_fcs: float) -> dict:
    """A privorl_pld_runs.py record of ``variant`` paired with ``sweep_run``: its
    data, plan and RDP sigma, the IQL score and free-cell share shifted by ``d_*``."""
    return {
        "variant": variant,
        "seed": sweep_run["seed"],
        "epsilon": sweep_run["epsilon"],
        "steps": sweep_run["steps"],
        "plans": {"rdp": {"noise_multiplier": sweep_run["noise_multiplier"]}},
        "agent_score": sweep_run["agents"]["release"]["iql"] + d_iql,
        "release": sweep_run["release"]
        | {"free_cell_share": sweep_run["release"]["free_cell_share"] + d_fcs},
        "real_holdout": dict(sweep_run["real_holdout"]),
    }


def test_pld_runs_pair_each_run_with_the_sweep_row_of_its_seed_and_epsilon():
    import privorl_pld_runs as pld

    # The sweep stores seeds 2, 0, 1; the variant has seeds 1 and 0 (that order) at
    # eps 1 only: seed 2 and eps 10 are left out of the pairs and the rows.
    runs = _sweep_runs([2, 0, 1], [1.0, 10.0])
    for r in runs:  # one plan; one holdout per seed, as the sweep's runs share it
        r["steps"] = 196
        r["real_holdout"] = {"marginal": 0.98, "correlation": 0.99}
        r["real_holdout"]["sliced_wasserstein"] = 0.03 + 0.001 * r["seed"]
    sweep = {"runs": runs}
    by = {(r["seed"], r["epsilon"]): r for r in runs}
    ours = [
        _variant_run(by[(1, 1.0)], "pld", +4.0, -0.01),
        _variant_run(by[(0, 1.0)], "pld", -2.0, +0.03),
    ]
    table, _, lines, pairs, rows, order = pld.paired_table(
        ours, sweep, [("pld", "PLD")], [1.0, 10.0], "RDP"
    )
    assert order == ["RDP eps = 1 (sweep)", "PLD eps = 1"]
    assert set(rows["RDP eps = 1 (sweep)"]) == {0, 1}
    res = pairs["RDP eps = 1 (sweep) -> PLD eps = 1"]
    # IQL: +4 and -2 -> mean 1, std sqrt(18); t = 1 / 3 on 1 df (Cauchy).
    assert res[pld.AGENT]["seeds"] == [0, 1] and res[pld.AGENT]["rose"] == 1
    assert res[pld.AGENT]["mean"] == pytest.approx(1.0)
    assert res[pld.AGENT]["std"] == pytest.approx(18**0.5)
    assert res[pld.AGENT]["p"] == pytest.approx(
        1 - 2 / math.pi * math.atan(1 / 3), rel=1e-9
    )
    assert res["free_cell_share"]["mean"] == pytest.approx(0.01)
    assert res["sliced_wasserstein"]["mean"] == pytest.approx(0.0)
    assert res["sliced_wasserstein"]["p"] is None  # zero spread: no test
    assert table["PLD eps = 1"][pld.AGENT]["n"] == 2 and len(lines) == 3
    # Every run pairs; another plan, RDP sigma, data or a missing row is named.
    assert pld.check_pairs(ours, sweep) == []
    steps = ours[0] | {"steps": 176}
    sigma = ours[1] | {"plans": {"rdp": {"noise_multiplier": 3.6}}}
    data = ours[1] | {
        "real_holdout": ours[1]["real_holdout"] | {"sliced_wasserstein": 9.0}
    }
    alone = ours[0] | {"seed": 7}
    msgs = pld.check_pairs([steps, sigma, data, alone], sweep)
    assert msgs == [
        "seed 0: other sensitive rows",
        "seed 1 eps 1: 176 steps, the sweep's 196",
        "seed 0 eps 1: RDP sigma 3.600000 for this plan, the sweep ran 1.000000",
        "seed 7 eps 1: no stored sweep row",
    ]


def test_pld_runs_run_the_stored_sweeps_protocol():
    import json

    import privorl_pld_runs as pld

    saved = json.loads(pld.SWEEP.read_text())
    base = pld.sweep_protocol(saved)
    assert base == saved["overrides"]
    ov = pld.run_overrides(base, 2, 10.0, ["privacy.accountant=pld"], None)
    assert ov[: len(base)] == base and ov[-1] == "privacy.accountant=pld"
    assert "privacy.noise_seed=1002" in ov and "eval.train_real_agents=false" in ov
    with pytest.raises(SystemExit, match="not what privorl_n_eps_sweep.py builds"):
        pld.sweep_protocol(saved | {"overrides": saved["overrides"][1:]})


def test_privorl_n_tuning_chooses_by_the_stand_ins_mean_distance_only():
    import privorl_n_tuning as tu

    def rec(setup, seed, lr, k, sw):
        return {
            "setup": setup,
            "seed": seed,
            "lr": lr,
            "K": k,
            "fidelity": {"sliced_wasserstein": sw, "free_cell_share": 0.5},
            "anchors": {
                "pretrain_only": {"sliced_wasserstein": 0.6, "free_cell_share": 0.1},
                "real_holdout": {"sliced_wasserstein": 0.04, "free_cell_share": 1.0},
            },
            "wall_time_s": 60.0,
        }

    # (3e-3, 4) wins seed 0 but loses the two-seed mean to (1e-2, 16): 0.10 vs 0.09.
    stand = [
        rec("stand_in", 0, 3e-3, 4, 0.05),
        rec("stand_in", 1, 3e-3, 4, 0.15),
        rec("stand_in", 0, 1e-2, 16, 0.08),
        rec("stand_in", 1, 1e-2, 16, 0.10),
        rec("stand_in", 0, 1e-3, 1, 0.30),
    ]
    assert tu.choose(stand) == (1e-2, 16)
    # A one-seed point never beats the points of the confirmation round, however low.
    assert tu.choose(stand + [rec("stand_in", 0, 3e-3, 16, 0.01)]) == (1e-2, 16)
    assert tu.on_edge((1e-2, 16)) == {"lr": True, "K": False}
    assert tu.on_edge((3e-3, 64)) == {"lr": False, "K": True}
    assert tu.on_edge((3e-3, 4)) == {"lr": False, "K": False}
    # Ties go to the smaller lr, then the smaller K.
    assert tu.choose([rec("stand_in", 0, 1e-2, 1, 0.1), rec("s", 0, 1e-3, 4, 0.1)]) == (
        1e-3,
        4,
    )
    # The evaluated task's best (here far better elsewhere) never moves the choice.
    runs = stand + [rec("evaluated", 0, 1e-3, 1, 0.001)]
    payload, md = tu.tabulate(runs)
    assert payload["chosen_on_stand_in"]["lr"] == 1e-2
    assert payload["best_on_evaluated"] == {
        "lr": 1e-3,
        "K": 1,
        "on_edge": {"lr": True, "K": True},
    }
    assert "0.0900 (n = 2) **(chosen)**" in md and "0.1000 (n = 2) (d)" in md


def test_privorl_j_ema_tuning_chooses_on_the_stand_in_at_the_most_seeds():
    import privorl_j_ema_tuning as tu

    def rec(setup, seed, ema, sw):
        return {
            "setup": setup,
            "seed": seed,
            "ema": ema,
            "fidelity": {
                "sliced_wasserstein": sw,
                "free_cell_share": 0.5,
                "trajscore_f1": 0.9,
            },
            "anchors": {
                "pretrain_only": {"sliced_wasserstein": 0.5, "free_cell_share": 0.1},
                "real_holdout": {"sliced_wasserstein": 0.1, "free_cell_share": 1.0},
            },
            "wall_time_s": 100.0,
        }

    # "last" wins seed 0, "warmup" the two-seed mean (0.25 vs 0.30); "fixed" ran at
    # one seed only and cannot win by its single low value.
    stand = [
        rec("stand_in", 0, "warmup", 0.30),
        rec("stand_in", 1, "warmup", 0.20),
        rec("stand_in", 0, "last", 0.20),
        rec("stand_in", 1, "last", 0.40),
        rec("stand_in", 0, "fixed", 0.01),
    ]
    assert tu.choose(stand) == "warmup"
    # A tie goes to the earlier candidate of CHOICES.
    assert tu.choose([rec("s", 0, "last", 0.2), rec("s", 0, "fixed", 0.2)]) == "fixed"
    runs = stand + [
        rec("evaluated", 0, "last", 0.001),
        rec("evaluated", 0, "warmup", 1),
    ]
    payload, md = tu.tabulate(runs)
    assert payload["chosen_on_stand_in"] == "warmup"
    assert payload["best_on_evaluated"] == "last"
    assert "| warmup (d) **(chosen)** | 2 | 0.2500 (0.3000 / 0.2000) |" in md
    assert "| last (best here) | 1 | 0.0010 |" in md


def test_reuse_pretrain_ignores_only_the_fields_it_is_told_may_differ(tmp_path):
    import yaml
    from privorl_j_results import reuse_pretrain

    from privrl_jax.pipelines import privorl_j, to_dict

    def sibling(name, overrides):
        cfg = privorl_j.load("privorl_j/test", overrides)
        d = tmp_path / name
        (d / "checkpoints" / "pretrain" / str(cfg.pretrain.steps)).mkdir(parents=True)
        (d / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
        return d

    fixed = sibling("fixed", ["synthesis.finetune_ema=fixed"])
    other_lr = sibling("lr", ["pretrain.learning_rate=0.123"])
    mine = privorl_j.load("privorl_j/test", ["synthesis.finetune_ema=last"])
    # Without may_differ the EMA schedule counts: nothing is reused.
    reuse_pretrain(tmp_path / "a", [fixed, other_lr], mine)
    assert not (tmp_path / "a").exists()
    # With it, the sibling that differs only there is copied; the other never is.
    reuse_pretrain(
        tmp_path / "b", [other_lr], mine, may_differ=("synthesis.finetune_ema",)
    )
    assert not (tmp_path / "b").exists()
    reuse_pretrain(
        tmp_path / "c", [other_lr, fixed], mine, may_differ=("synthesis.finetune_ema",)
    )
    steps = str(mine.pretrain.steps)
    assert (tmp_path / "c" / "checkpoints" / "pretrain" / steps).is_dir()
    assert yaml.safe_load((tmp_path / "c" / "config.yaml").read_text()) == to_dict(mine)


def test_gpope_e2e_table_charges_a_device_row_its_host_rows_compile():
    """A device row that reused its host row's executable (compile ~0) is tabulated as a
    cold run: its JAX total and speed-up include the host row's compile."""
    import gpope_throughput as ge  # noqa: PLC0415

    base = {
        "mode": "uniform",
        "trials": 10,
        "steps": 5,
        "host_draw_s": 2.0,
        "run_s": 1.0,
        "numpy_total_s": 40.0,
        "speedup_steady": 0.0,
        "load_1min": 1.0,
        "useful_units": 50,
        "computed_units": 50,
        "padded_units_run": 50,
        "padded_units_per_step": 50,
    }
    host = base | {"schedule": "host", "draw_s": 2.0, "compile_s": 3.0}
    dev = base | {"schedule": "device", "draw_s": 1.0, "compile_s": 0.0}
    md = ge.render_e2e(
        {
            "rows": [host, dev],
            "checks": {"uniform": {"max_abs_diff_sigma0": 0.0, "max_abs_theta": 1.0}},
            "uptime_end": "",
        }
    )
    dev_line = next(line for line in md.splitlines() if "| device |" in line)
    cells = [c.strip() for c in dev_line.strip("|").split("|")]
    # draw 1 + the host row's compile 3 + run 1 = 5 s; 40 / 5 = 8x; draw share 1/5.
    assert cells[4:9] == ["3.00", "1.00", "5.00", "40.0", "8x"]
    assert cells[11] == "20%"


def test_write_results_replaces_both_files_whole(tmp_path):
    """The tuning scripts' writer: the JSON holds the payload plus the host's load, the
    Markdown ends with the load line, and no temporary file is left behind."""
    import json  # noqa: PLC0415

    from _results import write_results  # noqa: PLC0415

    (tmp_path / "t.json").write_text("{truncated")  # a previous, broken write
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n")
    got = json.loads((tmp_path / "t.json").read_text())
    assert got["runs"] == [1, 2] and "uptime" in got and "provenance" in got
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("| a |\n") and "`uptime` when written:" in md
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.md"]


def test_with_stored_runs_keeps_what_an_invocation_did_not_rerun(tmp_path):
    import json  # noqa: PLC0415

    from _results import with_stored_runs  # noqa: PLC0415

    path = tmp_path / "t.json"
    assert with_stored_runs(path, [{"s": 0, "v": 1}], lambda r: r["s"]) == [
        {"s": 0, "v": 1}
    ]
    path.write_text(json.dumps({"runs": [{"s": 0, "v": 1}, {"s": 1, "v": 2}]}))
    # Seed 0 rerun (new value), seed 2 new, seed 1 only stored: kept in place.
    got = with_stored_runs(path, [{"s": 2, "v": 5}, {"s": 0, "v": 9}], lambda r: r["s"])
    assert got == [{"s": 0, "v": 9}, {"s": 1, "v": 2}, {"s": 2, "v": 5}]


def test_hlo_op_count_counts_one_branch_of_a_conditional():
    # A conditional runs one branch: ``ops`` counts the larger one, and
    # ``ops_all_branches`` both (issue 52's noise draw sits behind one).
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    from dpsgd_vs_opacus import hlo_op_count  # noqa: PLC0415

    def f(p, x, w):
        def big(x):  # two matmuls: two ops that cannot fuse into one
            return (x @ w) @ w

        return jax.lax.cond(p, big, lambda x: x @ w, x)

    args = (True, jnp.ones((8, 8)), jnp.ones((8, 8)))
    text = jax.jit(f).lower(*args).compile().as_text()
    assert text.count(" conditional(") == 1
    got = hlo_op_count(text)
    plain = hlo_op_count(
        jax.jit(lambda x, w: x @ w).lower(*args[1:]).compile().as_text()
    )
    branches = got["ops_all_branches"] - got["ops"]
    assert plain["ops"] == plain["ops_all_branches"] >= 1
    # The smaller branch (one matmul) is what is left out; the entry keeps the
    # conditional itself.
    assert branches == 1 and got["ops"] >= 3
