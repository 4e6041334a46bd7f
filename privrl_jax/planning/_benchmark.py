"""The SAA benchmark c* and the relative optimality gap (pool.txt, Sec. 5.1).

c* is "the benchmark cost obtained via sample average approximation with n =
10,000 samples and zero initial inventory". The paper does not name the policy
class; we search stationary base-stock (order-up-to) policies a_i = (S_i - s_i)^+,
the class that is optimal for lost-sales inventory with zero lead time and
linear costs in the single-period case and the standard benchmark of Qin et al.
2023 / Gong & Simchi-Levi 2023. Products are separable (no shared capacity or
cost), so each S_i is searched on its own grid; the objective is the sample mean
of the H-stage cost over n demand paths drawn once (SAA, Shapiro et al. 2009).

The gap of a policy is (c_i - c*) / c* with both costs estimated by the same
vmapped Monte Carlo rollouts (common random numbers, a fresh key, zero initial
inventory), so the SAA's in-sample optimism does not enter c*.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from privrl_jax.envs import (
    InventoryParams,
    StagePolicy,
    base_stock_policy,
    inventory_costs,
    inventory_stage,
    rollout_costs,
    sample_demand,
)


class SAAResult(NamedTuple):
    """Base-stock levels [w], their in-sample SAA cost, and the grid's costs [L, w]."""

    levels: jax.Array
    saa_cost: jax.Array
    grid: jax.Array
    grid_costs: jax.Array


def zero_start(params: InventoryParams) -> InventoryParams:
    """The same MDP with zero initial inventory (the paper's evaluation start)."""
    return dataclasses.replace(params, init_high=0.0)


@partial(jax.jit, static_argnames=("num_samples", "num_levels"))
def saa_base_stock(
    key: jax.Array,
    params: InventoryParams,
    num_samples: int = 10_000,
    num_levels: int = 101,
) -> SAAResult:
    """Best base-stock level per product by SAA over ``num_samples`` demand paths."""
    horizon, w = params.max_steps_in_episode, params.num_products
    keys = jax.random.split(key, num_samples * horizon).reshape(num_samples, horizon)
    hs = jnp.arange(horizon)
    demand = jax.vmap(jax.vmap(lambda k, h: sample_demand(k, params, h)))(
        keys, jnp.broadcast_to(hs, (num_samples, horizon))
    )  # [n, H, w]
    grid = jnp.linspace(0.0, 1.0, num_levels)

    def path_costs(level_s, d_path):
        def body(level, d):
            order = jnp.clip(level_s - level, 0.0, 1.0)
            out = inventory_stage(level, order, d, params)
            return out.next_level, out.product_costs

        _, c = jax.lax.scan(body, jnp.zeros(w), d_path)
        return c.sum(0)  # [w]

    def mean_cost(s):
        return jax.vmap(lambda d: path_costs(jnp.full((w,), s), d))(demand).mean(0)

    costs = jax.lax.map(mean_cost, grid)  # [L, w]
    best = jnp.argmin(costs, axis=0)
    levels = grid[best]
    return SAAResult(levels, costs[best, jnp.arange(w)].sum(), grid, costs)


def policy_cost(
    key: jax.Array, params: InventoryParams, policy: StagePolicy, num_episodes: int
) -> float:
    """Mean H-stage cost from zero initial inventory (vmapped rollouts)."""
    return float(inventory_costs(key, zero_start(params), policy, num_episodes).mean())


@partial(jax.jit, static_argnames="num_episodes")
def greedy_policy_cost(
    key: jax.Array,
    params: InventoryParams,
    geom,
    q_tables: jax.Array,
    actions: jax.Array,
    num_episodes: int,
) -> jax.Array:
    """Mean cost of ``greedy_policy(geom, q_tables, actions)`` from zero inventory.

    One compilation per geometry shape: q_tables are traced, so sweeps over runs
    and rho do not recompile the rollouts (``policy_cost`` does, per policy).
    """
    from privrl_jax.planning._pool import greedy_policy

    policy = greedy_policy(geom, q_tables, actions)
    return rollout_costs(key, zero_start(params), policy, num_episodes).mean()


@partial(jax.jit, static_argnames="num_episodes")
def base_stock_cost(
    key: jax.Array, params: InventoryParams, levels: jax.Array, num_episodes: int
) -> jax.Array:
    """Mean cost of the noiseless base-stock policy ``levels`` [w] from
    zero inventory."""
    return rollout_costs(
        key, zero_start(params), base_stock_policy(levels, 0.0), num_episodes
    ).mean()


def saa_policy(result: SAAResult) -> StagePolicy:
    """The SAA base-stock policy (no noise)."""
    return base_stock_policy(result.levels, 0.0)


def relative_gap(cost: float, benchmark: float) -> float:
    """(c_i - c*) / c* (Sec. 5.1)."""
    if benchmark <= 0:
        raise ValueError(f"the benchmark cost must be > 0; got {benchmark}")
    return (cost - benchmark) / benchmark
