"""Differentially private off-policy evaluation.

GTD2 and GPOPE on the DP plan; DP-LSW / DP-LSL.

What runs where: the GTD2 maths, GPOPE's scan, the trials' vmap and the chain MDP are
pure jitted JAX; drawing the index schedule and the paper's Theorem-1 sigma are
host-side.
"""

from privrl_jax.ope._balle import (
    dp_lsl,
    dp_lsw,
    first_visits,
)
from privrl_jax.ope._chain import (
    ChainMDP,
    collect,
    exact_values,
    medical_chain,
    one_hot_features,
    treatment_policy,
)
from privrl_jax.ope._features import (
    EpsilonSoft,
    FeatureMap,
    GridDiscretiser,
    TileCoder,
    hiv_features,
    mountain_car_features,
)
from privrl_jax.ope._gpope import (
    GPOPEResult,
    GPOPEState,
    StepSize,
    gpope,
    gpope_init,
    gpope_method,
    gpope_trials,
    gpope_units,
    gtd2,
    replace_one_target,
    sample_schedule,
    theorem1_sigma,
    value_mse,
)
from privrl_jax.ope._gtd2 import (
    TrajectoryData,
    Transitions,
    dataset_stats,
    item_weights,
    lstd_solution,
)
from privrl_jax.ope._montecarlo import (
    MCValues,
    collect_offpolicy,
    evaluation_states,
    mc_values,
    pooled_stats,
)
from privrl_jax.ope._policy_value import (
    RBFFeatures,
    StateActionFeatures,
    gpope_policy_value,
    lstd_policy_value,
    policy_evaluation_data,
    start_features,
)

__all__ = [
    "ChainMDP",
    "EpsilonSoft",
    "FeatureMap",
    "GPOPEResult",
    "GPOPEState",
    "GridDiscretiser",
    "MCValues",
    "RBFFeatures",
    "StateActionFeatures",
    "StepSize",
    "TileCoder",
    "TrajectoryData",
    "Transitions",
    "collect",
    "collect_offpolicy",
    "dataset_stats",
    "dp_lsl",
    "dp_lsw",
    "evaluation_states",
    "exact_values",
    "first_visits",
    "gpope",
    "gpope_init",
    "gpope_method",
    "gpope_policy_value",
    "gpope_trials",
    "gpope_units",
    "gtd2",
    "hiv_features",
    "item_weights",
    "lstd_policy_value",
    "lstd_solution",
    "mc_values",
    "medical_chain",
    "mountain_car_features",
    "one_hot_features",
    "policy_evaluation_data",
    "pooled_stats",
    "replace_one_target",
    "sample_schedule",
    "start_features",
    "theorem1_sigma",
    "treatment_policy",
    "value_mse",
]
