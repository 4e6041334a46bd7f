"""EDM diffusion building blocks: preconditioning, loss, sampler, denoisers, layouts.

References: Karras et al. 2022 (EDM, https://arxiv.org/abs/2206.00364); Lu et al. 2023
(SynthER, https://arxiv.org/abs/2303.06614); Dockhorn et al. 2022 (DPDM noise
multiplicity, https://arxiv.org/abs/2210.09929).
"""

from privrl_jax.diffusion._edm import (
    ApplyFn,
    DenoiseFn,
    EDMConfig,
    EDMDenoiser,
    Preconditioning,
    edm_loss,
    edm_loss_at,
    edm_loss_weight,
    edm_preconditioning,
    edm_sample,
    karras_sigmas,
    sample_training_sigma,
)
from privrl_jax.diffusion._fragment_transformer import (
    ComponentMLP,
    FragmentDenoiser,
    FragmentTransformer,
    MaskedTransformerBlock,
    fragment_edm_loss,
    sample_fragments,
)
from privrl_jax.diffusion._fragment_unet import FragmentUNet
from privrl_jax.diffusion._networks import (
    RandomFourierFeatures,
    ResidualBlock,
    ResidualMLP,
)
from privrl_jax.diffusion._transformer import DiffusionTransformer, TransformerBlock
from privrl_jax.diffusion._transitions import (
    DiscreteDim,
    Normaliser,
    TransitionLayout,
    decode_flat,
    denormalise,
    encode_flat,
    fit_normaliser_on_public,
    flatten_transitions,
    normalise,
    normaliser_from_bounds,
    unflatten_transitions,
)

__all__ = [
    "ApplyFn",
    "ComponentMLP",
    "DenoiseFn",
    "DiffusionTransformer",
    "DiscreteDim",
    "EDMConfig",
    "EDMDenoiser",
    "FragmentDenoiser",
    "FragmentTransformer",
    "FragmentUNet",
    "MaskedTransformerBlock",
    "Normaliser",
    "Preconditioning",
    "RandomFourierFeatures",
    "ResidualBlock",
    "ResidualMLP",
    "TransformerBlock",
    "TransitionLayout",
    "decode_flat",
    "denormalise",
    "edm_loss",
    "edm_loss_at",
    "edm_loss_weight",
    "edm_preconditioning",
    "edm_sample",
    "encode_flat",
    "fit_normaliser_on_public",
    "flatten_transitions",
    "fragment_edm_loss",
    "karras_sigmas",
    "normalise",
    "normaliser_from_bounds",
    "sample_fragments",
    "sample_training_sigma",
    "unflatten_transitions",
]
