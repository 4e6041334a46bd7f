"""Additive zones vs the grid and the paper's zones: private gap at rho = 10, plan time.

Private (``--only private``): w + d = 4 and 6 (w = d = 2, 3), rho = 10, pool/default
otherwise (H = 5, lambda = 0.9, 2000 episodes, the shipped bonus_scale 0.003;
``--bonus-scale 0.01`` reruns at the value before issue 24 into
``results/pool_additive_private_bs0.01.*``), new data and new noise per run (noise
from public keys: NOT PRIVATE, measurement only). Methods:
``zones=additive`` at M = 10 and at the M whose cell count K is closest below the
grid's, the grid at q bins (K = q^(w+d)), ``zones=paper`` at M = 10, and the
additive zones without noise. Released coordinates = 3 H K for every method (the
same statistics, sensitivity sqrt(3 H) and mechanism). Mean, sample std (ddof=1)
and a 95% t-interval of the mean over the runs.

Timing (``--only time``): jitted non-private plan (median and min of 5 after compiling),
cells, released statistics' bytes, the geometry's bytes and XLA's temp buffer of the
compiled plan, at w + d = 2, 4, 6, 8 for additive zones (M = 10, 20, 40), the
paper's zones (M = 10) and grids up to 400,000 cells.

    PYTHONPATH=. python benchmarks/pool_additive.py [--only private|time] [--runs 10]
        [--bonus-scale S]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import numpy as np
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)
from pool_experiments import Bench  # noqa: E402
from scipy import stats

from privrl_jax import planning
from privrl_jax.envs import collect_inventory_data
from privrl_jax.pipelines import pool

RESULTS = Path(__file__).parent / "results"
RHO = 10.0
# Overrides put before every run's own (--bonus-scale); empty: the shipped config.
COMMON: list[str] = []


def _summary(gaps: list[float]) -> dict:
    g = np.asarray(gaps, np.float64)
    n = g.size
    std = float(g.std(ddof=1)) if n > 1 else float("nan")
    half = (
        float(stats.t.ppf(0.975, n - 1) * std / np.sqrt(n)) if n > 1 else float("nan")
    )
    return {
        "mean": float(g.mean()),
        "std": std,
        "ci95": [float(g.mean()) - half, float(g.mean()) + half],
        "runs": n,
        "gaps": g.tolist(),
    }


def _methods(w: int) -> list[tuple[str, list[str]]]:
    n = 2 * w
    grid_q = {2: (3, 4, 5), 3: (2, 3, 4)}[w]
    matched = (
        grid_q[0] ** n
    )  # the smallest grid of the sweep (81 cells at 4-D, 64 at 6-D)
    m_matched = matched // (w * 3)  # additive K = w M (g + 1) = 3 w M <= the grid's K
    rows = [
        (
            f"additive M={m_matched} (K<={matched})",
            ["pool.method=pool", "pool.zones=additive", f"pool.num_zones={m_matched}"],
        ),
        (
            "additive M=10",
            ["pool.method=pool", "pool.zones=additive", "pool.num_zones=10"],
        ),
    ]
    rows += [
        (f"grid q={q}", ["pool.method=grid", f"pool.grid_bins={q}"]) for q in grid_q
    ]
    rows += [
        (
            "paper zones M=10",
            ["pool.method=pool", "pool.zones=paper", "pool.num_zones=10"],
        ),
        (
            "additive M=10, non-private",
            ["pool.method=non_private", "pool.zones=additive", "pool.num_zones=10"],
        ),
    ]
    return rows


def private(runs: int, episodes: int, eval_episodes: int, ws=(2, 3)) -> dict:
    out = {
        "setting": f"rho={RHO} (zCDP), pool/default otherwise (H=5, lambda=0.9, "
        f"{episodes} episodes, bonus_scale "
        f"{pool.load('pool/default', COMMON).pool.bonus_scale:g}), {runs} runs "
        "(data keys r, "
        f"noise keys 1000+r), {eval_episodes} evaluation episodes; mean, sample "
        "std (ddof=1), 95% t-interval",
        "rows": [],
    }
    for w in ws:
        base = [*COMMON, f"env.num_products={w}", f"env.num_episodes={episodes}"]
        b = Bench.from_config(pool.load("pool/default", base), eval_episodes)
        for name, over in _methods(w):
            rho = ".inf" if "non_private" in over[0] else RHO
            cfg = pool.load("pool/default", [*base, *over, f"privacy.rho={rho}"])
            _, _, geom, _ = pool.build(cfg)
            t = time.perf_counter()
            gaps = [b.run(cfg, geom, r) for r in range(runs)]
            row = {
                "w+d": 2 * w,
                "method": name,
                "cells": int(geom.num_cells),
                "released": 3 * cfg.env.horizon * int(geom.num_cells),
                "behaviour_gap": b.behaviour_gap,
                **_summary(gaps),
                "wall_s": time.perf_counter() - t,
            }
            out["rows"].append(row)
            print(
                f"w+d={2 * w} {name:28s} K={row['cells']:6d} gap {row['mean']:.3f} +- "
                f"{row['std']:.3f} [{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}] "
                f"({row['wall_s']:.0f}s)",
                flush=True,
            )
    return out


def _nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def timing(episodes: int, dims=(2, 4, 6, 8), max_cells: int = 400_000) -> dict:
    out = {
        "setting": "non-private plan (pool_plan, mechanism=None), "
        f"{episodes} episodes, "
        "H=5; time = median (and min) of 5 jitted plans after compiling, on a CPU "
        "shared "
        "with other jobs; temp = XLA's "
        "temp buffer of the compiled plan (memory_analysis)",
        "rows": [],
    }
    grids = {2: (8, 16, 40), 4: (3, 5, 8, 16), 6: (2, 3, 5, 8), 8: (2, 3, 4, 5)}
    for n in dims:
        w = n // 2
        variants = [
            ("additive", m, ["pool.zones=additive", f"pool.num_zones={m}"])
            for m in (10, 20, 40)
        ]
        if n <= 6:
            variants.append(("paper", 10, ["pool.zones=paper", "pool.num_zones=10"]))
        variants += [
            ("grid", q, ["pool.method=grid", f"pool.grid_bins={q}"])
            for q in grids[n]
            if q**n <= max_cells
        ]
        for kind, m, over in variants:
            cfg = pool.load(
                "pool/default",
                [f"env.num_products={w}", f"env.num_episodes={episodes}", *over],
            )
            t0 = time.perf_counter()
            params, behaviour, geom, actions = pool.build(cfg)
            build_s = time.perf_counter() - t0
            data = collect_inventory_data(
                jax.random.key(0), params, behaviour, episodes
            )
            pc = planning.PoolConfig(bonus_scale=cfg.pool.bonus_scale)
            t0 = time.perf_counter()
            planning.pool_plan(
                jax.random.key(0), data, geom, actions, None, pc
            ).q_tables.block_until_ready()
            compile_s = time.perf_counter() - t0
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                planning.pool_plan(
                    jax.random.key(0), data, geom, actions, None, pc
                ).q_tables.block_until_ready()
                ts.append(time.perf_counter() - t0)
            try:
                mem = (
                    planning.pool_plan.lower(
                        jax.random.key(0), data, geom, actions, None, pc
                    )
                    .compile()
                    .memory_analysis()
                )
                temp = int(mem.temp_size_in_bytes)
            except Exception:  # noqa: BLE001  (not every backend reports it)
                temp = None
            row = {
                "w+d": n,
                "kind": kind,
                "M": m,
                "cells": int(geom.num_cells),
                "statistics_bytes": 3 * cfg.env.horizon * int(geom.num_cells) * 4,
                "geometry_bytes": _nbytes(geom),
                "temp_bytes": temp,
                "plan_s": float(np.median(ts)),
                "plan_min_s": float(np.min(ts)),
                "compile_s": compile_s,
                "build_s": build_s,
            }
            out["rows"].append(row)
            print(
                f"w+d={n} {kind:8s} M/q={m:3d} K={row['cells']:8d} plan "
                f"{row['plan_s']:.4f}s "
                f"compile {compile_s:.1f}s build {build_s:.2f}s temp {temp}",
                flush=True,
            )
    return out


def _fmt_bytes(x) -> str:
    if x is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024:
            return f"{x:.0f} {unit}"
        x /= 1024
    return f"{x:.1f} TiB"


def _md_private(r: dict) -> str:
    lines = [
        "# POOL: additive zones vs grid and paper zones, private (rho = 10)",
        "",
        r["setting"] + ".",
        "",
        "| w+d | method | cells K | released 3HK | gap mean | std | 95% CI | behaviour "
        "|",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in r["rows"]:
        lines.append(
            f"| {x['w+d']} | {x['method']} | {x['cells']:,} | {x['released']:,} | "
            f"{x['mean']:.3f} | {x['std']:.3f} | [{x['ci95'][0]:.3f}, "
            f"{x['ci95'][1]:.3f}] | {x['behaviour_gap']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _md_time(r: dict) -> str:
    lines = [
        "# POOL: plan time and memory vs M and w + d",
        "",
        r["setting"] + ".",
        "",
        "| w+d | geometry | M or q | cells K | plan median (s) | plan min (s) | "
        "compile (s) "
        "| statistics | geometry | XLA temp |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["rows"]:
        lines.append(
            f"| {x['w+d']} | {x['kind']} | {x['M']} | {x['cells']:,} | "
            f"{x['plan_s']:.4f} | {x['plan_min_s']:.4f} | {x['compile_s']:.1f} | "
            f"{_fmt_bytes(x['statistics_bytes'])} | {_fmt_bytes(x['geometry_bytes'])} "
            f"| {_fmt_bytes(x['temp_bytes'])} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("private", "time"), default=None)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--eval-episodes", type=int, default=4000)
    ap.add_argument("--dims", type=int, nargs="*", default=[2, 4, 6, 8])
    ap.add_argument(
        "--bonus-scale",
        type=float,
        default=None,
        help="private: pool.bonus_scale of every run (default: the shipped 0.003; "
        "0.01 reproduces the table before issue 24); files get a _bs<scale> suffix",
    )
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if args.only in (None, "private"):
        sfx = ""
        if args.bonus_scale is not None:
            COMMON.append(f"pool.bonus_scale={args.bonus_scale}")
            sfx = f"_bs{args.bonus_scale:g}"
        r = private(args.runs, args.episodes, args.eval_episodes)
        dump_json(RESULTS / f"pool_additive_private{sfx}.json", r, indent=2)
        (RESULTS / f"pool_additive_private{sfx}.md").write_text(_md_private(r))
    if args.only in (None, "time"):
        r = timing(args.episodes, tuple(args.dims))
        dump_json(RESULTS / "pool_additive_time.json", r, indent=2)
        (RESULTS / "pool_additive_time.md").write_text(_md_time(r))


if __name__ == "__main__":
    main()
