"""EDM diffusion building blocks: preconditioning, loss, sampler, denoisers, layouts.

References: Karras et al. 2022 (EDM, https://arxiv.org/abs/2206.00364); Lu et al. 2023
(SynthER, https://arxiv.org/abs/2303.06614); Dockhorn et al. 2022 (DPDM noise
multiplicity, https://arxiv.org/abs/2210.09929).
"""

from privrl_jax.diffusion._edm import (
    DenoiseFn,
    EDMConfig,
    EDMDenoiser,
    edm_loss,
    edm_loss_at,
    edm_sample,
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
    ResidualMLP,
)
from privrl_jax.diffusion._transitions import (
    TransitionLayout,
    denormalise,
    fit_normaliser_on_public,
    flatten_transitions,
    normalise,
    unflatten_transitions,
)

__all__ = [
    "ComponentMLP",
    "DenoiseFn",
    "EDMConfig",
    "EDMDenoiser",
    "FragmentDenoiser",
    "FragmentTransformer",
    "FragmentUNet",
    "MaskedTransformerBlock",
    "ResidualMLP",
    "TransitionLayout",
    "denormalise",
    "edm_loss",
    "edm_loss_at",
    "edm_sample",
    "fit_normaliser_on_public",
    "flatten_transitions",
    "fragment_edm_loss",
    "normalise",
    "sample_fragments",
    "unflatten_transitions",
]
