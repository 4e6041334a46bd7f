"""POOL: private offline planning with one-sided feedback (pool.txt, Alg. 1).

Zones and Gram-Schmidt bases (`_zones`), private statistics from one Gaussian
mechanism and pessimistic backward induction (`_pool`); pure jitted functions.
"""

from privrl_jax.planning._pool import (
    PoolConfig,
    PoolResult,
    action_grid,
    data_cells,
    exact_statistics,
    greedy_policy,
    noise_bound,
    pessimistic_q,
    pool_mechanism,
    pool_plan,
    state_values,
    statistics_sensitivity,
)
from privrl_jax.planning._zones import (
    ZoneGeometry,
    cell_index,
    gram_schmidt,
    interpolate,
    make_zone_geometry,
    project,
    radius_for_full_range,
    zone_index,
)

__all__ = [
    "PoolConfig",
    "PoolResult",
    "ZoneGeometry",
    "action_grid",
    "cell_index",
    "data_cells",
    "exact_statistics",
    "gram_schmidt",
    "greedy_policy",
    "interpolate",
    "make_zone_geometry",
    "noise_bound",
    "pessimistic_q",
    "pool_mechanism",
    "pool_plan",
    "project",
    "radius_for_full_range",
    "state_values",
    "statistics_sensitivity",
    "zone_index",
]
