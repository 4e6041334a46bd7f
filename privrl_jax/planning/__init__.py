"""POOL: private offline planning with one-sided feedback (pool.txt, Alg. 1).

Zones and Gram-Schmidt bases (`_zones`), additive zones -- the zones of each
product's own plane, summed, our construction beyond the paper (`_additive`),
the grid baseline (`_grid`), private
statistics from one Gaussian mechanism and pessimistic backward induction
(`_pool`), input/output perturbation (`_baselines`), the SAA benchmark and the
relative optimality gap (`_benchmark`); pure jitted functions.
"""

from privrl_jax.planning._additive import (
    AdditiveGeometry,
    make_additive_geometry,
)
from privrl_jax.planning._baselines import (
    input_mechanism,
    input_perturbation,
    output_mechanism,
    output_perturbation,
)
from privrl_jax.planning._benchmark import (
    base_stock_cost,
    greedy_policy_cost,
    policy_cost,
    relative_gap,
    saa_base_stock,
)
from privrl_jax.planning._grid import (
    make_grid_geometry,
)
from privrl_jax.planning._pool import (
    PoolConfig,
    PoolResult,
    action_candidates,
    action_grid,
    greedy_policy,
    pool_mechanism,
    pool_plan,
)
from privrl_jax.planning._zones import (
    make_zone_geometry,
)

__all__ = [
    "AdditiveGeometry",
    "PoolConfig",
    "PoolResult",
    "action_candidates",
    "action_grid",
    "base_stock_cost",
    "greedy_policy",
    "greedy_policy_cost",
    "input_mechanism",
    "input_perturbation",
    "make_additive_geometry",
    "make_grid_geometry",
    "make_zone_geometry",
    "output_mechanism",
    "output_perturbation",
    "policy_cost",
    "pool_mechanism",
    "pool_plan",
    "relative_gap",
    "saa_base_stock",
]
