"""POOL: private offline planning with one-sided feedback (pool.txt, Alg. 1).

Zones and Gram-Schmidt bases (`_zones`), the grid baseline (`_grid`), private
statistics from one Gaussian mechanism and pessimistic backward induction
(`_pool`), input/output perturbation (`_baselines`), the SAA benchmark and the
relative optimality gap (`_benchmark`); pure jitted functions.
"""

from privrl_jax.planning._baselines import (
    input_mechanism,
    input_perturbation,
    input_sensitivity,
    output_mechanism,
    output_perturbation,
    output_sensitivity,
)
from privrl_jax.planning._benchmark import (
    SAAResult,
    base_stock_cost,
    greedy_policy_cost,
    policy_cost,
    relative_gap,
    saa_base_stock,
    saa_policy,
    zero_start,
)
from privrl_jax.planning._grid import (
    GridGeometry,
    grid_cell,
    grid_value,
    make_grid_geometry,
)
from privrl_jax.planning._pool import (
    Geometry,
    PoolConfig,
    PoolResult,
    action_grid,
    bonus_iota,
    data_cells,
    exact_statistics,
    geometry_cell,
    geometry_value,
    greedy_policy,
    noise_bound,
    paper_constants_samples_needed,
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
    zone_value,
)

__all__ = [
    "Geometry",
    "GridGeometry",
    "PoolConfig",
    "PoolResult",
    "SAAResult",
    "ZoneGeometry",
    "action_grid",
    "base_stock_cost",
    "bonus_iota",
    "cell_index",
    "data_cells",
    "exact_statistics",
    "geometry_cell",
    "geometry_value",
    "gram_schmidt",
    "greedy_policy",
    "greedy_policy_cost",
    "grid_cell",
    "grid_value",
    "input_mechanism",
    "input_perturbation",
    "input_sensitivity",
    "interpolate",
    "make_grid_geometry",
    "make_zone_geometry",
    "noise_bound",
    "output_mechanism",
    "output_perturbation",
    "output_sensitivity",
    "paper_constants_samples_needed",
    "pessimistic_q",
    "policy_cost",
    "pool_mechanism",
    "pool_plan",
    "project",
    "radius_for_full_range",
    "relative_gap",
    "saa_base_stock",
    "saa_policy",
    "state_values",
    "statistics_sensitivity",
    "zero_start",
    "zone_index",
    "zone_value",
]
