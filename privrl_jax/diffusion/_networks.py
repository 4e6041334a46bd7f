"""Denoiser networks for EDM (flax linen).

Every layer acts on one example at a time (Dense and LayerNorm on the last axis,
no BatchNorm or other cross-example statistics), so per-example gradients, and
therefore DP-SGD's per-unit clipping, are exact under ``jax.vmap``.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp


class RandomFourierFeatures(nn.Module):
    """Embeds a scalar noise level with fixed random Fourier features.

    emb(c) = [c, sin(2 pi w c), cos(2 pi w c)], w ~ N(0, I_{dim/2}) (SynthER's
    ``RandomOrLearnedSinusoidalPosEmb`` with ``is_random=True``, after Crowson's
    v-diffusion), output size dim + 1.

    The frequencies are a constant drawn from ``seed``, not a parameter: a parameter
    would receive DP noise on every private step although it is meant to stay fixed.

    Attributes:
      dim: number of Fourier features (even); PrivORL uses 16 (Appendix F-A).
      seed: seed of the fixed frequencies (part of the architecture).
    """

    dim: int = 16
    seed: int = 0

    @nn.compact
    def __call__(self, c: jax.Array) -> jax.Array:
        """Maps ``c [...]`` to ``[..., dim + 1]``."""
        if self.dim % 2:
            raise ValueError(f"RandomFourierFeatures.dim must be even, got {self.dim}.")
        freqs = jax.random.normal(jax.random.key(self.seed), (self.dim // 2,))
        c = jnp.asarray(c)[..., None]
        angles = 2.0 * math.pi * c * freqs.astype(c.dtype)
        return jnp.concatenate([c, jnp.sin(angles), jnp.cos(angles)], axis=-1)


class ResidualBlock(nn.Module):
    """x + Dense(act(LN(x))): SynthER's residual block (pre-norm optional)."""

    width: int
    layer_norm: bool = False
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.LayerNorm()(x) if self.layer_norm else x
        return x + nn.Dense(self.width)(getattr(nn, self.activation)(h))


class ResidualMLP(nn.Module):
    """The residual-MLP denoiser network F_theta of SynthER / PrivORL-n.

    proj(x [, cond]) + time_mlp(fourier(c_noise)) -> Dense(width) -> depth residual
    blocks -> [LN] -> act -> Dense(d). Architecture of SynthER's
    ``ResidualMLPDenoiser`` (Lu et al. 2023, https://arxiv.org/abs/2303.06614),
    which PrivORL Appendix F-A uses with width 1024, depth 6, 16 Fourier features
    (about 6.6M parameters on a 130-dim input). ``layer_norm=False`` and
    ``dim_t=128`` are SynthER's released config values.

    Use it through `EDMDenoiser(ResidualMLP(...).apply)` with
    ``params = {"params": ...}``.

    Attributes:
      width: hidden width (1024 at paper scale).
      depth: number of residual blocks (6 at paper scale).
      dim_t: size of the input projection and of the noise-level embedding.
      fourier_dim: number of random Fourier features of the noise level.
      layer_norm: pre-norm LayerNorm in each block (per-example, DP-safe).
      activation: name of a ``flax.linen`` activation.
      fourier_seed: seed of the fixed Fourier frequencies.
    """

    width: int = 256
    depth: int = 2
    dim_t: int = 128
    fourier_dim: int = 16
    layer_norm: bool = False
    activation: str = "relu"
    fourier_seed: int = 0

    @nn.compact
    def __call__(
        self, x: jax.Array, c_noise: jax.Array, cond: jax.Array | None = None
    ) -> jax.Array:
        """Applies the network.

        Args:
          x: preconditioned input c_in * x_sigma, [..., d].
          c_noise: noise-level input, [...] (EDM: ln(sigma) / 4).
          cond: optional conditioning vector, [..., c], concatenated to ``x``.

        Returns:
          F_theta output, [..., d].
        """
        out_dim = x.shape[-1]
        act = getattr(nn, self.activation)
        if cond is not None:
            x = jnp.concatenate([x, cond], axis=-1)
        t = RandomFourierFeatures(self.fourier_dim, self.fourier_seed)(c_noise)
        t = nn.Dense(self.dim_t)(t)
        t = nn.Dense(self.dim_t)(nn.silu(t))
        h = nn.Dense(self.dim_t)(x) + t
        h = nn.Dense(self.width)(h)
        for _ in range(self.depth):
            h = ResidualBlock(self.width, self.layer_norm, self.activation)(h)
        if self.layer_norm:
            h = nn.LayerNorm()(h)
        return nn.Dense(out_dim)(act(h))
