"""POOL experiments (pool.txt Sec. 5): gap vs rho (exp. 1) and zones vs grid (exp. 3).

Experiment 1: relative optimality gap (c_i - c*) / c* against the SAA base-stock
benchmark for POOL, NonPrivate, input perturbation (IP) and output perturbation
(OP) at rho in {0.1, 1, 5, 10, 20, 40}, mean +- std over runs (new data and new
noise per run), synthetic weekly demand, w = d = 1, H = 5, lambda = 0.9.
Experiment 3: POOL's zones vs the grid (q = M bins per dimension) at M zones:
gap and wall time of planning (non-private, so time is the discretisation's).

Scaled down for a shared 2-core CPU (see --runs, --episodes); the defaults are
what benchmarks/results/pool_*.json hold. Writes JSON, MD and PNG under
benchmarks/results/.

    python benchmarks/pool_experiments.py [--runs 10] [--episodes 2000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np

from privrl_jax import planning
from privrl_jax.pipelines import pool

RESULTS = Path(__file__).parent / "results"
RHOS = (0.1, 1.0, 5.0, 10.0, 20.0, 40.0)


def _cfg(method: str, rho: float, episodes: int, seed: int, **algo):
    over = [f"pool.method={method}", f"privacy.rho={'.inf' if method == 'non_private' else rho}",
            f"env.num_episodes={episodes}", f"seed={seed}"]
    over += [f"pool.{k}={v}" for k, v in algo.items()]
    return pool.load("pool/default", over)


class Bench:
    def __init__(self, episodes: int, eval_episodes: int, cfg=None):
        cfg = cfg if cfg is not None else _cfg("pool", 1.0, episodes, 0)
        self.params, self.behaviour, self.geom, self.actions = pool.build(cfg)
        key = jax.random.key(12345)
        saa = planning.saa_base_stock(jax.random.fold_in(key, 0), self.params, 10_000, 101)
        self.ek = jax.random.fold_in(key, 1)
        self.n_eval = eval_episodes
        self.c_star = planning.policy_cost(self.ek, self.params, planning.saa_policy(saa),
                                           eval_episodes)
        self.saa_levels = np.asarray(saa.levels).tolist()
        self.behaviour_gap = self.gap(self.behaviour)

    @classmethod
    def from_config(cls, cfg, eval_episodes: int) -> Bench:
        return cls(cfg.env.num_episodes, eval_episodes, cfg)

    def gap(self, policy) -> float:
        return planning.relative_gap(
            planning.policy_cost(self.ek, self.params, policy, self.n_eval), self.c_star)

    def run(self, cfg, geom, run: int) -> float:
        data = pool.collect_inventory_data(jax.random.fold_in(jax.random.key(run), 0),
                                           self.params, self.behaviour, cfg.env.num_episodes)
        mech = pool.make_mechanism(cfg, geom)
        # Benchmark noise from a public key: NOT PRIVATE, for measurement only.
        q = pool.plan(cfg, data, self.params, geom, self.actions, mech,
                      jax.random.key(1000 + run))
        return self.greedy_gap(geom, q)

    def greedy_gap(self, geom, q) -> float:
        cost = float(planning.greedy_policy_cost(self.ek, self.params, geom, q, self.actions,
                                                 self.n_eval))
        return planning.relative_gap(cost, self.c_star)


def experiment1(b: Bench, runs: int, episodes: int, rhos=RHOS) -> dict:
    methods = {"NonPrivate": ("non_private", {}), "POOL": ("pool", {}),
               "POOL (bonus_scale 0.01)": ("pool", {"bonus_scale": 0.01}),
               "POOL (paper constants)": ("pool", {"bonus_scale": 1.0}),
               "IP": ("input_perturbation", {}), "OP": ("output_perturbation", {})}
    out = {"setting": "w=d=1, H=5, lambda=0.9, synthetic weekly demand, M=10 affine zones, "
                      f"{episodes} episodes, behaviour base-stock 0.5 + N(0, 0.35^2)",
           "c_star": b.c_star, "saa_levels": b.saa_levels, "behaviour_gap": b.behaviour_gap,
           "runs": runs, "rhos": list(rhos), "gaps": {}}
    for name, (method, algo) in methods.items():
        rows = []
        for rho in (rhos if method != "non_private" else (None,)):
            cfg = _cfg(method, rho or 1.0, episodes, 0, **algo)
            gaps = [b.run(cfg, b.geom, r) for r in range(runs)]
            rows.append({"rho": rho, "mean": float(np.mean(gaps)), "std": float(np.std(gaps)),
                         "gaps": gaps})
            print(f"{name:24s} rho={rho} gap {np.mean(gaps):.3f} +- {np.std(gaps):.3f}",
                  flush=True)
        out["gaps"][name] = rows
    return out


def experiment3(b: Bench, runs: int, episodes: int, ms=(5, 10, 20, 40)) -> dict:
    out = {"setting": "non-private planning, zones (M) vs grid (M bins per dimension, M^2 "
                      "cells)", "M": list(ms), "zones": [], "grid": []}
    for m in ms:
        for kind in ("zones", "grid"):
            method = "pool" if kind == "zones" else "grid"
            cfg = _cfg("non_private", 1.0, episodes, 0, num_zones=m, grid_bins=m)
            cfg = pool.load("pool/default", [f"pool.method={method}", "privacy.rho=1",
                                             f"env.num_episodes={episodes}", f"pool.num_zones={m}",
                                             f"pool.grid_bins={m}"])
            _, _, geom, _ = pool.build(cfg)
            gaps, times = [], []
            for r in range(runs):
                npcfg = cfg  # statistics without noise: time is the discretisation's
                data = pool.collect_inventory_data(jax.random.fold_in(jax.random.key(r), 0),
                                                   b.params, b.behaviour, episodes)
                pc = planning.PoolConfig(bonus_scale=cfg.pool.bonus_scale)
                planning.pool_plan(jax.random.key(0), data, geom, b.actions, None, pc
                                   ).q_tables.block_until_ready()  # compile
                t = time.perf_counter()
                q = planning.pool_plan(jax.random.key(0), data, geom, b.actions, None, pc
                                       ).q_tables.block_until_ready()
                times.append(time.perf_counter() - t)
                gaps.append(b.greedy_gap(geom, q))
                del npcfg
            row = {"M": m, "cells": int(geom.num_cells), "gap_mean": float(np.mean(gaps)),
                   "gap_std": float(np.std(gaps)), "time_s": float(np.median(times))}
            out[kind].append(row)
            print(f"{kind:5s} M={m:3d} cells={row['cells']:5d} gap {row['gap_mean']:.3f} +- "
                  f"{row['gap_std']:.3f} time {row['time_s']:.3f}s", flush=True)
    return out


def experiment_data(b: Bench, runs: int, ns=(500, 2000, 8000, 32000), ms=(10, 20)) -> dict:
    """NonPrivate POOL vs data size: does the gap fall towards the SAA benchmark?"""
    out = {"setting": "non-private POOL (bonus_scale 0.05), affine zones", "N": list(ns),
           "M": list(ms), "behaviour_gap": b.behaviour_gap, "rows": []}
    for m in ms:
        cfg = pool.load("pool/default", ["pool.method=non_private", "privacy.rho=.inf",
                                         f"pool.num_zones={m}"])
        _, _, geom, _ = pool.build(cfg)
        for n in ns:
            cfg_n = pool.load("pool/default", ["pool.method=non_private", "privacy.rho=.inf",
                                               f"pool.num_zones={m}", f"env.num_episodes={n}"])
            gaps = [b.run(cfg_n, geom, r) for r in range(runs)]
            out["rows"].append({"M": m, "N": n, "mean": float(np.mean(gaps)),
                                "std": float(np.std(gaps))})
            print(f"data M={m} N={n} gap {np.mean(gaps):.3f} +- {np.std(gaps):.3f}", flush=True)
    return out


SELECT_SCALES = (0.003, 0.01, 0.02, 0.05, 0.1)


def select_bonus_scale(runs: int, episodes: int, eval_episodes: int,
                       scales=SELECT_SCALES, rhos=RHOS) -> dict:
    """Chooses the default bonus_scale on a public stand-in, never on the evaluated task.

    Stand-in: the same simulator family with another synthetic demand series
    (``env.demand_seed=1``; experiments use seed 0), other episodes (data keys
    100 + r) and other noise keys. Rule, fixed before looking: the scale with the
    smallest gap averaged over the rho grid (ties: the larger scale).
    """
    base = ["env.demand_seed=1", f"env.num_episodes={episodes}"]
    b = Bench.from_config(pool.load("pool/default", base), eval_episodes)
    out = {"setting": "public stand-in: synthetic demand seed 1 (evaluation uses seed 0), "
                      f"data keys 100+r, {episodes} episodes, {runs} runs per cell",
           "scales": list(scales), "rhos": list(rhos), "behaviour_gap": b.behaviour_gap,
           "rows": []}
    for sc in scales:
        means = []
        for rho in rhos:
            cfg = pool.load("pool/default", [*base, "pool.method=pool", f"privacy.rho={rho}",
                                             f"pool.bonus_scale={sc}"])
            gaps = [b.run(cfg, b.geom, 100 + r) for r in range(runs)]
            means.append(float(np.mean(gaps)))
        out["rows"].append({"scale": sc, "gaps": means, "average": float(np.mean(means))})
        print(f"select scale={sc} gaps {np.round(means, 3).tolist()} avg {np.mean(means):.3f}",
              flush=True)
    best = min(out["rows"], key=lambda x: (round(x["average"], 6), -x["scale"]))
    out["chosen"] = best["scale"]
    return out


def _md_select(r: dict) -> str:
    lines = ["# POOL: choosing bonus_scale on a public stand-in", "", r["setting"] +
             f"; behaviour gap {r['behaviour_gap']:.3f}.", "",
             "| bonus_scale | " + " | ".join(f"rho={x:g}" for x in r["rhos"]) + " | average |",
             "|---|" + "---|" * (len(r["rhos"]) + 1)]
    for x in r["rows"]:
        lines.append(f"| {x['scale']:g} | " + " | ".join(f"{g:.3f}" for g in x["gaps"]) +
                     f" | {x['average']:.3f} |")
    lines += ["", f"Chosen (smallest average): {r['chosen']:g}."]
    return "\n".join(lines) + "\n"


def _md_data(r: dict) -> str:
    lines = ["# POOL: non-private gap vs data size", "", r["setting"] +
             f"; behaviour gap {r['behaviour_gap']:.3f}.", "",
             "| M | " + " | ".join(f"N={n}" for n in r["N"]) + " |",
             "|---|" + "---|" * len(r["N"])]
    for m in r["M"]:
        cells = [f"{x['mean']:.3f} +- {x['std']:.3f}" for x in r["rows"] if x["M"] == m]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def experiment2(runs: int, episodes: int, eval_episodes: int, rho: float = 10.0) -> dict:
    """Sweeps of POOL at one rho: H, |lambda|, w + d, M, and the bonus scale."""
    sweeps = {
        "H": [(f"env.horizon={h}",) for h in (5, 10, 15, 20)],
        "lambda": [(f"env.boundary={x}",) for x in (0.5, 0.6, 0.7, 0.8, 0.9, 1.5)],
        "w+d": [(f"env.num_products={w}", f"pool.action_levels={lv}")
                for w, lv in ((1, 11), (2, 6), (3, 4))],
        "M": [(f"pool.num_zones={m}",) for m in (5, 10, 20, 40)],
        "bonus_scale": [(f"pool.bonus_scale={x}",) for x in (0.0, 0.01, 0.05, 0.2, 1.0)],
    }
    out = {"setting": f"POOL at rho={rho}, {episodes} episodes, {runs} runs; other settings as "
                      "pool/default", "rho": rho, "sweeps": {}}
    for name, variants in sweeps.items():
        rows = []
        for over in variants:
            cfg = pool.load("pool/default", ["pool.method=pool", f"privacy.rho={rho}",
                                             f"env.num_episodes={episodes}", *over])
            b = Bench.from_config(cfg, eval_episodes)
            gaps = [b.run(cfg, b.geom, r) for r in range(runs)]
            rows.append({"setting": ", ".join(over), "mean": float(np.mean(gaps)),
                         "std": float(np.std(gaps)), "behaviour_gap": b.behaviour_gap})
            print(f"exp2 {name}: {', '.join(over)} gap {np.mean(gaps):.3f} +- "
                  f"{np.std(gaps):.3f} (behaviour {b.behaviour_gap:.3f})", flush=True)
        out["sweeps"][name] = rows
    return out


def _md2(r: dict) -> str:
    lines = ["# POOL experiment 2: sweeps", "", r["setting"] + ".", "",
             "| sweep | setting | POOL gap | behaviour gap |", "|---|---|---|---|"]
    for name, rows in r["sweeps"].items():
        for x in rows:
            lines.append(f"| {name} | {x['setting']} | {x['mean']:.3f} +- {x['std']:.3f} | "
                         f"{x['behaviour_gap']:.3f} |")
    return "\n".join(lines) + "\n"


def _md1(r: dict) -> str:
    lines = ["# POOL experiment 1: relative optimality gap vs rho", "", r["setting"] + ".",
             (f"c* = {r['c_star']:.4f} (SAA base-stock levels {r['saa_levels']}); behaviour "
              f"gap {r['behaviour_gap']:.3f}; mean +- std over {r['runs']} runs."), "",
             "| method | " + " | ".join(f"rho={x:g}" for x in r["rhos"]) + " |",
             "|---|" + "---|" * len(r["rhos"])]
    for name, rows in r["gaps"].items():
        if len(rows) == 1:
            cells = [f"{rows[0]['mean']:.3f} +- {rows[0]['std']:.3f}"] * len(r["rhos"])
        else:
            cells = [f"{x['mean']:.3f} +- {x['std']:.3f}" for x in rows]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _md3(r: dict) -> str:
    lines = ["# POOL experiment 3: zones vs grid", "", r["setting"] + ".", "",
             "| M | zone cells | zones gap | zones time (s) | grid cells | grid gap | grid time (s) |",
             "|---|---|---|---|---|---|---|"]
    for z, g in zip(r["zones"], r["grid"]):
        lines.append(f"| {z['M']} | {z['cells']} | {z['gap_mean']:.3f} +- {z['gap_std']:.3f} | "
                     f"{z['time_s']:.3f} | {g['cells']} | {g['gap_mean']:.3f} +- "
                     f"{g['gap_std']:.3f} | {g['time_s']:.3f} |")
    return "\n".join(lines) + "\n"


def _plot1(r: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3.5))
    ax = fig.subplots()
    for name, rows in r["gaps"].items():
        if len(rows) == 1:
            ax.axhline(rows[0]["mean"], ls="--", color="k", label=name)
            continue
        ax.errorbar(r["rhos"], [x["mean"] for x in rows], [x["std"] for x in rows],
                    marker="o", capsize=3, label=name)
    ax.axhline(r["behaviour_gap"], ls=":", color="gray", label="behaviour")
    ax.set_xscale("log")
    ax.set_xlabel("rho (zCDP)")
    ax.set_ylabel("relative optimality gap")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _plot3(r: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2))
    a1, a2 = fig.subplots(1, 2)
    for kind in ("zones", "grid"):
        ms = [x["M"] for x in r[kind]]
        a1.errorbar(ms, [x["gap_mean"] for x in r[kind]], [x["gap_std"] for x in r[kind]],
                    marker="o", capsize=3, label=kind)
        a2.plot(ms, [x["time_s"] for x in r[kind]], marker="o", label=kind)
    a1.set_xlabel("M")
    a1.set_ylabel("relative gap")
    a2.set_xlabel("M")
    a2.set_ylabel("planning time (s)")
    a1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--eval-episodes", type=int, default=4000)
    ap.add_argument("--only", choices=("select", "1", "2", "3", "data"), default=None)
    ap.add_argument("--rhos", type=float, nargs="*", default=list(RHOS))
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.only == "select":
        rs = select_bonus_scale(args.runs, args.episodes, args.eval_episodes)
        (RESULTS / "pool_select.json").write_text(json.dumps(rs, indent=2))
        (RESULTS / "pool_select.md").write_text(_md_select(rs))
        return
    b = Bench(args.episodes, args.eval_episodes)
    if args.only in (None, "2"):
        r2 = experiment2(max(2, args.runs // 3), args.episodes, args.eval_episodes)
        (RESULTS / "pool_exp2.json").write_text(json.dumps(r2, indent=2))
        (RESULTS / "pool_exp2.md").write_text(_md2(r2))
    if args.only in (None, "data"):
        rd = experiment_data(b, max(2, args.runs // 2))
        (RESULTS / "pool_data.json").write_text(json.dumps(rd, indent=2))
        (RESULTS / "pool_data.md").write_text(_md_data(rd))
    if args.only in (None, "3"):
        r3 = experiment3(b, max(1, args.runs // 3), args.episodes)
        (RESULTS / "pool_exp3.json").write_text(json.dumps(r3, indent=2))
        (RESULTS / "pool_exp3.md").write_text(_md3(r3))
        _plot3(r3, RESULTS / "pool_exp3.png")
    if args.only in (None, "1"):
        r1 = experiment1(b, args.runs, args.episodes, tuple(args.rhos))
        (RESULTS / "pool_exp1.json").write_text(json.dumps(r1, indent=2))
        (RESULTS / "pool_exp1.md").write_text(_md1(r1))
        _plot1(r1, RESULTS / "pool_exp1.png")


if __name__ == "__main__":
    main()
