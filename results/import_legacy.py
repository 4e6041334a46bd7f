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


Convert = Callable[[dict], Iterator[tuple[dict, dict]]]
IMPORTERS: dict[str, list[tuple[str, Convert]]] = {
    "pool_gap_vs_rho": [("pool_exp1.json", _pool_gap_vs_rho)],
    "pool_fair": [("pool_fair.json", _pool_fair)],
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
    "privorl_j_vs_baselines": [("privorl_j_results_cpu.json", _privorl_j_vs_baselines)],
    "audit_pipelines": [("audit_pipelines.json", _audit_pipelines)],
    "agents_vs_d3rlpy": [("agents_vs_d3rlpy.json", _agents_vs_d3rlpy)],
    "maze_vs_mujoco": [("maze_vs_mujoco.json", _maze_vs_mujoco)],
    "audit_blackbox": [("audit_blackbox.json", _audit_blackbox)],
    "audit_selection": [("audit_selection.json", _audit_selection)],
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
                "provenance": legacy.get("provenance"),
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
