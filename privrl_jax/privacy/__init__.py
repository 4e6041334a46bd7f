"""The DP core: per-unit clipping, noise once, sampling, accounting and the ledger."""

from privrl_jax.privacy._clipping import (
    ClipMetrics,
    ClippedGradFn,
    Neighboring,
    clip_unit_grads,
    clipped_grad,
)
from privrl_jax.privacy._ghost import ghost_clipped_grad_sum, ghost_coverage

__all__ = [
    "ClipMetrics",
    "ClippedGradFn",
    "Neighboring",
    "clip_unit_grads",
    "clipped_grad",
    "ghost_clipped_grad_sum",
    "ghost_coverage",
]
