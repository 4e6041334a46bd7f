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
from privrl_jax.synth._privorl_j import (
    GeneratedFragments,
    generate_fragments,
    make_fragment_pretrain_chunk,
    make_trajectory_dp_finetune,
    pack_rows,
    sample_pool_rows,
    stitched_lengths,
    unpack_rows,
)

__all__ = [
    "GeneratedFragments",
    "MLP",
    "RNDConfig",
    "RNDState",
    "curiosity_replace",
    "curiosity_score",
    "generate_fragments",
    "init_rnd",
    "make_fragment_pretrain_chunk",
    "make_trajectory_dp_finetune",
    "num_replaced",
    "pack_rows",
    "rnd_update",
    "sample_candidates",
    "sample_pool_rows",
    "stitched_lengths",
    "unpack_rows",
]
