"""The DP core: per-unit clipping, noise once, sampling, accounting and the ledger."""

from privrl_jax.privacy._clipping import (
    ClipMetrics,
    ClippedGradFn,
    Neighboring,
    clip_unit_grads,
    clipped_grad,
)

__all__ = [
    "ClipMetrics",
    "ClippedGradFn",
    "Neighboring",
    "clip_unit_grads",
    "clipped_grad",
]
