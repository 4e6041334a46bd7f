"""Conditional diffusion transformer for trajectory fragments (PrivORL-j).

PrivORL Sec. VI-B and Appendix F-A: a GPT2-like transformer (6 layers, 4 heads at
paper scale, after MTDiff, He et al. 2023, https://arxiv.org/abs/2305.18459) whose
input is a token sequence of length 5H + 6: one token per component (s, a, r, s', d)
of each of the H transitions of the noisy fragment, five tokens for the link
transition it is conditioned on, and one for the noise level. Components are
embedded by per-component linear maps (the paper's "MLPs"), a learned position
embedding is added, and per-component linear heads decode the fragment tokens back
to the fragment's shape.

Choices the paper leaves open, and ours: GPT-2 blocks (pre-LayerNorm, GELU MLP of
4x width) with full, non-causal attention, since a denoiser predicts the whole
fragment jointly; embedding width 128; no dropout. Every op acts within one
example (LayerNorm, attention over that example's tokens), so per-example
gradients are exact under ``jax.vmap``, as DP-SGD needs.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from privrl_jax.diffusion._networks import RandomFourierFeatures


class TransformerBlock(nn.Module):
    """Pre-LN GPT-2 block: x + MHA(LN(x)); x + MLP(LN(x)), without a causal mask."""

    num_heads: int
    mlp_ratio: int = 4

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        width = x.shape[-1]
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(h, h)
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.mlp_ratio * width)(h)
        return x + nn.Dense(width)(nn.gelu(h))


class DiffusionTransformer(nn.Module):
    """Denoiser network F_theta for fragments of H transitions, conditioned on a link.

    Works on flat vectors so that `EDMDenoiser`, `edm_loss` and `edm_sample` use it
    unchanged: a fragment is [H * transition_dim] with each transition laid out as
    its components in order (sizes ``component_sizes``, e.g. (obs, act, 1, obs, 1)).

    Attributes:
      component_sizes: sizes of the per-transition components (5 for s, a, r, s', d;
        one-hot blocks simply make a component wider).
      horizon: H, transitions per fragment.
      num_layers: transformer blocks (6 at paper scale).
      num_heads: attention heads (4 at paper scale).
      embed_dim: token width (divisible by ``num_heads``).
      fourier_dim: random Fourier features of the noise level.
      fourier_seed: seed of the fixed Fourier frequencies.
    """

    component_sizes: tuple[int, ...]
    horizon: int
    num_layers: int = 2
    num_heads: int = 4
    embed_dim: int = 128
    fourier_dim: int = 16
    fourier_seed: int = 0

    @property
    def transition_dim(self) -> int:
        return sum(self.component_sizes)

    def _tokens(self, x: jax.Array, embeds) -> jax.Array:
        """[..., n, transition_dim] -> [..., n * num_components, embed_dim]."""
        parts, start = [], 0
        for size, embed in zip(self.component_sizes, embeds):
            parts.append(embed(x[..., start : start + size]))
            start += size
        tokens = jnp.stack(parts, axis=-2)  # [..., n, C, E]
        return tokens.reshape(*tokens.shape[:-3], -1, self.embed_dim)

    @nn.compact
    def __call__(
        self, x: jax.Array, c_noise: jax.Array, cond: jax.Array | None = None
    ) -> jax.Array:
        """Applies the network.

        Args:
          x: preconditioned noisy fragment, [..., horizon * transition_dim].
          c_noise: noise-level input, [...].
          cond: link transition, [..., transition_dim]; None (or zeros) for the
            first fragment of a trajectory.

        Returns:
          [..., horizon * transition_dim].
        """
        h_len, t_dim = self.horizon, self.transition_dim
        if x.shape[-1] != h_len * t_dim:
            raise ValueError(
                f"x has last dim {x.shape[-1]}, expected horizon * transition_dim = "
                f"{h_len} * {t_dim}."
            )
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim={self.embed_dim} must be divisible by num_heads="
                f"{self.num_heads}."
            )
        batch_shape = x.shape[:-1]
        if cond is None:
            cond = jnp.zeros(batch_shape + (t_dim,), x.dtype)
        if cond.shape[-1] != t_dim:
            raise ValueError(f"cond has last dim {cond.shape[-1]}, expected {t_dim}.")
        embeds = [
            nn.Dense(self.embed_dim, name=f"embed_{i}")
            for i in range(len(self.component_sizes))
        ]
        frag_tokens = self._tokens(x.reshape(*batch_shape, h_len, t_dim), embeds)
        # The link transition shares the component embeddings; a learned segment
        # vector tells it apart from the fragment's own transitions.
        cond_tokens = self._tokens(cond[..., None, :], embeds)
        cond_tokens = cond_tokens + self.param(
            "cond_segment", nn.initializers.normal(0.02), (self.embed_dim,)
        )
        t = RandomFourierFeatures(self.fourier_dim, self.fourier_seed)(c_noise)
        t = nn.Dense(self.embed_dim)(nn.silu(nn.Dense(self.embed_dim)(t)))
        seq = jnp.concatenate([t[..., None, :], cond_tokens, frag_tokens], axis=-2)
        seq = seq + self.param(
            "pos_embed", nn.initializers.normal(0.02), seq.shape[-2:]
        )
        for _ in range(self.num_layers):
            seq = TransformerBlock(self.num_heads)(seq)
        seq = nn.LayerNorm()(seq)
        num_c = len(self.component_sizes)
        out_tokens = seq[..., 1 + num_c :, :].reshape(*batch_shape, h_len, num_c, -1)
        outs = [
            nn.Dense(size, name=f"head_{i}")(out_tokens[..., i, :])
            for i, size in enumerate(self.component_sizes)
        ]
        return jnp.concatenate(outs, axis=-1).reshape(*batch_shape, h_len * t_dim)
