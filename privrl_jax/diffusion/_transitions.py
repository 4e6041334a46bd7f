"""Transitions <-> flat vectors for the synthesizer, and fitting the data normaliser.

A transition (s, a, r, s', done) is flattened in that order; each declared discrete
dimension is replaced in place by its one-hot block before training and mapped back
by argmax after sampling (PrivORL Sec. VI-D, after SynthER). The normaliser is fitted
on PUBLIC data or built from declared bounds, never on the sensitive data
(docs/design.md, contract 5): fitting on the sensitive set would release its
statistics outside the DP mechanism.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import chex
import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax.data import (
    DEFAULT_MIN_SCALE,
    Normalizer,
    Transitions,
    fit_normalizer,
    normalizer_from_bounds,
)

Field = Literal["observations", "actions", "rewards", "terminals"]
_FIELDS = ("observations", "actions", "rewards", "terminals")


@dataclasses.dataclass(frozen=True)
class DiscreteDim:
    """A discrete dimension with values in {0, ..., num_classes - 1}.

    Attributes:
      field: "observations" (applies to both s and s'), "actions", "rewards" or
        "terminals".
      index: position within the field (0 for rewards and terminals).
      num_classes: number of values, >= 2.
    """

    field: Field
    index: int
    num_classes: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransitionLayout:
    """Static description of the flat layout of a transition.

    The raw flat vector is [s (obs_dim), a (act_dim), r (1), s' (obs_dim), done (1)];
    the encoded vector replaces every discrete dimension by a one-hot block in place.

    Attributes:
      obs_dim: state dimension.
      act_dim: action dimension.
      discrete: the discrete dimensions.
      one_hot_terminals: encode ``done`` as a 2-class one-hot (decoded by argmax,
        equivalent to SynthER's threshold at 0.5) instead of a continuous dim.
      next_obs_delta: model s' - s instead of s' in the continuous observation
        dims (discrete ones stay absolute). An invertible, data-independent change
        of variables, so privacy-neutral; the paper (like SynthER) models s'. A
        dynamics model's usual target (e.g. MOPO/MBPO predict s' - s): the
        synthesizer then learns the small step s' - s directly instead of having
        to reproduce s inside s' to the precision of one step.
    """

    obs_dim: int
    act_dim: int
    discrete: tuple[DiscreteDim, ...] = ()
    one_hot_terminals: bool = True
    next_obs_delta: bool = False

    def __post_init__(self):
        for name in ("obs_dim", "act_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"TransitionLayout.{name} must be an int >= 0, got {value!r}."
                )
        sizes = {
            "observations": self.obs_dim,
            "actions": self.act_dim,
            "rewards": 1,
            "terminals": 1,
        }
        seen = set()
        for dim in self.discrete:
            if dim.field not in sizes:
                raise ValueError(
                    f"DiscreteDim.field must be one of {_FIELDS}, got {dim.field!r}."
                )
            if not 0 <= dim.index < sizes[dim.field]:
                raise ValueError(
                    f"DiscreteDim.index={dim.index} out of range for {dim.field} "
                    f"of size "
                    f"{sizes[dim.field]}."
                )
            if dim.num_classes < 2:
                raise ValueError(
                    f"DiscreteDim.num_classes must be >= 2, got {dim.num_classes}."
                )
            if (dim.field, dim.index) in seen:
                raise ValueError(
                    f"Discrete dimension {dim.field}[{dim.index}] declared twice."
                )
            if dim.field == "terminals" and self.one_hot_terminals:
                raise ValueError(
                    "terminals are already one-hot encoded (one_hot_terminals=True); "
                    "do not declare them in `discrete`."
                )
            seen.add((dim.field, dim.index))

    @property
    def raw_dim(self) -> int:
        """Size of the raw flat vector, 2 obs_dim + act_dim + 2."""
        return 2 * self.obs_dim + self.act_dim + 2

    def _raw_classes(self) -> list[int]:
        """Number of classes of each raw dim (1 = continuous)."""
        classes = {("observations", i): 1 for i in range(self.obs_dim)}
        classes.update({("actions", i): 1 for i in range(self.act_dim)})
        classes[("rewards", 0)] = 1
        classes[("terminals", 0)] = 2 if self.one_hot_terminals else 1
        for dim in self.discrete:
            classes[(dim.field, dim.index)] = dim.num_classes
        obs = [classes[("observations", i)] for i in range(self.obs_dim)]
        act = [classes[("actions", i)] for i in range(self.act_dim)]
        return obs + act + [classes[("rewards", 0)]] + obs + [classes[("terminals", 0)]]

    @property
    def encoded_dim(self) -> int:
        """Size of the encoded (one-hot) vector that the synthesizer models."""
        return sum(self._raw_classes())

    def continuous_obs(self) -> np.ndarray:
        """Boolean [obs_dim]: True on continuous observation dims."""
        discrete = {d.index for d in self.discrete if d.field == "observations"}
        return np.array([i not in discrete for i in range(self.obs_dim)], bool)

    def one_hot_mask(self) -> np.ndarray:
        """Boolean [encoded_dim]: True on one-hot coordinates (left unnormalised)."""
        return np.concatenate([np.full(k, k > 1) for k in self._raw_classes()]).astype(
            bool
        )


def _segments(layout: TransitionLayout):
    """(continuous raw idx, their encoded positions, [(raw idx, start, K)] discrete)."""
    cont_raw, cont_pos, disc = [], [], []
    pos = 0
    for j, k in enumerate(layout._raw_classes()):
        if k == 1:
            cont_raw.append(j)
            cont_pos.append(pos)
        else:
            disc.append((j, pos, k))
        pos += k
    return np.array(cont_raw, int), np.array(cont_pos, int), disc


def encode_flat(raw: jax.Array, layout: TransitionLayout) -> jax.Array:
    """One-hot encodes the discrete dims of raw flat transitions.

    Args:
      raw: [..., raw_dim]; discrete dims hold integers 0..K-1 (rounded, then clipped).
      layout: the layout.

    Returns:
      [..., encoded_dim].
    """
    chex.assert_axis_dimension(raw, -1, layout.raw_dim)
    cont_raw, cont_pos, disc = _segments(layout)
    out = jnp.zeros(raw.shape[:-1] + (layout.encoded_dim,), raw.dtype)
    out = out.at[..., cont_pos].set(raw[..., cont_raw])
    for j, start, k in disc:
        label = jnp.clip(jnp.round(raw[..., j]), 0, k - 1).astype(jnp.int32)
        out = out.at[..., start : start + k].set(
            jax.nn.one_hot(label, k, dtype=raw.dtype)
        )
    return out


def decode_flat(encoded: jax.Array, layout: TransitionLayout) -> jax.Array:
    """Inverse of `encode_flat`: one-hot blocks back to class indices by argmax.

    Args:
      encoded: [..., encoded_dim] (e.g. synthesizer samples, denormalised).
      layout: the layout.

    Returns:
      [..., raw_dim], discrete dims as float class indices.
    """
    chex.assert_axis_dimension(encoded, -1, layout.encoded_dim)
    cont_raw, cont_pos, disc = _segments(layout)
    out = jnp.zeros(encoded.shape[:-1] + (layout.raw_dim,), encoded.dtype)
    out = out.at[..., cont_raw].set(encoded[..., cont_pos])
    for j, start, k in disc:
        label = jnp.argmax(encoded[..., start : start + k], axis=-1)
        out = out.at[..., j].set(label.astype(encoded.dtype))
    return out


def flatten_transitions(
    transitions: Transitions, layout: TransitionLayout
) -> jax.Array:
    """Encodes transitions as the flat vectors the synthesizer models.

    Timeouts are dropped; with ``layout.next_obs_delta`` the continuous dims of s'
    become s' - s.

    Args:
      transitions: [N] rows (any leading batch shape works).
      layout: the flat layout; its ``obs_dim`` and ``act_dim`` must match the data.

    Returns:
      [N, encoded_dim] flat vectors [s, a, r, s', done], discrete dims one-hot.

    Raises:
      ValueError: if the observation or action sizes disagree with ``layout``.
    """
    obs, act = transitions.observations, transitions.actions
    if obs.shape[-1] != layout.obs_dim or act.shape[-1] != layout.act_dim:
        raise ValueError(
            f"transitions have obs_dim={obs.shape[-1]}, act_dim={act.shape[-1]}; "
            f"layout "
            f"expects obs_dim={layout.obs_dim}, act_dim={layout.act_dim}."
        )
    next_obs = transitions.next_observations
    if layout.next_obs_delta:
        next_obs = jnp.where(layout.continuous_obs(), next_obs - obs, next_obs)
    raw = jnp.concatenate(
        [
            obs,
            act,
            transitions.rewards[..., None],
            next_obs,
            transitions.terminals[..., None],
        ],
        axis=-1,
    )
    return encode_flat(raw, layout)


def unflatten_transitions(encoded: jax.Array, layout: TransitionLayout) -> Transitions:
    """Decodes flat vectors back to transitions; inverse of `flatten_transitions`.

    One-hot blocks become class indices by argmax. Terminals modelled as a
    continuous dim (``one_hot_terminals=False``) are thresholded at 0.5, as in
    SynthER.

    Args:
      encoded: [N, encoded_dim] vectors in data units (denormalised).
      layout: the layout they were encoded with.

    Returns:
      `Transitions` [N] with ``timeouts`` all 0.
    """
    raw = decode_flat(encoded, layout)
    o, a = layout.obs_dim, layout.act_dim
    terminals = raw[..., 2 * o + a + 1]
    if not layout.one_hot_terminals:
        terminals = (terminals > 0.5).astype(raw.dtype)
    next_obs = raw[..., o + a + 1 : 2 * o + a + 1]
    if layout.next_obs_delta:
        next_obs = jnp.where(layout.continuous_obs(), next_obs + raw[..., :o], next_obs)
    return Transitions(
        observations=raw[..., :o],
        actions=raw[..., o : o + a],
        rewards=raw[..., o + a],
        next_observations=next_obs,
        terminals=terminals,
        timeouts=jnp.zeros_like(terminals),
    )


# The package has one normaliser class, `data.Normalizer`; the British-spelt names
# below are this module's API from before, kept so callers need not change.
Normaliser = Normalizer
normaliser_from_bounds = normalizer_from_bounds


def fit_normaliser_on_public(
    public: jax.typing.ArrayLike,
    *,
    one_hot_mask: jax.typing.ArrayLike | None = None,
    min_scale: float = DEFAULT_MIN_SCALE,
) -> Normalizer:
    """Standardises each dimension with the mean and std of PUBLIC data.

    Only pass public (non-sensitive) data: the statistics are used without DP.
    One-hot coordinates (``one_hot_mask``) are left as {0, 1} (shift 0, scale 1),
    like SynthER's unnormalised terminals. The scale is the std floored at
    ``min_scale`` (`data.fit_normalizer`, whose docstring says why).

    Args:
      public: public encoded transitions, [N, d], N >= 2, finite.
      one_hot_mask: optional bool [d]; see `TransitionLayout.one_hot_mask`.
      min_scale: floor on the scale.

    Returns:
      A `Normalizer` (alias `Normaliser`).

    Raises:
      ValueError: on a wrong rank, fewer than 2 rows, non-finite values, or a
        one_hot_mask of the wrong shape.
    """
    public = np.asarray(public, np.float64)
    if public.ndim != 2 or public.shape[0] < 2:
        raise ValueError(f"public must have shape [N >= 2, d], got {public.shape}.")
    if not np.all(np.isfinite(public)):
        raise ValueError("public contains NaN or inf values.")
    if one_hot_mask is not None and np.shape(one_hot_mask) != public.shape[1:]:
        raise ValueError(
            f"one_hot_mask has shape {np.shape(one_hot_mask)}, "
            f"expected {public.shape[1:]}."
        )
    return fit_normalizer(public, min_scale=min_scale, identity_mask=one_hot_mask)


def normalise(normaliser: Normalizer, x: jax.typing.ArrayLike) -> jax.Array:
    """Maps data to normalised units: (x - shift) / scale.

    The same as `Normalizer.normalize`.

    Args:
      normaliser: the fitted normaliser of d dims.
      x: [..., d] values in data units.

    Returns:
      [..., d] normalised values.
    """
    return normaliser.normalize(x)


def denormalise(normaliser: Normalizer, x: jax.typing.ArrayLike) -> jax.Array:
    """Maps normalised values back to data units: x * scale + shift.

    The same as `Normalizer.denormalize`.

    Args:
      normaliser: the fitted normaliser of d dims.
      x: [..., d] normalised values.

    Returns:
      [..., d] values in data units.
    """
    return normaliser.denormalize(x)
