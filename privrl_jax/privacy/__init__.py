"""The DP core: per-unit clipping, noise once, sampling, accounting and the ledger.

What runs where: clipping and noise are JAX (jit/vmap/shard_map); sampling of indices, accounting
and the ledger are host-side NumPy / dp-accounting.
"""

from privrl_jax.privacy._accounting import (
    DP_ACCOUNTING_VERSION,
    PLD_DISCRETIZATION,
    EpsilonReport,
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
    data_parallel,
    dp_aggregator,
    dpsgd,
    make_dp_step,
)
from privrl_jax.privacy._clipping import (
    ClipMetrics,
    ClippedGradFn,
    Neighboring,
    clip_unit_grads,
    clipped_grad,
)
from privrl_jax.privacy._ledger import (
    LEDGER_FILE,
    BudgetExceededError,
    Ledger,
    LedgerError,
    event_from_dict,
    event_to_dict,
)
from privrl_jax.privacy._sampling import IndexBatch, PoissonSampler, UniformOneSampler
from privrl_jax.privacy._ghost import ghost_clipped_grad_sum, ghost_coverage

__all__ = [
    "DP_ACCOUNTING_VERSION",
    "LEDGER_FILE",
    "PLD_DISCRETIZATION",
    "AddNoiseState",
    "BudgetExceededError",
    "ClipMetrics",
    "ClippedGradFn",
    "DPStep",
    "DPTrainState",
    "EpsilonReport",
    "IndexBatch",
    "Ledger",
    "LedgerError",
    "Neighboring",
    "PoissonSampler",
    "Sampling",
    "UniformOneSampler",
    "add_gaussian_noise",
    "calibrate_noise_multiplier",
    "clip_unit_grads",
    "clipped_grad",
    "compute_epsilon",
    "data_parallel",
    "dp_aggregator",
    "dpsgd",
    "dpsgd_epsilon",
    "dpsgd_event",
    "event_from_dict",
    "event_to_dict",
    "make_dp_step",
    "validate_delta",
    "zcdp_noise_std",
    "zcdp_to_epsilon",
    "ghost_clipped_grad_sum",
    "ghost_coverage",
]
