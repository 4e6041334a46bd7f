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
    """Best base-stock level per product by SAA over ``num_samples`` demand paths.

    Jitted, with `num_samples` and `num_levels` static. Paths start from zero
    inventory; each product's level is chosen on its own (products are
    separable).

    Args:
      key: PRNG key of the demand paths.
      params: the MDP's params.
      num_samples: n, the demand paths (the paper's 10,000).
      num_levels: L, the levels linspace(0, 1, L) searched per product.

    Returns:
      `SAAResult`: the levels [w], their in-sample mean H-stage cost, the grid [L]
      and the per-product mean costs [L, w].
    """
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
    """Mean H-stage cost from zero initial inventory (vmapped rollouts).

    Compiles once per `policy` (a static jit argument of `inventory_costs`).

    Args:
      key: PRNG key of the rollouts (reuse it across policies for common random
        numbers).
      params: the MDP's params; ``init_high`` is set to 0.
      policy: the policy to evaluate (hashable).
      num_episodes: the rollouts.

    Returns:
      The mean cost, a Python float.
    """
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

    Args:
      key: PRNG key of the rollouts.
      params: the MDP's params; ``init_high`` is set to 0.
      geom: the planner's geometry (zones, grid or additive).
      q_tables: [H, K] Q tables (``PoolResult.q_tables``).
      actions: [K_a, d] the candidate actions of the greedy max.
      num_episodes: the rollouts (static).

    Returns:
      The mean H-stage cost, a scalar array.
    """
    from privrl_jax.planning._pool import greedy_policy

    policy = greedy_policy(geom, q_tables, actions)
    return rollout_costs(key, zero_start(params), policy, num_episodes).mean()


@partial(jax.jit, static_argnames="num_episodes")
def base_stock_cost(
    key: jax.Array, params: InventoryParams, levels: jax.Array, num_episodes: int
) -> jax.Array:
    """Mean cost of the noiseless base-stock policy ``levels`` from zero inventory.

    Args:
      key: PRNG key of the rollouts.
      params: the MDP's params; ``init_high`` is set to 0.
      levels: [w] order-up-to levels (e.g. ``SAAResult.levels``).
      num_episodes: the rollouts (static).

    Returns:
      The mean H-stage cost, a scalar array.
    """
    return rollout_costs(
        key, zero_start(params), base_stock_policy(levels, 0.0), num_episodes
    ).mean()


def saa_policy(result: SAAResult) -> StagePolicy:
    """The SAA base-stock policy (no noise)."""
    return base_stock_policy(result.levels, 0.0)


def relative_gap(cost: float, benchmark: float) -> float:
    """The relative optimality gap (c_i - c*) / c* (Sec. 5.1).

    Args:
      cost: c_i, a policy's mean cost.
      benchmark: c*, the benchmark's mean cost.

    Returns:
      The gap; 0 at the benchmark, negative when the policy is cheaper.

    Raises:
      ValueError: `benchmark` not positive.
    """
    if benchmark <= 0:
        raise ValueError(f"the benchmark cost must be > 0; got {benchmark}")
    return (cost - benchmark) / benchmark
