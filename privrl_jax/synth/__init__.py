"""Synthesizers of offline-RL data, private and baseline.

RND curiosity, PrivORL-n (transitions), PrivORL-j (fragments), DP-Transformer, the
marginal-based baselines PGM / MST / AIM (through the optional ``mbi`` extra) and
PrivSyn (ours: DenseMarg selection and GUM synthesis), and PATE-GAN (data-independent
accounting of its votes).
"""

from privrl_jax.synth._curiosity import (
    curiosity_score,
    init_rnd,
    num_replaced,
)
from privrl_jax.synth._dp_transformer import (
    StepTransformer,
    generate_ar_fragments,
    init_step_transformer,
    make_ar_dp_finetune,
    make_ar_pretrain_chunk,
)
from privrl_jax.synth._finecur import init_finecur, make_finecur_rows
from privrl_jax.synth._fragment_codec import (
    fragment_items,
    public_fragment_rows,
    stitch_fragments,
)
from privrl_jax.synth._marginal import (
    PublicDiscretisation,
    default_transition_cliques,
    fit_aim,
    fit_mst,
    fit_pgm,
    require_mbi,
    table_transitions,
    transition_discretisation,
    transition_table,
)
from privrl_jax.synth._pategan import (
    VOTE_SENSITIVITY,
    GanNets,
    PateGanConfig,
    generate,
    init_pategan,
    make_nets,
    make_pategan_chunk,
    partition_ids,
    partition_rows,
    pretrain_gan,
    vote_mechanism,
)
from privrl_jax.synth._privorl_j import (
    generate_fragments,
    make_fragment_pretrain_chunk,
    make_trajectory_dp_finetune,
    sample_pool_rows,
)
from privrl_jax.synth._privorl_n import (
    SynthState,
    init_synth_state,
)
from privrl_jax.synth._privorl_n import make_dp_finetune as make_transition_dp_finetune
from privrl_jax.synth._privorl_n import (
    make_pretrain_chunk as make_transition_pretrain_chunk,
)
from privrl_jax.synth._privsyn import (
    fit_privsyn,
)

__all__ = [
    "VOTE_SENSITIVITY",
    "GanNets",
    "PateGanConfig",
    "PublicDiscretisation",
    "StepTransformer",
    "SynthState",
    "curiosity_score",
    "default_transition_cliques",
    "fit_aim",
    "fit_mst",
    "fit_pgm",
    "fit_privsyn",
    "fragment_items",
    "generate",
    "generate_ar_fragments",
    "generate_fragments",
    "init_finecur",
    "init_pategan",
    "init_rnd",
    "init_step_transformer",
    "init_synth_state",
    "make_ar_dp_finetune",
    "make_ar_pretrain_chunk",
    "make_finecur_rows",
    "make_fragment_pretrain_chunk",
    "make_nets",
    "make_pategan_chunk",
    "make_trajectory_dp_finetune",
    "make_transition_dp_finetune",
    "make_transition_pretrain_chunk",
    "num_replaced",
    "partition_ids",
    "partition_rows",
    "pretrain_gan",
    "public_fragment_rows",
    "require_mbi",
    "sample_pool_rows",
    "stitch_fragments",
    "table_transitions",
    "transition_discretisation",
    "transition_table",
    "vote_mechanism",
]
