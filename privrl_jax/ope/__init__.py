"""Differentially private off-policy evaluation: GTD2 and GPOPE on the DP plan.

What runs where: the GTD2 maths, GPOPE's scan, the trials' vmap and the chain MDP are pure
jitted JAX; drawing the index schedule and the paper's Theorem-1 sigma are host-side.
"""

from privrl_jax.ope._chain import (
    ChainMDP,
    Collected,
    collect,
    exact_values,
    medical_chain,
    one_hot_features,
    treatment_policy,
)
from privrl_jax.ope._gpope import (
    GPOPEResult,
    IndexSchedule,
    StepSize,
    Theorem1Sigma,
    gpope,
    gpope_trials,
    gtd2,
    gtd2_expected,
    sample_schedule,
    theorem1_sigma,
    value_mse,
)
from privrl_jax.ope._gtd2 import (
    GTD2Stats,
    TrajectoryData,
    Transitions,
    dataset_stats,
    direction_from_stats,
    lstd_solution,
    trajectory_direction,
    trajectory_stats,
    transition_direction,
    transition_stats,
    weighted_transition_direction,
    item_weights,
    with_weights,
)

__all__ = [
    "ChainMDP",
    "Collected",
    "GPOPEResult",
    "GTD2Stats",
    "IndexSchedule",
    "StepSize",
    "Theorem1Sigma",
    "TrajectoryData",
    "Transitions",
    "collect",
    "dataset_stats",
    "direction_from_stats",
    "exact_values",
    "gpope",
    "gpope_trials",
    "gtd2",
    "gtd2_expected",
    "item_weights",
    "lstd_solution",
    "medical_chain",
    "one_hot_features",
    "sample_schedule",
    "theorem1_sigma",
    "trajectory_direction",
    "trajectory_stats",
    "transition_direction",
    "transition_stats",
    "treatment_policy",
    "value_mse",
    "weighted_transition_direction",
    "with_weights",
]
