"""One-off: the stored legacy results (``benchmarks/results/*.json``) as rows of the
experiments that replace their scripts (``results/<experiment>/rows.jsonl``).

Each legacy run becomes one row: its cell (the experiment's axis values), the metrics
the experiment's ``evaluate`` names, the hash of the config the experiment resolves
for that cell today, ``source: legacy:<file>`` and the legacy file's provenance.

    python results/import_legacy.py            # all importers
    python results/import_legacy.py pool_gap_vs_rho
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from privrl_jax import experiments
from privrl_jax.experiments._runner import resolve, write_rows
from privrl_jax.experiments._spec import cell_key

ROOT = Path(__file__).resolve().parents[1]
LEGACY = ROOT / "benchmarks" / "results"
RESULTS = ROOT / "results"


def _pool_gap_vs_rho(d: dict) -> Iterator[tuple[dict, dict]]:
    for method, cells in d["gaps"].items():
        for c in cells:
            rho = math.inf if c["rho"] is None else c["rho"]
            for seed, gap in enumerate(c["gaps"]):
                yield {"method": method, "rho": rho, "seed": seed}, {"gap": gap}


def _pool_fair(d: dict) -> Iterator[tuple[dict, dict]]:
    for name, m in d["methods"].items():
        knobs = ", ".join(f"{k}={v:g}" for k, v in m["chosen"].items())
        for c in m["rows"]:
            for seed, gap in enumerate(c["gaps"]):
                yield (
                    {"method": f"{name} ({knobs})", "rho": c["rho"], "seed": seed},
                    {"gap": gap},
                )


def _pool_fair_rossmann(d: dict) -> Iterator[tuple[dict, dict]]:
    # POOL's runs at rho <= 40 are also pool_exp1_rossmann_format.json's (the same
    # bench, keys and config): kept once, after checking that they are bit-equal.
    exp1 = json.loads((LEGACY / "pool_exp1_rossmann_format.json").read_text())
    same = {c["rho"]: c["gaps"] for c in exp1["gaps"]["POOL"]}
    for cell, metrics in _pool_fair(d):
        if cell["method"].startswith("POOL"):
            if cell["rho"] in same:
                if same[cell["rho"]][cell["seed"]] != metrics["gap"]:
                    raise ValueError(f"POOL's run {cell} differs between the files")
                continue
            cell = {**cell, "method": "POOL"}
        yield cell, metrics


def _pool_additive_zones(bonus: float) -> Convert:
    def convert(d: dict) -> Iterator[tuple[dict, dict]]:
        for r in d["rows"]:
            for seed, gap in enumerate(r["gaps"]):
                w = r["w+d"] // 2
                cell = {"w": w, "method": r["method"], "bonus": bonus, "seed": seed}
                yield cell, {"gap": gap}

    return convert


def _fidelity(r: dict, anchors: tuple[str, ...]) -> dict:
    return {
        f"{part}.{k}": v
        for part in ("release", *anchors)
        for k, v in r[part].items()
        if k != "rows_compared"
    } | {
        "noise_multiplier": r["noise_multiplier"],
        "epsilon_spent_rdp": r["epsilon_spent_rdp"],
    }


def _privorl_n_fidelity_vs_eps(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["runs"]:
        yield (
            {"seed": r["seed"], "epsilon": r["epsilon"]},
            _fidelity(r, ("pretrain_only", "real_holdout")),
        )


def _privorl_j_fidelity_vs_eps(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["runs"]:
        yield (
            {"seed": r["seed"], "epsilon": r["epsilon"]},
            _fidelity(r, ("pretrain_only", "real_holdout")),
        )


def _marginal(delta: str) -> Callable[[dict], Iterator[tuple[dict, dict]]]:
    def convert(d: dict) -> Iterator[tuple[dict, dict]]:
        for r in d["runs"]:
            cell = {"model": r["model"].upper(), "delta": delta}
            yield (
                cell | {"epsilon": r["epsilon"], "seed": r["seed"]},
                _fidelity(r, ("real_holdout",)),
            )

    return convert


_T1_MODELS = {
    "pgm": "PGM",
    "privsyn": "PrivSyn",
    "pategan": "PATE-GAN",
    "pategan_pretrained": "PrePATE-GAN",
    "aim": "AIM",
    "mst": "MST",
}
_T1_AGENTS = {"iql": "IQL", "td3bc": "TD3+BC"}


_T1_FIDELITY = ("free_cell_share", "sliced_wasserstein", "marginal", "correlation")


def _t1_fidelity(r: dict) -> dict:
    return {
        f"{part}.{k}": r[part][k]
        for part in ("release", "real_holdout")
        for k in _T1_FIDELITY
    } | {
        "noise_multiplier": r["noise_multiplier"],
        "epsilon_spent_rdp": r["epsilon_spent_rdp"],
    }


def _t1_cell(maze: str, agent: str, model: str, r: dict) -> dict:
    return {
        "maze": maze,
        "agent": _T1_AGENTS[agent],
        "epsilon": r["epsilon"],
        "model": model,
        "seed": r["seed"],
    }


def _table1_baselines(maze: str, agent: str) -> Convert:
    def convert(d: dict) -> Iterator[tuple[dict, dict]]:
        for r in d["runs"]:
            metrics = {
                "release.agent_score": r["agent_score"],
                **_t1_fidelity(r),
            }
            for k, v in (r.get("release_reward") or {}).items():
                metrics[f"release.{k}"] = v
            yield _t1_cell(maze, agent, _T1_MODELS[r["model"]], r), metrics

    return convert


def _table1_privorl_n(maze: str, agent: str) -> Convert:
    def convert(d: dict) -> Iterator[tuple[dict, dict]]:
        for r in d["runs"]:
            ag = r["agents"]
            metrics = {
                "release.agent_score": (ag["release"] or {}).get(agent),
                # The anchors' agents: trained in each seed's first run only.
                "pretrain_only.agent_score": (ag["pretrain_only"] or {}).get(agent),
                "real.agent_score": (ag["real"] or {}).get(agent),
                **_t1_fidelity(r),
            }
            for k in _T1_FIDELITY:
                metrics[f"pretrain_only.{k}"] = r["pretrain_only"][k]
                # The real-data row's fidelity is the real holdout's (as the sweep's).
                metrics[f"real.{k}"] = r["real_holdout"][k]
            yield _t1_cell(maze, agent, "PrivORL-n", r), metrics

    return convert


def _table1_variant(axis: str) -> Convert:
    # privorl_synth_size.py / privorl_pld_runs.py: PrivORL-n on umaze with IQL, one
    # variant each (the release's size; the accountant), release agent only.
    def convert(d: dict) -> Iterator[tuple[dict, dict]]:
        for r in d["runs"]:
            cell = _t1_cell("umaze", "iql", "PrivORL-n", r)
            cell[axis] = r["num_samples"] if axis == "size" else r["accountant"]
            yield cell, {"release.agent_score": r["agent_score"], **_t1_fidelity(r)}

    return convert


def _table1_files() -> list[tuple[str, Convert]]:
    out = []
    for maze in ("umaze", "medium", "large"):
        m = "" if maze == "umaze" else f"_{maze}"
        for agent, sweep in (("iql", "agents"), ("td3bc", "td3bc")):
            a = "" if agent == "iql" else f"_{agent}"
            out += [
                (f"table1_agents_{maze}{a}.json", _table1_baselines(maze, agent)),
                (
                    f"privorl_n_eps_sweep_{sweep}{m}.json",
                    _table1_privorl_n(maze, agent),
                ),
            ]
    return [
        *out,
        ("privorl_synth_size.json", _table1_variant("size")),
        ("privorl_pld_agents.json", _table1_variant("accountant")),
    ]


def _privorl_j_vs_baselines(d: dict) -> Iterator[tuple[dict, dict]]:
    keys = ("epsilon_spent", "trajscore_f1", "gap_boundary", "gap_inside")
    keys += ("free_cell_share", "marginal", "correlation")
    for r in d["rows"]:
        cell = {"model": r["model"], "epsilon": r["epsilon"], "seed": r["seed"]}
        yield (
            cell,
            {k: r[k] for k in keys} | {"agent_score": r["agent_score"].get("iql")},
        )


def _privorl_n_mia(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["rows"]:
        yield (
            {"seed": r["seed"], "epsilon": r["epsilon"]},
            {
                f"{attack}.{k}": r[f"{pre}{k}"]
                for attack, pre in (("loss", ""), ("distance", "distance_"))
                for k in ("auc", "tpr_at_10_fpr", "tpr_at_1_fpr")
            }
            | {"loss.best_sigma": r["best_sigma"]},
        )


_ABLATION_VARIANTS = {
    "eps10": "eps = 10",
    "eps1": "eps = 1",
    "eps_inf": "eps = inf",
    "dpdm_no_pretrain": "no pre-training (DPDM)",
    "pdp_no_curiosity": "no curiosity (pre-training)",
    "finecur": "FineCur (rate 0.3)",
}


def _privorl_n_ablations(d: list) -> Iterator[tuple[dict, dict]]:
    # The legacy rows repeat each seed's real-data score (trained in its eps10 run) on
    # every variant: kept on the eps10 row only, where it was computed.
    real = {
        (r["seed"], r["algo"]): r["real_score"] for r in d if r["variant"] == "eps10"
    }
    for r in d:
        key = (r["seed"], r["algo"])
        if r["real_score"] != real[key]:
            raise ValueError(f"{key}: another real score than its eps10 run's")
        keys = ("epsilon_rdp", "marginal", "correlation", "mia_auc")
        keys += ("mia_tpr_at_10_fpr", "mia_tpr_at_1_fpr")
        metrics = {k: r[k] for k in keys}
        metrics["epsilon_spent_rdp"] = metrics.pop("epsilon_rdp")
        metrics["agent_score"] = r["synthetic_score"]
        metrics["real_score"] = r["real_score"] if r["variant"] == "eps10" else None
        yield (
            {
                "variant": _ABLATION_VARIANTS[r["variant"]],
                "agent": _T1_AGENTS[r["algo"]],
                "seed": r["seed"],
            },
            metrics,
        )


def _privorl_n_tuning(d: dict) -> Iterator[tuple[dict, dict]]:
    setups = {"stand_in": "stand-in", "evaluated": "evaluated"}
    for r in d["runs"]:
        metrics = {f"release.{k}": v for k, v in r["fidelity"].items()}
        for anchor in ("pretrain_only", "real_holdout"):
            for k in ("sliced_wasserstein", "free_cell_share"):
                metrics[f"{anchor}.{k}"] = r["anchors"][anchor][k]
        metrics["noise_multiplier"] = r["noise_multiplier"]
        metrics["epsilon_spent_rdp"] = r["epsilon_spent_rdp"]
        cell = {"setup": setups[r["setup"]], "lr": r["lr"], "K": r["K"]}
        yield cell | {"seed": r["seed"]}, metrics


def _privorl_j_ema_tuning(d: dict) -> Iterator[tuple[dict, dict]]:
    setups = {"stand_in": "stand-in", "evaluated": "evaluated"}
    for r in d["runs"]:
        metrics = {f"release.{k}": v for k, v in r["fidelity"].items()}
        for anchor in ("pretrain_only", "real_holdout"):
            for k in ("sliced_wasserstein", "free_cell_share"):
                metrics[f"{anchor}.{k}"] = r["anchors"][anchor][k]
        metrics["noise_multiplier"] = r["noise_multiplier"]
        metrics["epsilon_spent_rdp"] = r["epsilon_spent_rdp"]
        cell = {"setup": setups[r["setup"]], "ema": r["ema"], "seed": r["seed"]}
        yield cell, metrics


def _adaptive_clipping_privorl_n(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["runs"]:
        metrics = dict(r["fidelity"])
        metrics["epsilon_spent_rdp"] = r["epsilon_spent_rdp"]
        metrics["noise_multiplier"] = r["noise_multiplier"]
        if "final_clip_norm" in r:  # read from the last DP checkpoint, not a report
            metrics["final_clip_norm"] = r["final_clip_norm"]
        yield {"clip": r["row"], "seed": r["seed"]}, metrics


def _privorl_accountants(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["rows"]:
        for acc in ("rdp", "pld"):
            a = r[acc]
            cell = {"plan": r["plan"], "epsilon": r["epsilon"], "accountant": acc}
            yield (
                cell,
                {
                    "noise_multiplier": a["noise_multiplier"],
                    "epsilon_rdp": a["epsilon_rdp"],
                    "epsilon_pld": a["epsilon_pld"],
                    "mean_gradient_noise_std": a["mean_gradient_noise_std"],
                    "sampling_rate": r["sampling_rate"],
                    "steps": r["steps"],
                },
            )


def _privorl_j_with_references(d: dict) -> Iterator[tuple[dict, dict]]:
    # The reference sets and the real-data agent: once per seed (its first run), put
    # on the seed's PrivORL-j eps = 10 row.
    refs = {r["seed"]: r for r in d["references"]}
    for cell, metrics in _privorl_j_vs_baselines(d):
        if (cell["model"], cell["epsilon"]) == ("PrivORL-j", 10.0):
            ref = refs[cell["seed"]]
            metrics["reference_public.trajscore_f1"] = ref["public"]
            metrics["reference_holdout.trajscore_f1"] = ref["holdout"]
            row = next(
                r
                for r in d["rows"]
                if (r["model"], r["epsilon"], r["seed"])
                == ("PrivORL-j", 10.0, cell["seed"])
            )
            metrics["real.agent_score"] = row["agent_score_real"].get("iql")
        yield cell, metrics


def _privorl_j_horizons(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["horizon_sweep"]:
        if r["trajscore_window"] != 32:
            raise ValueError("a horizon row scored with another window than H = 32's")
        keys = ("epsilon_spent", "gap_boundary", "gap_inside", "free_cell_share")
        keys += ("marginal", "correlation")
        metrics = {k: r[k] for k in keys}
        metrics["trajscore_f1_h32"] = r["trajscore_f1"]
        # At H = 32 the H = 32 window is the run's own: its audit's TrajScore.
        metrics["trajscore_f1"] = r["trajscore_f1"] if r["horizon"] == 32 else None
        metrics["agent_score"] = r["agent_score"].get("iql")
        yield {"horizon": str(r["horizon"]), "seed": r["seed"]}, metrics


def _pategan_vs_smartnoise(d: dict) -> Iterator[tuple[dict, dict]]:
    labels = [k for k in d["table"] if k != "real holdout"]
    real = d["table"]["real holdout"]
    for label, r in zip(labels, d["runs"], strict=True):
        if not label.startswith(r["impl"]):
            raise ValueError(f"{label}: not the run of {r['impl']}")
        metrics = {f"release.{k}": v for k, v in r["fidelity"].items()}
        metrics.pop("release.rows_compared")
        keys = ("num_teachers", "vote_queries", "epsilon_reported")
        keys += ("epsilon_dp_accounting_rdp", "label_one_share")
        metrics |= {k: r[k] for k in keys}
        if r["impl"] == "ours":  # the holdout the legacy table scored, seed 0
            metrics |= {f"real_holdout.{k}": v["mean"] for k, v in real.items()}
        yield {"run": label, "seed": 0}, metrics


def _audit_pipelines(d: dict) -> Iterator[tuple[dict, dict]]:
    # POOL's legacy rows calibrated its Gaussian to epsilon, not to the pipeline's rho:
    # its rows are pipeline runs instead (the experiment's notes).
    methods = {"chain_uniform": "GPOPE (one-of-m)"}
    for r in d["rows"]:
        if r["method"] == "POOL":
            continue
        method = methods.get(r["what"].split(":")[0], r["method"])
        keys = ("epsilon_accounted", "epsilon_demonstrated", "violation", "audited")
        yield (
            {"method": method, "epsilon": r["target_epsilon"], "seed": 0},
            {k: r.get(k) for k in keys} | {"steps": r["count"]},
        )


def _agents_vs_d3rlpy(d: dict) -> Iterator[tuple[dict, dict]]:
    final_evals = d["config"]["final_evals"]
    for r in d["runs"]:
        scores = [e["score_mean"] for e in r["evals"]]
        late = [e["score_mean"] for e in r["evals"] if e["step"] >= 5000]
        yield (
            {"algo": r["algo"], "impl": r["impl"], "seed": r["seed"]},
            {
                "final": sum(scores[-final_evals:]) / final_evals,
                "curve": sum(late) / len(late),
            },
        )


def _maze_vs_mujoco(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["dynamics"]:
        yield (
            {"maze": r["maze"], "actions": r["actions"]},
            {k: v for k, v in r.items() if "_gap_" in k},
        )
    for r in d["returns"]:
        keys = ("jax_mean", "jax_se", "mujoco_mean", "mujoco_se", "gap_in_se")
        yield (
            {"task": r["task"], "policy": r["policy"]},
            {k: r[k] for k in (*keys, "d4rl_published")},
        )


_BLACKBOX = {
    "PGM (mbi, 3000 iters), empty-cell canaries in (obs0, obs1)": (
        "PGM, empty-cell canaries in (x, y)"
    ),
    "MST (mbi, 3000 iters), empty-cell canaries in (obs3, next_obs1)": (
        "MST, empty-cell canaries in (obs3, next_obs1)"
    ),
    "PGM (mbi, 1000 iters), empty-cell canaries in (obs0, obs1)": (
        "PGM (1,000 iterations), empty-cell canaries in (x, y)"
    ),
    "PGM (mbi, 3000 iters), bounding-box canaries": "PGM, bounding-box canaries",
    "PrivORL-n (test config)": "PrivORL-n (test config)",
}


def _audit_blackbox(d: dict) -> Iterator[tuple[dict, dict]]:
    names = {"epsilon_lower_bound": "epsilon_demonstrated", "max_epsilon": "ceiling"}
    names |= {"correct": "correct", "guesses": "guesses", "m": "canaries"}
    for r in d["rows"]:
        yield (
            {"generator": _BLACKBOX[r["method"]], "epsilon": r["epsilon"]},
            {new: r[old] for old, new in names.items()} | {"included": r["included"]},
        )


def _audit_selection(d: dict) -> Iterator[tuple[dict, dict]]:
    keys = ("epsilon_accounted", "epsilon_of_pair", "epsilon_demonstrated", "hits")
    for r in d["rows"]:
        yield (
            {"selection": r["row"]},
            {k: r[k] for k in (*keys, "neighbour_hits", "violation")},
        )


def _audit_power(d: dict) -> Iterator[tuple[dict, dict]]:
    # One simulated draw scored both ways: a row per score. Flagged as the script
    # flagged: the bound above the plan's target epsilon.
    plans = {
        "q=0.01 x 500": "q = 0.01 x 500",
        "q=0.25 x 10": "q = 0.25 x 10",
        "full x 1": "full batch x 1",
    }
    blocks = [("noise halved", 1.0, 1000, r) for r in d["detection"]]
    blocks += [("none", r["eps"], 0, r) for r in d["false_alarm"]]
    for fault, eps, first, r in blocks:
        for i, run in enumerate(r["runs"]):
            for score in ("sum", "likelihood"):
                cell = {
                    "plan": plans[r["plan"]],
                    "fault": fault,
                    "epsilon": eps,
                    "canaries": d["canaries"],
                    "score": score,
                    "seed": first + i,
                }
                metrics = {
                    "epsilon_demonstrated": run[score],
                    "violation": run[score] > eps,
                    "ceiling": run["ceiling"],
                }
                if "eps_ran" in r:
                    metrics["epsilon_ran"] = r["eps_ran"]
                yield cell, metrics


# benchmarks/agents_maze.py's update budgets (updates -> eval period) and the files of
# its invocations; agents_maze.json merged the first seven (`--combine`).
_MAZE_BUDGETS = {
    5000: ("5k (eval every 2.5k)", 2500),
    10000: ("10k (eval every 2k)", 2000),
    30000: ("30k (eval every 1k)", 1000),
}
_MAZE_PARTS = tuple(
    f"agents_maze_{tag}.json"
    for tag in (
        "umaze",
        "medium",
        "umaze_s12",
        "medium_s12",
        "umaze_edac_s1",
        "umaze_edac_s2",
        "random",
    )
)
_MAZE_V1 = tuple(
    f"agents_maze_v1_{tag}.json"
    for tag in ("random_td3bc", "random_iql", "umaze_td3bc", "umaze_iql")
)


def _agents_maze(d: dict) -> Iterator[tuple[dict, dict]]:
    for r in d["runs"]:
        budget, every = _MAZE_BUDGETS[r["updates"]]
        # What the experiment's cell sets and the run's own record must agree on.
        steps = [c["step"] for c in r["curve"]]
        if steps != list(range(every, r["updates"] + 1, every)):
            raise ValueError(f"{r['env']} {r['algo']} {r['seed']}: steps {steps}")
        if r["dataset_size"] != 100_000 or r["final"] != r["curve"][-1]:
            raise ValueError(f"{r['env']} {r['algo']} {r['seed']}: not the 100k run")
        if r["algo"] == "edac" and r["config"]["hidden_dims"] != [64, 64, 64]:
            raise ValueError(f"EDAC seed {r['seed']}: {r['config']['hidden_dims']}")
        algo = "edac (64x3)" if r["algo"] == "edac" else r["algo"]
        cell = {
            "env": r["env"],
            "data": r["data"],
            "algo": algo,
            "budget": budget,
            "seed": r["seed"],
        }
        yield (
            cell,
            {
                "final": r["final"]["score_mean"],
                "best": max(c["score_mean"] for c in r["curve"]),
                "critic_loss": r["final_critic_loss"],
                "train_s": r["train_seconds"],
            },
        )


def _agents_maze_merged(d: dict) -> Iterator[tuple[dict, dict]]:
    # agents_maze.json holds the runs of its seven parts again: checked, not re-added.
    parts = [
        r for f in _MAZE_PARTS for r in json.loads((LEGACY / f).read_text())["runs"]
    ]
    key = lambda r: (r["env"], r["data"], r["algo"], r["seed"])  # noqa: E731
    if sorted(d["runs"], key=key) != sorted(parts, key=key):
        raise ValueError("agents_maze.json's runs differ from its parts'")
    yield from ()


def _agents_iql_budget(d: dict) -> Iterator[tuple[dict, dict]]:
    curve = d["curve"]
    scores = {f"s{e['step']}": e["score_mean"] for e in curve}
    yield (
        {"data": d["config"]["data"], "seed": d["config"]["seed"]},
        {"final": curve[-1]["score_mean"], "q_final": curve[-1]["q_mean"], **scores},
    )


Convert = Callable[[dict], Iterator[tuple[dict, dict]]]
IMPORTERS: dict[str, list[tuple[str, Convert]]] = {
    "pool_gap_vs_rho": [("pool_exp1.json", _pool_gap_vs_rho)],
    "pool_fair": [("pool_fair.json", _pool_fair)],
    "pool_additive_zones": [
        ("pool_additive_private.json", _pool_additive_zones(0.003)),
        ("pool_additive_private_bs0.01.json", _pool_additive_zones(0.01)),
    ],
    "pool_fig1_rossmann": [
        ("pool_exp1_rossmann_format.json", _pool_gap_vs_rho),
        ("pool_fair_rossmann_format.json", _pool_fair_rossmann),
    ],
    "privorl_n_fidelity_vs_eps": [
        ("privorl_n_eps_sweep.json", _privorl_n_fidelity_vs_eps)
    ],
    "marginal_baselines": [
        ("marginal_baselines.json", _marginal("unbounded")),
        ("marginal_baselines_aim.json", _marginal("unbounded")),
        ("marginal_baselines_delta.json", _marginal("bounded")),
        ("marginal_baselines_aim_delta.json", _marginal("bounded")),
        ("marginal_baselines_privsyn_delta.json", _marginal("bounded")),
    ],
    "privorl_j_fidelity_vs_eps": [
        ("privorl_j_eps_sweep.json", _privorl_j_fidelity_vs_eps)
    ],
    "privorl_table1": _table1_files(),
    "privorl_n_mia": [("mia_memorise.json", _privorl_n_mia)],
    "privorl_j_vs_baselines": [
        ("privorl_j_results_cpu.json", _privorl_j_with_references)
    ],
    "privorl_n_ablations": [
        ("privorl_n_results.json", _privorl_n_ablations),
        ("privorl_n_results_td3bc.json", _privorl_n_ablations),
    ],
    "privorl_n_tuning": [("privorl_n_tuning.json", _privorl_n_tuning)],
    "privorl_j_ema_tuning": [("privorl_j_ema_tuning.json", _privorl_j_ema_tuning)],
    "adaptive_clipping_privorl_n": [
        ("adaptive_clipping_privorl_n.json", _adaptive_clipping_privorl_n)
    ],
    "privorl_accountants": [("privorl_accountants.json", _privorl_accountants)],
    "privorl_j_vs_baselines_medium": [
        ("privorl_j_results_cpu_medium.json", _privorl_j_with_references)
    ],
    "privorl_j_horizons": [
        ("privorl_j_results_cpu_horizons.json", _privorl_j_horizons)
    ],
    "pategan_vs_smartnoise": [("pategan_vs_smartnoise.json", _pategan_vs_smartnoise)],
    "audit_pipelines": [("audit_pipelines.json", _audit_pipelines)],
    "agents_vs_d3rlpy": [("agents_vs_d3rlpy.json", _agents_vs_d3rlpy)],
    "maze_vs_mujoco": [("maze_vs_mujoco.json", _maze_vs_mujoco)],
    "audit_blackbox": [("audit_blackbox.json", _audit_blackbox)],
    "audit_selection": [("audit_selection.json", _audit_selection)],
    "agents_maze": [(f, _agents_maze) for f in _MAZE_PARTS + _MAZE_V1]
    + [("agents_maze.json", _agents_maze_merged)],
    "agents_iql_budget": [
        ("agents_v1_budget_d4rl_s1.json", _agents_iql_budget),
        ("agents_v1_budget_task_s1.json", _agents_iql_budget),
    ],
    "audit_power": [
        ("audit_power_10k.json", _audit_power),
        ("audit_power.json", _audit_power),
    ],
}


def _hash(exp: experiments.Experiment, cell: dict) -> str | None:
    # The config the experiment resolves for the cell today; None where the pipeline's
    # extra (mbi for the marginal baselines) is not installed.
    try:
        return resolve(exp, cell)[2]
    except (ImportError, ValueError):
        return None


def import_rows(name: str) -> list[dict[str, Any]]:
    """The legacy file's runs as rows of experiment ``name``."""
    exp = experiments.load_experiment(name)
    rows = []
    for file, convert in IMPORTERS[name]:
        legacy = json.loads((LEGACY / file).read_text())
        rows += [
            {
                "experiment": name,
                "cell": cell,
                "key": cell_key(cell),
                "config_hash": _hash(exp, cell),
                "run_dir": None,
                "metrics": metrics,
                "wall_s": None,
                "source": f"legacy:benchmarks/results/{file}",
                # A list-shaped legacy file (privorl_n_results.json) has none.
                "provenance": (
                    legacy.get("provenance") if isinstance(legacy, dict) else None
                ),
            }
            for cell, metrics in convert(legacy)
        ]
    cells = {cell_key(c) for c in exp.cells()}
    stray = [r["key"] for r in rows if r["key"] not in cells]
    if stray:
        raise ValueError(f"{name}: legacy runs outside the experiment's grid: {stray}")
    return rows


def main(names: list[str]) -> None:
    for name in names or list(IMPORTERS):
        rows = import_rows(name)
        path = write_rows(RESULTS, name, rows)
        print(f"{name}: {len(rows)} rows -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
