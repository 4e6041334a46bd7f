"""POOL's plan time: the jitted non-private plan (``planning.pool_plan``, no mechanism)
on the paper's zones, the additive zones and a grid, as M and w + d move (POOL's RQ3,
its timing half; the accuracy half is the experiment ``pool_zones_vs_grid``).

Code speed only: the data are simulated from public keys, nothing is private. Each
cell compiles once, then times ``--rounds`` plans (median and min); the cells run in
interleaved rounds (``_harness.interleave``), so a load change on a shared CPU hits
every cell alike.

    python benchmarks/pool_plan_time.py [--cells 2:paper:10 2:grid:10 6:additive:3 ...]
        [--rounds 5] [--out benchmarks/results/pool_plan_time]

A cell is ``w+d:geometry:M`` (geometry ``paper``, ``additive`` or ``grid``; M zones,
or bins per dimension for the grid: M^(w+d) cells).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import _harness as h
import jax

from privrl_jax import planning
from privrl_jax.envs import collect_inventory_data
from privrl_jax.pipelines import pool

CELLS = ("2:paper:10", "2:additive:10", "2:grid:10", "6:paper:3", "6:additive:3")
CELLS += ("6:grid:3",)


def cell_config(cell: str) -> pool.PoolRunConfig:
    """The shipped ``pool/default`` config with the cell's products and geometry: the
    grid is a private method (rho 1; the plan is timed without its mechanism), the
    zones run ``non_private``."""
    n, geometry, m = cell.split(":")
    cfg = pool.load("pool/default")
    if geometry == "grid":
        algo = dataclasses.replace(cfg.pool, method="grid", grid_bins=int(m))
        rho = 1.0
    else:
        algo = dataclasses.replace(
            cfg.pool, method="non_private", zones=geometry, num_zones=int(m)
        )
        rho = math.inf
    return dataclasses.replace(
        cfg,
        env=dataclasses.replace(cfg.env, num_products=int(n) // 2),
        pool=algo,
        privacy=dataclasses.replace(cfg.privacy, rho=rho),
    )


def _plan_fn(cell: str):
    """The cell's (cells K, compile seconds, a function that runs one plan)."""
    cfg = cell_config(cell)
    params, behaviour, geom, actions = pool.build(cfg)
    data = collect_inventory_data(
        jax.random.key(0), params, behaviour, cfg.env.num_episodes
    )
    pc = planning.PoolConfig(bonus_scale=cfg.pool.bonus_scale)

    def plan():
        # No mechanism: the time is the discretisation's, not the noise's.
        key = jax.random.key(0)
        return planning.pool_plan(key, data, geom, actions, None, pc).q_tables

    return int(geom.num_cells), h.timed(plan)[1], plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", nargs="+", default=list(CELLS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    args = ap.parse_args()
    fns = {c: _plan_fn(c) for c in args.cells}
    timings = h.interleave(
        {c: plan for c, (_, _, plan) in fns.items()}, rounds=args.rounds, warmup=0
    )
    head = ("w+d", "geometry", "M", "cells K", "plan median (s)", "plan min (s)")
    head += ("compile (s)",)
    rows = [
        {"cell": c, "cells": k, "compile_s": s, "times_s": timings.flat(c)}
        for c, (k, s, _) in fns.items()
    ]
    table = [
        (*r["cell"].split(":"), f"{r['cells']:,}", f"{timings.median(r['cell']):.4f}")
        + (f"{timings.fastest(r['cell']):.4f}", f"{r['compile_s']:.1f}")
        for r in rows
    ]
    md = h.markdown_table(head, table)
    print(md)
    if args.out:
        h.write_outputs(
            args.out,
            {"rounds": args.rounds, "rows": rows},
            "# POOL: jitted non-private plan time (benchmarks/pool_plan_time.py)\n\n"
            f"{timings.protocol()}, after compiling; 2000 episodes, H = 5.\n\n{md}",
        )


if __name__ == "__main__":
    main()
