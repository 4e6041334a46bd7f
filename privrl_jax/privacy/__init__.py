"""The DP core: per-unit clipping, noise once, sampling, accounting and the ledger.

What runs where: clipping and noise are JAX (jit/vmap/shard_map); sampling of indices,
accounting and the ledger are host-side NumPy / dp-accounting.
"""

# The auditing namespace: ``from privrl_jax.privacy import audit``.
from privrl_jax.privacy import audit
from privrl_jax.privacy._accounting import (
    Accountant,
    EpsilonReport,
    Neighboring,
    calibrate_noise_multiplier,
    compute_epsilon,
    validate_delta,
    zcdp_epsilon,
)
from privrl_jax.privacy._adaptive import AdaptiveClipping
from privrl_jax.privacy._aggregation import DPTrainState
from privrl_jax.privacy._checkpoints import Checkpoints
from privrl_jax.privacy._clipping import (
    ClippedSumFn,
)
from privrl_jax.privacy._discrete_gaussian import DiscreteGaussianNoise
from privrl_jax.privacy._distributed import (
    ENV_AUTO,
    ENV_COORDINATOR,
    ENV_NUM_PROCESSES,
    ENV_PROCESS_ID,
    DistributedConfig,
    Topology,
)
from privrl_jax.privacy._distributed import initialize as initialize_distributed
from privrl_jax.privacy._fit import (
    Callback,
    DivergenceError,
    DPMethod,
    DPSecret,
    FitResult,
    InMemoryRecorder,
    JsonLinesLogger,
    LoopStats,
    ProgressBar,
    Recorder,
    RunRecorder,
    fit,
    gradient_method,
)
from privrl_jax.privacy._ghost import (
    ghost_coverage,
)
from privrl_jax.privacy._ledger import (
    LEDGER_FILE,
    BudgetExceededError,
    Ledger,
    LedgerError,
    event_to_dict,
)
from privrl_jax.privacy._loggers import TensorBoardLogger, WandbLogger
from privrl_jax.privacy._plan import (
    DPPlan,
    ExponentialMechanism,
    GaussianMechanism,
    PlanArrays,
    PlanStructure,
)
from privrl_jax.privacy._sampling import (
    FullBatchSampler,
    PoissonSampler,
    UniformOneSampler,
)
from privrl_jax.privacy._secret import load_or_create_secret
from privrl_jax.privacy._selection import (
    Repetitions,
    SelectionResult,
    repeat_and_select_epsilon,
    select,
)

__all__ = [
    "ENV_AUTO",
    "ENV_COORDINATOR",
    "ENV_NUM_PROCESSES",
    "ENV_PROCESS_ID",
    "LEDGER_FILE",
    "Accountant",
    "AdaptiveClipping",
    "BudgetExceededError",
    "Callback",
    "Checkpoints",
    "ClippedSumFn",
    "DPMethod",
    "DPPlan",
    "DPSecret",
    "DPTrainState",
    "DiscreteGaussianNoise",
    "DistributedConfig",
    "DivergenceError",
    "EpsilonReport",
    "ExponentialMechanism",
    "FitResult",
    "FullBatchSampler",
    "GaussianMechanism",
    "InMemoryRecorder",
    "JsonLinesLogger",
    "Ledger",
    "LedgerError",
    "LoopStats",
    "Neighboring",
    "PlanArrays",
    "PlanStructure",
    "PoissonSampler",
    "ProgressBar",
    "Recorder",
    "Repetitions",
    "RunRecorder",
    "SelectionResult",
    "TensorBoardLogger",
    "Topology",
    "UniformOneSampler",
    "WandbLogger",
    "audit",
    "calibrate_noise_multiplier",
    "compute_epsilon",
    "event_to_dict",
    "fit",
    "ghost_coverage",
    "gradient_method",
    "initialize_distributed",
    "load_or_create_secret",
    "repeat_and_select_epsilon",
    "select",
    "validate_delta",
    "zcdp_epsilon",
]
