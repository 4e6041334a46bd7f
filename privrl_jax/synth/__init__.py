"""Synthesizers: RND curiosity, PrivORL-n (transitions), PrivORL-j (fragments), DP-Transformer."""

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
from privrl_jax.synth._dp_transformer import (
    StepTransformer,
    ar_fragment_nll,
    generate_ar_fragments,
    init_step_transformer,
    make_ar_dp_finetune,
    make_ar_pretrain_chunk,
)
from privrl_jax.synth._privorl_n import (
    DPFinetune,
    SynthState,
    ema_update,
    init_synth_state,
    pick_curious,
)
from privrl_jax.synth._privorl_n import make_dp_finetune as make_transition_dp_finetune
from privrl_jax.synth._privorl_n import make_pretrain_chunk as make_transition_pretrain_chunk
from privrl_jax.synth._privorl_j import (
    GeneratedFragments,
    generate_fragments,
    make_fragment_pretrain_chunk,
    make_trajectory_dp_finetune,
    pack_rows,
    sample_pool_rows,
    stitched_lengths,
    trajectory_dp_finetune,
    unpack_rows,
)

__all__ = [
    "DPFinetune",
    "GeneratedFragments",
    "MLP",
    "RNDConfig",
    "RNDState",
    "StepTransformer",
    "SynthState",
    "ar_fragment_nll",
    "curiosity_replace",
    "curiosity_score",
    "ema_update",
    "generate_ar_fragments",
    "generate_fragments",
    "init_rnd",
    "init_step_transformer",
    "init_synth_state",
    "make_ar_dp_finetune",
    "make_ar_pretrain_chunk",
    "make_fragment_pretrain_chunk",
    "make_trajectory_dp_finetune",
    "make_transition_dp_finetune",
    "make_transition_pretrain_chunk",
    "num_replaced",
    "pack_rows",
    "pick_curious",
    "rnd_update",
    "sample_candidates",
    "sample_pool_rows",
    "stitched_lengths",
    "trajectory_dp_finetune",
    "unpack_rows",
]
