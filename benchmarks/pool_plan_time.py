"""POOL's plan time: the jitted non-private plan (``planning.pool_plan``, no mechanism)
on the paper's zones, the additive zones and a grid, as M and w + d move (POOL's RQ3,
its timing half; the accuracy half is the experiment ``pool_zones_vs_grid``).

Code speed only: the data are simulated from public keys, nothing is private. Each
cell compiles once, then times ``--rounds`` plans (median and min); the rounds of the
cells are interleaved, so a load change on a shared CPU hits every cell alike.

    python benchmarks/pool_plan_time.py [--cells 2:paper:10 2:grid:10 6:additive:3 ...]
        [--rounds 5] [--out benchmarks/results/pool_plan_time]

A cell is ``w+d:geometry:M`` (geometry ``paper``, ``additive`` or ``grid``; M zones,
or bins per dimension for the grid: M^(w+d) cells).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import jax

from privrl_jax import planning, provenance
from privrl_jax.envs import collect_inventory_data
from privrl_jax.pipelines import pool

CELLS = ("2:paper:10", "2:additive:10", "2:grid:10", "6:paper:3", "6:additive:3")
CELLS += ("6:grid:3",)


def _plan_fn(cell: str):
    """The cell's (cells K, compile seconds, a function that runs one plan)."""
    n, geometry, m = cell.split(":")
    w = int(n) // 2
    over = [f"env.num_products={w}", "pool.method=non_private", "privacy.rho=.inf"]
    if geometry == "grid":
        over += ["pool.method=grid", "privacy.rho=1", f"pool.grid_bins={m}"]
    else:
        over += [f"pool.zones={geometry}", f"pool.num_zones={m}"]
    cfg = pool.load("pool/default", over)
    params, behaviour, geom, actions = pool.build(cfg)
    data = collect_inventory_data(
        jax.random.key(0), params, behaviour, cfg.env.num_episodes
    )
    pc = planning.PoolConfig(bonus_scale=cfg.pool.bonus_scale)

    def plan() -> None:
        # No mechanism: the time is the discretisation's, not the noise's.
        planning.pool_plan(
            jax.random.key(0), data, geom, actions, None, pc
        ).q_tables.block_until_ready()

    t = time.perf_counter()
    plan()
    return int(geom.num_cells), time.perf_counter() - t, plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", nargs="+", default=list(CELLS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args()
    fns = {c: _plan_fn(c) for c in args.cells}
    times: dict[str, list[float]] = {c: [] for c in args.cells}
    for _ in range(args.rounds):
        for c, (_, _, plan) in fns.items():
            t = time.perf_counter()
            plan()
            times[c].append(time.perf_counter() - t)
    lines = [
        "| w+d | geometry | M | cells K | plan median (s) | plan min (s) "
        "| compile (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = []
    for c, (k, compile_s, _) in fns.items():
        n, geometry, m = c.split(":")
        ts = times[c]
        rows.append({"cell": c, "cells": k, "compile_s": compile_s, "times_s": ts})
        lines.append(
            f"| {n} | {geometry} | {m} | {k:,} | {statistics.median(ts):.4f} | "
            f"{min(ts):.4f} | {compile_s:.1f} |"
        )
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        info = {"rounds": args.rounds, "rows": rows, "provenance": provenance()}
        out.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
        out.with_suffix(".md").write_text(
            "# POOL: jitted non-private plan time (benchmarks/pool_plan_time.py)\n\n"
            f"{args.rounds} interleaved rounds after compiling; 2000 episodes, "
            "H = 5.\n\n" + md
        )


if __name__ == "__main__":
    main()
