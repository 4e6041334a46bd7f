"""The package's one feature normaliser: `(x - shift) / scale` per feature.

Used by the agents (state normalisation, as CORL's `normalize_states`) and by the
diffusion synthesizer (encoded transitions; `diffusion.fit_normaliser_on_public` is a
thin wrapper). Privacy: fit only on data whose statistics may be used in the clear
(public data, or a DP release); see docs/design.md, contract 5.

Near-constant features. The scale is the std *floored* at `min_scale`,
`max(std, min_scale)`, not CORL's `std + eps`:

- wherever std >= min_scale the normalised data has exactly unit std, whereas an
  additive eps shrinks every feature by std / (std + eps) (to 1/2 at std = eps);
- on a (near-)constant feature both rules give a scale of about `min_scale`, so
  `x - shift` is never divided by ~0: a point off the fitted value by d lands at
  d / min_scale at most (1e3 d with the default), not at inf or NaN;
- it was already the rule of the synthesizer's normaliser, so PrivORL-n's numbers
  do not move. The agents' scales move by at most `min_scale` (1e-3) per feature.

Statistics are computed in float64 on the host (a float32 sum over ~1e6 rows loses
digits) and stored as float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

DEFAULT_MIN_SCALE = 1e-3


@struct.dataclass
class Normalizer:
    """Affine normaliser `(x - shift) / scale`, per feature; a jittable pytree.

    Attributes:
      shift: [d] float32 (the mean when fitted, the centre when built from bounds).
      scale: [d] float32, > 0 (the floored std when fitted, the half-width from bounds).
    """

    shift: jax.Array
    scale: jax.Array

    def normalize(self, x: jax.typing.ArrayLike) -> jax.Array:
        """[..., d] -> [..., d], `(x - shift) / scale`."""
        return (jnp.asarray(x) - self.shift) / self.scale

    def denormalize(self, x: jax.typing.ArrayLike) -> jax.Array:
        """Inverse of `normalize`: `x * scale + shift`."""
        return jnp.asarray(x) * self.scale + self.shift

    @classmethod
    def identity(cls, dim: int) -> Normalizer:
        """A normaliser of `dim` features that leaves them unchanged."""
        return cls(jnp.zeros((dim,), jnp.float32), jnp.ones((dim,), jnp.float32))


def fit_normalizer(
    x: jax.typing.ArrayLike,
    *,
    mask: jax.typing.ArrayLike | None = None,
    min_scale: float = DEFAULT_MIN_SCALE,
    identity_mask: jax.typing.ArrayLike | None = None,
) -> Normalizer:
    """Fits shift = mean and scale = max(std, min_scale) per feature.

    Statistics run over all leading axes, weighted by `mask` when given (population
    std, ddof 0). See the module docstring for why the std is floored.

    Args:
      x: [..., d] finite features (e.g. observations [N, obs_dim]).
      mask: optional [...] non-negative row weights (e.g. `Trajectories.mask`);
        rows of weight 0 (padding) are ignored, whatever their values.
      min_scale: floor on the scale, > 0.
      identity_mask: optional bool [d]; True features are left unchanged (shift 0,
        scale 1), e.g. one-hot coordinates.

    Returns:
      `Normalizer` with [d] float32 shift and scale.

    Raises:
      ValueError: non-positive min_scale, rank < 1, mask or identity_mask shape,
        negative weights, no (unmasked) rows, or non-finite unmasked values.

    >>> n = fit_normalizer(np.array([[0.0, 5.0], [2.0, 5.0]]))
    >>> n.shift.tolist(), n.scale.tolist()
    ([1.0, 5.0], [1.0, 0.0010000000474974513])
    """
    if not min_scale > 0:
        raise ValueError(f"min_scale must be > 0, got {min_scale}")
    x = np.asarray(x, np.float64)
    if x.ndim < 1:
        raise ValueError(f"x must have a feature axis, got shape {x.shape}")
    flat = x.reshape(-1, x.shape[-1])
    if mask is None:
        if flat.shape[0] == 0:
            raise ValueError("x has no (unmasked) rows to fit a normaliser on")
        if not np.all(np.isfinite(flat)):
            raise ValueError("x contains NaN or inf values.")
        # numpy's own mean/std: the exact values the synthesizer's normaliser had.
        shift, std = flat.mean(0), flat.std(0)
    else:
        w = np.asarray(mask, np.float64)
        if w.shape != x.shape[:-1]:
            raise ValueError(
                f"mask shape {w.shape} must equal x.shape[:-1] {x.shape[:-1]}"
            )
        w = w.reshape(-1)
        if np.any(w < 0):
            raise ValueError("mask weights must be >= 0")
        keep = w > 0
        flat, w = flat[keep], w[keep]
        total = w.sum()
        if not total > 0:
            raise ValueError("x has no (unmasked) rows to fit a normaliser on")
        if not np.all(np.isfinite(flat)):
            raise ValueError("x contains NaN or inf values in unmasked rows.")
        shift = (w[:, None] * flat).sum(0) / total
        std = np.sqrt((w[:, None] * (flat - shift) ** 2).sum(0) / total)
    scale = np.maximum(std, min_scale)
    if identity_mask is not None:
        ident = np.asarray(identity_mask, bool)
        if ident.shape != shift.shape:
            raise ValueError(
                f"identity_mask has shape {ident.shape}, expected {shift.shape}."
            )
        shift = np.where(ident, 0.0, shift)
        scale = np.where(ident, 1.0, scale)
    return Normalizer(jnp.asarray(shift, jnp.float32), jnp.asarray(scale, jnp.float32))


def normalizer_from_bounds(
    low: jax.typing.ArrayLike, high: jax.typing.ArrayLike
) -> Normalizer:
    """Maps declared bounds [low, high] per feature affinely onto [-1, 1].

    Needs no data, so it is private by construction when the bounds are public.

    Args:
      low: [d] lower bounds.
      high: [d] upper bounds, each > its low.

    Returns:
      `Normalizer` with shift (low + high) / 2 and scale (high - low) / 2.

    Raises:
      ValueError: if shapes differ, are not vectors, or any high <= low.
    """
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if low.shape != high.shape or low.ndim != 1:
        raise ValueError(
            f"low and high must be equal-shape vectors, got {low.shape}, {high.shape}."
        )
    if not np.all(high > low):
        raise ValueError(
            f"need high > low in every dimension; got low={low}, high={high}."
        )
    return Normalizer(
        jnp.asarray((low + high) / 2, jnp.float32),
        jnp.asarray((high - low) / 2, jnp.float32),
    )
