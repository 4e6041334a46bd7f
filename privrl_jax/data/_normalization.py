"""Feature normalisation (mean/std), as CORL's `compute_mean_std` / `normalize_states`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Normalizer:
    """Affine normaliser `(x - mean) / std`.

    Attributes:
      mean: [d] float32.
      std: [d] float32, > 0.
    """

    mean: jax.Array
    std: jax.Array

    def normalize(self, x: jax.typing.ArrayLike) -> jax.Array:
        """[..., d] -> [..., d] standardised."""
        return (jnp.asarray(x) - self.mean) / self.std

    def denormalize(self, x: jax.typing.ArrayLike) -> jax.Array:
        """Inverse of `normalize`."""
        return jnp.asarray(x) * self.std + self.mean


def fit_normalizer(
    x: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
    eps: float = 1e-3,
) -> Normalizer:
    """Fits mean and std per feature over all leading axes.

    The std gets `eps` added (CORL's `compute_mean_std`, eps=1e-3), so constant features
    do not divide by zero. Privacy: fit only on data whose statistics may be used in the
    clear (public data, or a DP release); see DESIGN.md contract 5.

    Args:
      x: [..., d] features (e.g. observations [N, obs_dim]).
      mask: optional [...] weights (e.g. `Trajectories.mask`); padding gets 0.
      eps: added to the std, > 0.

    Returns:
      `Normalizer` with [d] mean and std.

    Raises:
      ValueError: non-positive eps, rank < 1, empty or fully masked data, mask shape.

    >>> n = fit_normalizer(jnp.array([[0.0], [2.0]]), eps=1e-6)
    >>> float(n.mean[0]), round(float(n.std[0]), 4)
    (1.0, 1.0)
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    x = jnp.asarray(x, jnp.float32)
    if x.ndim < 1:
        raise ValueError(f"x must have a feature axis, got shape {x.shape}")
    flat = x.reshape(-1, x.shape[-1])
    if mask is None:
        w = jnp.ones(flat.shape[0], jnp.float32)
    else:
        mask = jnp.asarray(mask, jnp.float32)
        if mask.shape != x.shape[:-1]:
            raise ValueError(
                f"mask shape {mask.shape} must equal x.shape[:-1] {x.shape[:-1]}"
            )
        w = mask.reshape(-1)
    total = float(w.sum())
    if total <= 0:
        raise ValueError("x has no (unmasked) rows to fit a normaliser on")
    mean = (w[:, None] * flat).sum(0) / total
    var = (w[:, None] * (flat - mean) ** 2).sum(0) / total
    return Normalizer(mean=mean, std=jnp.sqrt(var) + eps)
