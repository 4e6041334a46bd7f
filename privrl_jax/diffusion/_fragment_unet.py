"""PrivORL-j-U's denoiser: a 1-D temporal U-Net over fragments.

A baseline of PrivORL Sec. VIII-A. The paper's PrivORL-j-U "uses U-Net as the noise
prediction network instead of the transformer, and the other components, like fragment
synthesizing, are the same". Its architecture is not given; ours follows Diffuser's
temporal U-Net (Janner et al. 2022, https://arxiv.org/abs/2205.09991) in miniature: the
fragment is a length-H sequence with d channels; residual blocks of two 1-D convolutions
(kernel 5, GELU) with the conditioning vector (noise-level embedding + link embedding,
or a learned "no link" vector for first fragments) added after the first convolution;
two resolutions (average-pool down by 2, repeat up by 2, skip concatenation).

Same signature as :class:`FragmentTransformer`, so :class:`FragmentDenoiser`, the masked
loss, the sampler and the DP pipeline use it unchanged. Padding: padded steps are zeroed
on input and output, so a padded value never changes a real prediction and gets no
gradient. Requires H divisible by 2. Every op is per example, so per-unit gradients are
exact under ``vmap``.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from privrl_jax.diffusion._networks import RandomFourierFeatures


class _ResBlock1D(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x: jax.Array, cond: jax.Array) -> jax.Array:
        h = nn.Conv(self.channels, (5,), padding="SAME")(x)
        h = nn.gelu(h + nn.Dense(self.channels)(cond)[..., None, :])
        h = nn.Conv(self.channels, (5,), padding="SAME")(h)
        skip = x if x.shape[-1] == self.channels else nn.Conv(self.channels, (1,))(x)
        return nn.gelu(h + skip)


class FragmentUNet(nn.Module):
    """Temporal U-Net F_theta(x, c_noise, link, has_link, step_mask) over fragments.

    Attributes:
      transition_dim: d, the per-step width.
      horizon: H (even).
      channels: width of the first resolution (the second has twice as many).
      embed_dim: width of the conditioning vector.
      fourier_dim: random Fourier features of the noise level.
    """

    transition_dim: int
    horizon: int
    channels: int = 32
    embed_dim: int = 64
    fourier_dim: int = 16

    @nn.compact
    def __call__(self, x, c_noise, link, has_link, step_mask):
        h_len, d = self.horizon, self.transition_dim
        if h_len % 2:
            raise ValueError(f"FragmentUNet needs an even horizon; got {h_len}.")
        if x.shape[-1] != h_len * d:
            raise ValueError(
                f"x has last dim {x.shape[-1]}, expected horizon * transition_dim = "
                f"{h_len} * {d}."
            )
        batch_shape = x.shape[:-1]
        m = step_mask.astype(x.dtype)[..., None]
        seq = x.reshape(*batch_shape, h_len, d) * m
        e = self.embed_dim
        t = RandomFourierFeatures(self.fourier_dim)(c_noise)
        t = nn.Dense(e)(nn.silu(nn.Dense(e)(t)))
        lk = nn.Dense(e)(nn.gelu(nn.Dense(e)(link)))
        no_link = self.param("no_link", nn.initializers.normal(0.02), (e,))
        cond = nn.silu(t + jnp.where(has_link[..., None], lk, no_link))
        flat = seq.reshape((-1, h_len, d))  # nn.Conv wants one batch axis
        cflat = cond.reshape((-1, e))
        h1 = _ResBlock1D(self.channels)(flat, cflat)
        down = (h1[:, 0::2] + h1[:, 1::2]) / 2
        h2 = _ResBlock1D(2 * self.channels)(down, cflat)
        h2 = _ResBlock1D(2 * self.channels)(h2, cflat)
        up = jnp.repeat(h2, 2, axis=1)
        h3 = _ResBlock1D(self.channels)(jnp.concatenate([up, h1], axis=-1), cflat)
        out = nn.Conv(d, (1,))(h3).reshape(*batch_shape, h_len, d) * m
        return out.reshape(*batch_shape, h_len * d)
