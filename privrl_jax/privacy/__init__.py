"""The DP core: per-unit clipping, noise once, sampling, accounting and the ledger.

What runs where: clipping and noise are JAX (jit/vmap/shard_map); sampling of indices, accounting
and the ledger are host-side NumPy / dp-accounting.
"""

from privrl_jax.privacy._accounting import (
    DP_ACCOUNTING_VERSION,
    PLD_DISCRETIZATION,
    EpsilonReport,
    Neighboring,
    Sampling,
    calibrate_noise_multiplier,
    compute_epsilon,
    dpsgd_epsilon,
    dpsgd_event,
    validate_delta,
    zcdp_noise_std,
    zcdp_to_epsilon,
)
from privrl_jax.privacy._aggregation import (
    AddNoiseState,
    DPStep,
    DPTrainState,
    add_gaussian_noise,
    add_noise,
    add_noise_blocks,
    data_parallel,
    dp_aggregator,
    dpsgd,
    make_dp_step,
    standard_normal,
)
from privrl_jax.privacy._audit import (
    AuditResult,
    GaussianDpEstimate,
    GradientCanaries,
    clopper_pearson_epsilon_lower_bound,
    density_scores,
    dirac_canaries,
    draw_inclusion,
    gaussian_dp_epsilon_estimate,
    gdp_epsilon,
    one_run_epsilon_lower_bound,
    out_of_distribution_canaries,
    random_direction_canaries,
)
from privrl_jax.privacy._clip_core import ClipMetrics, clip_unit_blocks, clip_unit_grads
from privrl_jax.privacy._clipping import ClippedGradFn, ClippedSumFn, clipped_grad, clipped_sum
from privrl_jax.privacy._distributed import DistributedConfig, Topology
from privrl_jax.privacy._distributed import initialize as initialize_distributed
from privrl_jax.privacy._ledger import (
    LEDGER_FILE,
    BudgetExceededError,
    Ledger,
    LedgerError,
    event_from_dict,
    event_to_dict,
)
from privrl_jax.privacy._ghost import ghost_clipped_grad_sum, ghost_coverage
from privrl_jax.privacy._plan import DPPlan, GaussianMechanism, effective_noise_multiplier
from privrl_jax.privacy._sampling import (
    FullBatchSampler,
    IndexBatch,
    PoissonSampler,
    UniformOneSampler,
    step_rng,
)
# The auditing namespace: ``from privrl_jax.privacy import audit``.
from privrl_jax.privacy import audit

__all__ = [
    "DP_ACCOUNTING_VERSION",
    "LEDGER_FILE",
    "PLD_DISCRETIZATION",
    "AddNoiseState",
    "BudgetExceededError",
    "ClipMetrics",
    "ClippedGradFn",
    "ClippedSumFn",
    "DPPlan",
    "DistributedConfig",
    "DPStep",
    "DPTrainState",
    "EpsilonReport",
    "FullBatchSampler",
    "GaussianMechanism",
    "IndexBatch",
    "Ledger",
    "LedgerError",
    "Neighboring",
    "PoissonSampler",
    "Sampling",
    "Topology",
    "UniformOneSampler",
    "add_gaussian_noise",
    "add_noise",
    "add_noise_blocks",
    "calibrate_noise_multiplier",
    "clip_unit_blocks",
    "clip_unit_grads",
    "clipped_grad",
    "clipped_sum",
    "compute_epsilon",
    "data_parallel",
    "dp_aggregator",
    "dpsgd",
    "dpsgd_epsilon",
    "dpsgd_event",
    "effective_noise_multiplier",
    "event_from_dict",
    "event_to_dict",
    "initialize_distributed",
    "make_dp_step",
    "standard_normal",
    "step_rng",
    "validate_delta",
    "zcdp_noise_std",
    "zcdp_to_epsilon",
    "ghost_clipped_grad_sum",
    "ghost_coverage",
    # empirical auditing; also as the namespace ``privrl_jax.privacy.audit``
    "audit",
    "AuditResult",
    "GaussianDpEstimate",
    "GradientCanaries",
    "clopper_pearson_epsilon_lower_bound",
    "density_scores",
    "dirac_canaries",
    "draw_inclusion",
    "gaussian_dp_epsilon_estimate",
    "gdp_epsilon",
    "one_run_epsilon_lower_bound",
    "out_of_distribution_canaries",
    "random_direction_canaries",
]
