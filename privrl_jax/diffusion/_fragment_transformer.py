"""PrivORL-j's conditional diffusion transformer over trajectory fragments.

The transformer takes padding masks. PrivORL Sec. VI-B and Appendix F-A (after MTDiff,
He et al. 2023, https://arxiv.org/abs/2305.18459): the input is a sequence of 5H + 6
tokens, one per component (s, a, r, s', d) of each of the H steps of the noisy fragment,
five for the link transition S the fragment is conditioned on, and one for the diffusion
noise level. Each component is embedded by its own two-layer MLP (the paper's "MLPs";
fragment steps and the link have separate MLPs), a learned position embedding is added,
GPT-2 blocks (pre-LayerNorm, GELU MLP of 4x width, 6 layers and 4 heads at paper scale)
mix the tokens, and per-component MLPs decode the fragment tokens back into the
fragment's shape.

Choices the paper leaves open, and ours:

* **Bidirectional attention** (``causal=False``, the default). A denoiser predicts the
  whole fragment jointly at one noise level; it is not an autoregressive model. The
  consistency a trajectory needs runs both ways (s'_t = s_{t+1}: step t's next state is
  pinned by step t+1), so step t should see the noisy step t+1. DiT (Peebles & Xie
  2023), Diffuser (Janner et al. 2022) and MTDiff denoise whole sequences with full
  attention. ``causal=True`` is available for ablations (each token then sees only the
  noise-level token, the link and earlier tokens).
* **Padding**: the last fragment of a trajectory is padded. Padded steps are removed as
  attention *keys* (every query still sees the noise-level and link tokens, so no row is
  empty), their outputs are set to zero, and the loss (:func:`fragment_edm_loss`) sums
  over real steps only. Hence a padded input never changes a real step's prediction and
  gets no gradient.
* **First fragments**: their link is absent (the paper zero-pads it); we replace its
  tokens by a learned "no link" vector so a zero link is not confused with a real
  transition whose normalised value is near zero.
* Width 128, no dropout. Every op acts within one example (LayerNorm, attention over
  that example's tokens), so per-unit gradients are exact under ``jax.vmap``, as DP-SGD
  needs.

EDM (Karras et al. 2022) preconditioning and loss weights are those of ``_edm.py``; the
conditional sampler below is EDM's Algorithm 2 with the same constants, the link and
mask threaded through (``edm_sample`` takes an unconditional denoiser).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

from privrl_jax.diffusion._edm import (
    EDMConfig,
    edm_loss_weight,
    edm_preconditioning,
    karras_sigmas,
    sample_training_sigma,
)
from privrl_jax.diffusion._networks import RandomFourierFeatures

Params = Any


class ComponentMLP(nn.Module):
    """Two-layer GELU MLP: one component of a step <-> one token."""

    hidden: int
    out: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(self.out)(nn.gelu(nn.Dense(self.hidden)(x)))


class MaskedTransformerBlock(nn.Module):
    """Pre-LN GPT-2 block with an attention mask.

    x <- x + MHA(LN(x), mask), then x <- x + MLP(LN(x)).
    """

    num_heads: int
    mlp_ratio: int = 4

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        width = x.shape[-1]
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(
            h, h, mask=mask
        )
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.mlp_ratio * width)(h)
        return x + nn.Dense(width)(nn.gelu(h))


class FragmentTransformer(nn.Module):
    """Noise-prediction network over fragments.

    F_theta(x, c_noise, link, has_link, step_mask); see the module docstring.

    Attributes:
      component_sizes: per-step component sizes, e.g. (obs, act, 1, obs, 1) for (s, a,
        r, s', d).
      horizon: H, steps per fragment.
      num_layers: transformer blocks (6 at paper scale).
      num_heads: attention heads (4 at paper scale).
      embed_dim: token width (divisible by ``num_heads``).
      fourier_dim: random Fourier features of the noise level.
      fourier_seed: seed of the fixed Fourier frequencies.
      causal: causal instead of bidirectional attention (see the module docstring).
    """

    component_sizes: tuple[int, ...]
    horizon: int
    num_layers: int = 2
    num_heads: int = 4
    embed_dim: int = 128
    fourier_dim: int = 16
    fourier_seed: int = 0
    causal: bool = False

    @property
    def transition_dim(self) -> int:
        return sum(self.component_sizes)

    @property
    def num_tokens(self) -> int:
        """Sequence length: components x (H + 1 link) + 1 noise-level token.

        That is 5H + 6 for (s, a, r, s', d).
        """
        return len(self.component_sizes) * (self.horizon + 1) + 1

    def _tokens(self, x: jax.Array, embeds) -> jax.Array:
        """[..., n, transition_dim] -> [..., n * num_components, embed_dim]."""
        parts, start = [], 0
        for size, embed in zip(self.component_sizes, embeds):
            parts.append(embed(x[..., start : start + size]))
            start += size
        tokens = jnp.stack(parts, axis=-2)
        return tokens.reshape(*tokens.shape[:-3], -1, self.embed_dim)

    @nn.compact
    def __call__(
        self,
        x: jax.Array,
        c_noise: jax.Array,
        link: jax.Array,
        has_link: jax.Array,
        step_mask: jax.Array,
    ) -> jax.Array:
        """Applies the network.

        Args:
          x: preconditioned noisy fragment, [..., H * transition_dim] (step-major).
          c_noise: noise-level input, [...].
          link: link transition, [..., transition_dim] (ignored where ``has_link`` is
            False).
          has_link: [...] bool, False for a trajectory's first fragment.
          step_mask: [..., H] bool, True on real steps.

        Returns:
          [..., H * transition_dim], exactly zero on padded steps.
        """
        h_len, t_dim, num_c = (
            self.horizon,
            self.transition_dim,
            len(self.component_sizes),
        )
        if x.shape[-1] != h_len * t_dim:
            raise ValueError(
                f"x has last dim {x.shape[-1]}, expected horizon * transition_dim = "
                f"{h_len} * {t_dim}."
            )
        if link.shape[-1] != t_dim:
            raise ValueError(f"link has last dim {link.shape[-1]}, expected {t_dim}.")
        if step_mask.shape[-1] != h_len:
            raise ValueError(
                f"step_mask has last dim {step_mask.shape[-1]}, expected horizon "
                f"{h_len}."
            )
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim={self.embed_dim} must be divisible by "
                f"num_heads={self.num_heads}."
            )
        batch_shape = x.shape[:-1]
        step_mask = step_mask.astype(bool)
        e = self.embed_dim
        frag_embeds = [ComponentMLP(e, e, name=f"embed_{i}") for i in range(num_c)]
        link_embeds = [ComponentMLP(e, e, name=f"link_embed_{i}") for i in range(num_c)]
        frag_tokens = self._tokens(x.reshape(*batch_shape, h_len, t_dim), frag_embeds)
        link_tokens = self._tokens(link[..., None, :], link_embeds)
        no_link = self.param("no_link", nn.initializers.normal(0.02), (num_c, e))
        link_tokens = jnp.where(has_link[..., None, None], link_tokens, no_link)
        t = RandomFourierFeatures(self.fourier_dim, self.fourier_seed)(c_noise)
        t = nn.Dense(e)(nn.silu(nn.Dense(e)(t)))
        seq = jnp.concatenate([t[..., None, :], link_tokens, frag_tokens], axis=-2)
        seq = seq + self.param(
            "pos_embed", nn.initializers.normal(0.02), (self.num_tokens, e)
        )
        # Key validity: noise-level and link tokens always; a step's tokens iff the step
        # is real.
        step_tokens = jnp.repeat(step_mask, num_c, axis=-1)
        valid = jnp.concatenate(
            [jnp.ones(batch_shape + (1 + num_c,), bool), step_tokens], axis=-1
        )
        attn = jnp.broadcast_to(
            valid[..., None, None, :],
            batch_shape + (1, self.num_tokens, self.num_tokens),
        )
        if self.causal:
            attn = attn & jnp.tril(jnp.ones((self.num_tokens, self.num_tokens), bool))
        for _ in range(self.num_layers):
            seq = MaskedTransformerBlock(self.num_heads)(seq, attn)
        seq = nn.LayerNorm()(seq)
        out_tokens = seq[..., 1 + num_c :, :].reshape(*batch_shape, h_len, num_c, e)
        outs = [
            ComponentMLP(e, size, name=f"head_{i}")(out_tokens[..., i, :])
            for i, size in enumerate(self.component_sizes)
        ]
        out = jnp.concatenate(outs, axis=-1) * step_mask[..., None]
        return out.reshape(*batch_shape, h_len * t_dim)


@dataclasses.dataclass(frozen=True)
class FragmentDenoiser:
    """EDM's preconditioned denoiser of fragments, conditioned on their links.

    D(x; sigma, link) = c_skip x + c_out F(c_in x, c_noise, link, has_link, step_mask):
    EDM's preconditioned denoiser (``EDMDenoiser``) with the conditioning threaded
    through. Frozen and hashable, so it can be a static argument of ``jax.jit``.

    Attributes:
      apply_fn: ``FragmentTransformer(...).apply`` (or any network with its signature).
      sigma_data: data standard deviation used in the preconditioning.
    """

    apply_fn: Callable[..., jax.Array]
    sigma_data: float = 1.0

    def __call__(
        self, params: Params, x: jax.Array, sigma, link, has_link, step_mask
    ) -> jax.Array:
        sigma = jnp.broadcast_to(jnp.asarray(sigma, x.dtype), x.shape[:-1])
        pre = edm_preconditioning(sigma, self.sigma_data)
        f_x = self.apply_fn(
            params, pre.c_in[..., None] * x, pre.c_noise, link, has_link, step_mask
        )
        chex.assert_equal_shape([f_x, x])
        return pre.c_skip[..., None] * x + pre.c_out[..., None] * f_x


def fragment_edm_loss(
    denoise_fn: FragmentDenoiser,
    params: Params,
    item: dict[str, jax.Array],
    key: jax.Array,
    *,
    config: EDMConfig = EDMConfig(),
) -> jax.Array:
    """EDM loss of ONE fragment, summed over its real steps only.

    The loss is lambda(sigma) sum_{real steps, dims} (D - x)^2 / (H d), at one
    sigma drawn from EDM's training distribution. The sum is divided by the public
    constant H d (not by the number of real steps, which would weight a 1-step
    fragment like a full one), so each real step of a trajectory weighs the same.
    Written for one fragment: the privacy core vmaps it over a trajectory's
    fragments (items) and sums them into the trajectory's loss, the trajectory
    being the privacy unit.

    Args:
      denoise_fn: the preconditioned denoiser.
      params: its parameters.
      item: one fragment in the normalised space: ``x`` [H d] (step-major),
        ``link`` [d], ``has_link`` [] bool and ``step_mask`` [H] bool (True on
        real steps).
      key: PRNG key of the noise level and the noise.
      config: EDM constants (``p_mean``, ``p_std``, ``sigma_data``).

    Returns:
      The scalar loss; 0 for a fragment with no real step.
    """
    x, step_mask = item["x"], item["step_mask"].astype(bool)
    chex.assert_rank(x, 1)
    horizon = step_mask.shape[-1]
    k_sigma, k_noise = jax.random.split(key)
    sigma = sample_training_sigma(
        k_sigma, (), p_mean=config.p_mean, p_std=config.p_std
    ).astype(x.dtype)
    noise = jax.random.normal(k_noise, x.shape, x.dtype)
    denoised = denoise_fn(
        params, x + sigma * noise, sigma, item["link"], item["has_link"], step_mask
    )
    dim_mask = jnp.repeat(step_mask, x.shape[-1] // horizon)
    err = jnp.where(dim_mask, (denoised - x) ** 2, 0.0)
    return edm_loss_weight(sigma, config.sigma_data) * jnp.sum(err) / x.shape[-1]


@functools.partial(
    jax.jit, static_argnames=("denoise_fn", "horizon", "num_steps", "config")
)
def sample_fragments(
    key: jax.Array,
    denoise_fn: FragmentDenoiser,
    params: Params,
    link: jax.Array,
    has_link: jax.Array,
    *,
    horizon: int,
    num_steps: int,
    config: EDMConfig = EDMConfig(),
) -> jax.Array:
    """EDM's stochastic Heun sampler (Algorithm 2) for full fragments given their links.

    Args:
      key: PRNG key.
      denoise_fn: a `FragmentDenoiser` (static).
      params: its parameters.
      link: [B, d] link transitions (normalised space).
      has_link: [B] bool.
      horizon: H (static).
      num_steps: sampling steps (static).
      config: EDM constants (static), as in ``edm_sample``.

    Returns:
      [B, H d] fragments in the normalised space.
    """
    b, d = link.shape
    step_mask = jnp.ones((b, horizon), bool)
    sigmas = karras_sigmas(
        num_steps,
        sigma_min=config.sigma_min,
        sigma_max=config.sigma_max,
        rho=config.rho,
    )
    gamma_max = min(config.s_churn / num_steps, math.sqrt(2.0) - 1.0)
    gammas = jnp.where(
        (sigmas[:-1] >= config.s_min) & (sigmas[:-1] <= config.s_max), gamma_max, 0.0
    )
    k_init, k_steps = jax.random.split(key)
    step_keys = jax.random.split(k_steps, num_steps)
    x = sigmas[0] * jax.random.normal(k_init, (b, horizon * d))

    def den(x, s):
        return denoise_fn(params, x, s, link, has_link, step_mask)

    def churn(x, sigma, gamma, k):
        eps = config.s_noise * jax.random.normal(k, x.shape)
        return x + sigma * jnp.sqrt(gamma * (2.0 + gamma)) * eps, sigma * (1.0 + gamma)

    def heun(x, inp):
        sigma, sigma_next, gamma, k = inp
        x_hat, s_hat = churn(x, sigma, gamma, k)
        dx = (x_hat - den(x_hat, s_hat)) / s_hat
        x_euler = x_hat + (sigma_next - s_hat) * dx
        dx_next = (x_euler - den(x_euler, sigma_next)) / sigma_next
        return x_hat + (sigma_next - s_hat) * 0.5 * (dx + dx_next), None

    x, _ = jax.lax.scan(
        heun, x, (sigmas[:-2], sigmas[1:-1], gammas[:-1], step_keys[:-1])
    )
    x_hat, s_hat = churn(x, sigmas[-2], gammas[-1], step_keys[-1])
    return den(x_hat, s_hat)
