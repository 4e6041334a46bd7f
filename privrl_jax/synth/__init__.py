"""Synthesizers: RND curiosity, PrivORL-n (transitions), PrivORL-j (fragments)."""

from privrl_jax.synth._curiosity import (
    MLP,
    RNDConfig,
    RNDState,
    curiosity_replace,
    curiosity_score,
    init_rnd,
    num_replaced,
    rnd_update,
    sample_candidates,
)

__all__ = [
    "MLP",
    "RNDConfig",
    "RNDState",
    "curiosity_replace",
    "curiosity_score",
    "init_rnd",
    "num_replaced",
    "rnd_update",
    "sample_candidates",
]
