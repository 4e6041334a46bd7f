"""POOL's task: what a run knows before it reads a sensitive episode.

:func:`build_task` builds it once from the config (the inventory MDP and its demand, the
behaviour policy, the zone geometry and the candidate actions) and the run passes it
down, so nothing is cached at module level and no device array outlives its run.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import planning, privacy
from privrl_jax.data import load_rossmann, synthetic_demand
from privrl_jax.envs import (
    InventoryParams,
    base_stock_policy,
    make_inventory_params,
)
from privrl_jax.pipelines._pool_config import InventoryEnvConfig, PoolRunConfig


def demand_series(
    env: InventoryEnvConfig, horizon_days: int = 364
) -> np.ndarray | None:
    """The demand series of the config (None for a parametric law)."""
    if env.demand == "synthetic":
        return synthetic_demand(
            horizon_days,
            env.num_products,
            target_mean=env.demand_mean,
            seed=env.demand_seed,
        )
    if env.demand == "rossmann":
        stores = tuple(env.stores)
        if len(stores) != env.num_products:
            raise ValueError(
                f"env.stores must name env.num_products={env.num_products} "
                f"stores; got {list(stores)}."
            )
        return load_rossmann(env.demand_file, stores, target_mean=env.demand_mean)
    return None


def build_params(env: InventoryEnvConfig) -> InventoryParams:
    """The inventory MDP of the config."""
    series = demand_series(env)
    return make_inventory_params(
        env.num_products,
        env.horizon,
        boundary=env.boundary,
        demand="uniform" if series is not None else env.demand,
        demand_mean=env.demand_mean,
        demand_scale=env.demand_scale,
        holding_cost=env.holding_cost,
        lost_sales_cost=env.lost_sales_cost,
        order_cost=env.order_cost,
        init_high=env.init_high,
        demand_series=series,
    )


@dataclasses.dataclass(frozen=True)
class BaseStockBehaviour:
    """The config's behaviour policy (``envs.base_stock_policy``), equal by value.

    The jitted collection and rollouts take the policy as a static argument: a policy
    that compares equal across runs reuses their compilations without a module-level
    cache.
    """

    level: float
    noise_std: float
    num_products: int

    def __call__(self, key: jax.Array, h: jax.Array, level: jax.Array) -> jax.Array:
        """The order at stage ``h`` for inventory ``level``, in [0, 1] per product."""
        base = jnp.full((self.num_products,), self.level)
        return base_stock_policy(base, self.noise_std)(key, h, level)


def make_geometry(cfg: PoolRunConfig, params: InventoryParams):
    """The public zone (or grid) geometry of the configured method."""
    e, a = cfg.env, cfg.pool
    if a.method == "grid":
        return planning.make_grid_geometry(params.boundary, a.grid_bins)
    if a.zones == "additive":
        return planning.make_additive_geometry(
            params.boundary,
            a.num_zones,
            state_dim=e.num_products,
            radius=a.radius,
            affine=a.affine,
            limiter=a.limiter,
            seed=a.geometry_seed,
            action_levels=a.action_levels,
        )
    box = np.minimum(np.asarray(params.boundary[0]), 1.0)
    radius = a.radius if a.radius is not None else float(np.linalg.norm(box))
    return planning.make_zone_geometry(
        params.boundary,
        a.num_zones,
        radius=radius,
        affine=a.affine,
        limiter=a.limiter,
        seed=a.geometry_seed,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class PoolTask:
    """The public side of one POOL configuration.

    Attributes:
      cfg: the run's config.
      params: the inventory MDP (simulator; the evaluation runs the release in it).
      behaviour: the behaviour policy that (notionally) collected the data.
      geom: the zone geometry (``planning``'s zone, additive or grid geometry).
      actions: ``[A, w]`` candidate actions.
    """

    cfg: PoolRunConfig
    params: InventoryParams
    behaviour: BaseStockBehaviour
    geom: object
    actions: jax.Array


def build_task(cfg: PoolRunConfig) -> PoolTask:
    """The task of ``cfg``: public inputs only (validates the demand file first)."""
    e, a = cfg.env, cfg.pool
    params = build_params(e)
    behaviour = BaseStockBehaviour(
        float(e.behaviour_level), float(e.behaviour_noise), e.num_products
    )
    geom = make_geometry(cfg, params)
    actions = planning.action_candidates(e.num_products, a.action_levels, a.max_actions)
    return PoolTask(cfg, params, behaviour, geom, actions)


def build(cfg: PoolRunConfig) -> tuple:
    """The public pieces of ``build_task(cfg)``.

    (params, behaviour policy, geometry, candidate actions).
    """
    t = build_task(cfg)
    return t.params, t.behaviour, t.geom, t.actions


def make_mechanism(cfg: PoolRunConfig, geom) -> privacy.GaussianMechanism | None:
    """The run's one Gaussian mechanism (None for ``non_private``)."""
    a, e, rho = cfg.pool, cfg.env, cfg.privacy.rho
    if a.method in ("pool", "grid"):
        return planning.pool_mechanism(rho, e.horizon)
    if a.method == "input_perturbation":
        return planning.input_mechanism(rho, e.horizon, e.num_products, e.num_products)
    if a.method == "output_perturbation":
        return planning.output_mechanism(rho, e.horizon, geom.num_cells)
    return None


def dataset_id(cfg: PoolRunConfig) -> str:
    """Name the sensitive episodes by their source, never by hashing their contents."""
    e = cfg.env
    return (
        f"collected:inventory:w={e.num_products}:H={e.horizon}:seed={cfg.seed}:"
        f"N={e.num_episodes}:demand={e.demand}:behaviour=({e.behaviour_level},"
        f"{e.behaviour_noise})"
        + (f":demand_seed={e.demand_seed}" if e.demand_seed else "")
    )
