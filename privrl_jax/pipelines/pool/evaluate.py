"""POOL's evaluation: the released policy in the simulator against the SAA benchmark.

It reads the release and the public simulator only, never the sensitive episodes, so
its numbers may be published with the release (unlike an audit).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from privrl_jax import planning
from privrl_jax.pipelines.pool.task import PoolTask


def evaluate(task: PoolTask, q_tables: jax.Array) -> dict[str, Any]:
    """Costs from zero inventory, the SAA benchmark c* and relative gaps.

    Simulator only; ``q_tables`` ``[H, K]``.
    """
    cfg, params = task.cfg, task.params
    v = cfg.eval
    key = jax.random.fold_in(jax.random.key(cfg.seed), 2)
    saa = planning.saa_base_stock(
        jax.random.fold_in(key, 0), params, v.saa_samples, v.saa_levels
    )
    ek = jax.random.fold_in(key, 1)  # common random numbers for every policy
    c_star = float(planning.base_stock_cost(ek, params, saa.levels, v.eval_episodes))
    cost = float(
        planning.greedy_policy_cost(
            ek, params, task.geom, q_tables, task.actions, v.eval_episodes
        )
    )
    c_beh = planning.policy_cost(ek, params, task.behaviour, v.eval_episodes)
    return {
        "policy_class_of_benchmark": "stationary base-stock, levels searched on a "
        f"grid of {v.saa_levels} per product, SAA over {v.saa_samples} demand "
        "paths, zero initial inventory",
        "saa_levels": np.asarray(saa.levels).tolist(),
        "saa_in_sample_cost": float(saa.saa_cost),
        "benchmark_cost": c_star,
        "policy_cost": cost,
        "behaviour_cost": c_beh,
        "gap": planning.relative_gap(cost, c_star),
        "behaviour_gap": planning.relative_gap(c_beh, c_star),
        "eval_episodes": v.eval_episodes,
    }
