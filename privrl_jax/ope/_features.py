"""Tile-coding features and epsilon-soft policies for OPE on continuous envs.

Tile coding (Sutton & Barto 2018, Section 9.5.4). ``num_tilings`` grids of
``tiles_per_dim`` tiles along each input dimension, each grid shifted by a fraction of a
tile width. Tiling k is displaced by ``k * (1, 3, 5, ..., 2d - 1) / num_tilings`` tile
widths (the book's asymmetric offsets: uniform offsets along the diagonal make the tiles
of all tilings line up in diagonal stripes). A shifted grid needs one more tile per
dimension to cover the box, so a tiling has ``(tiles_per_dim + 1) ** d`` tiles; the
coder is dense (no hashing: the features are one-hot blocks of that size), which is
small for the 1-D and 2-D inputs used here. Inputs outside ``[low, high]`` are clipped
to the box. Every state activates exactly one tile per tiling.

Scale. The book's features are binary (step sizes divided by the number of tilings).
:class:`FeatureMap` concatenates tile coders (and an optional constant) and divides by
the square root of the number of active features, so ``||phi(s)||_2 = 1`` for every
state: one number bounds the size of every GTD2 transition direction, which is what a
clip norm h has to be chosen against (a linear reparametrisation, the value function
class is unchanged).

Everything is pure JAX; the coders are frozen dataclasses, hashable and usable as static
jit arguments.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from privrl_jax import envs


@dataclasses.dataclass(frozen=True)
class TileCoder:
    """Dense tile coding of the input components ``dims`` over the box [low, high].

    Attributes:
      low, high: per selected dimension, the box the tilings cover.
      tiles_per_dim: tiles per dimension of one (unshifted) tiling.
      num_tilings: number of offset tilings (the book suggests a power of 2 >= 4 d).
      dims: indices of the input vector to code (None: all, in order).
    """

    low: tuple[float, ...]
    high: tuple[float, ...]
    tiles_per_dim: int = 8
    num_tilings: int = 8
    dims: tuple[int, ...] | None = None

    def __post_init__(self):
        if len(self.low) != len(self.high) or not self.low:
            raise ValueError(
                f"low and high must be non-empty and of equal length; got {self.low}, "
                f"{self.high}."
            )
        if any(h <= lo for lo, h in zip(self.low, self.high)):
            raise ValueError(
                f"high must exceed low in every dimension; got {self.low}, {self.high}."
            )
        if self.tiles_per_dim < 1 or self.num_tilings < 1:
            raise ValueError("tiles_per_dim and num_tilings must be >= 1.")
        if self.dims is not None and len(self.dims) != len(self.low):
            raise ValueError(
                f"dims {self.dims} must name one input per box dimension {self.low}."
            )

    @property
    def ndim(self) -> int:
        return len(self.low)

    @property
    def tiles_per_tiling(self) -> int:
        return (self.tiles_per_dim + 1) ** self.ndim

    @property
    def num_features(self) -> int:
        return self.num_tilings * self.tiles_per_tiling

    def offsets(self) -> jax.Array:
        """[num_tilings, d] displacement of each tiling in tile widths, in [0, 1)."""
        k = jnp.arange(self.num_tilings)[:, None]
        odd = 2 * jnp.arange(self.ndim)[None, :] + 1
        return jnp.mod(k * odd, self.num_tilings) / self.num_tilings

    def active(self, x: jax.Array) -> jax.Array:
        """The active tile of each tiling at ``x``.

        Args:
          x: [input dim] one input (``dims`` selects the coded components).

        Returns:
          [num_tilings] int32: the index into the feature vector of each tiling's tile.
        """
        x = jnp.asarray(x, jnp.float32)
        if self.dims is not None:
            x = x[jnp.asarray(self.dims)]
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        scaled = jnp.clip((x - low) / (high - low), 0.0, 1.0) * self.tiles_per_dim
        coords = jnp.floor(scaled[None, :] + self.offsets()).astype(jnp.int32)
        coords = jnp.clip(
            coords, 0, self.tiles_per_dim
        )  # guards float round-off at the edge
        strides = (self.tiles_per_dim + 1) ** jnp.arange(self.ndim)
        flat = coords @ strides
        return jnp.arange(self.num_tilings) * self.tiles_per_tiling + flat

    def __call__(self, x: jax.Array) -> jax.Array:
        """[num_features] binary features (one 1 per tiling)."""
        return jnp.zeros(self.num_features).at[self.active(x)].set(1.0)


@dataclasses.dataclass(frozen=True)
class FeatureMap:
    """Concatenated tile coders plus an optional constant, scaled to unit L2 norm.

    Attributes:
      coders: the tile coders (each reads its own ``dims`` of the input).
      bias: prepend a constant feature.
    """

    coders: tuple[TileCoder, ...]
    bias: bool = False

    @property
    def num_features(self) -> int:
        return int(self.bias) + sum(c.num_features for c in self.coders)

    @property
    def num_active(self) -> int:
        return int(self.bias) + sum(c.num_tilings for c in self.coders)

    def __call__(self, x: jax.Array) -> jax.Array:
        """[num_features] features of one input, ``||phi||_2 = 1``."""
        parts = [jnp.ones(1)] if self.bias else []
        parts += [c(x) for c in self.coders]
        return jnp.concatenate(parts) / math.sqrt(self.num_active)


@dataclasses.dataclass(frozen=True)
class EpsilonSoft:
    """An epsilon-soft policy: ``greedy(obs)`` w.p. 1 - eps, else uniform over actions.

    Called on ``obs`` it returns the [A] action probabilities. Every action gets at
    least eps / A, so an epsilon-soft behaviour policy covers any target policy
    (importance ratios at most (1 - eps' + eps'/A) / (eps / A)). Frozen and hashable
    (with a module-level ``greedy``), so equal policies share a jit cache entry.

    Attributes:
      greedy: ``obs -> int`` action.
      epsilon: probability of a uniformly random action.
      num_actions: A, the number of actions.
    """

    greedy: Callable[[jax.Array], jax.Array]
    epsilon: float
    num_actions: int

    def __post_init__(self):
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1]; got {self.epsilon}.")

    def __call__(self, obs: jax.Array) -> jax.Array:
        one_hot = jax.nn.one_hot(self.greedy(obs), self.num_actions)
        return (1.0 - self.epsilon) * one_hot + self.epsilon / self.num_actions


def mountain_car_features(tiles_per_dim: int = 6, num_tilings: int = 4) -> FeatureMap:
    """Features for MountainCar: tile coding of (position, velocity) plus a constant.

    The box is gym's observation box; the features have unit L2 norm.

    Args:
      tiles_per_dim: tiles along each of the two dimensions.
      num_tilings: number of shifted tilings.

    Returns:
      A :class:`FeatureMap` with ``1 + num_tilings * (tiles_per_dim + 1) ** 2``
      features.
    """
    coder = TileCoder(
        envs.MOUNTAIN_CAR_OBS_LOW,
        envs.MOUNTAIN_CAR_OBS_HIGH,
        tiles_per_dim,
        num_tilings,
    )
    return FeatureMap((coder,), bias=True)


def hiv_features(tiles_per_dim: int = 6, num_tilings: int = 4) -> FeatureMap:
    """Features for the HIV env: one 1-D tile coder per log10 concentration.

    An additive value model, plus a constant; unit L2 norm. A joint 6-D tiling would
    need (tiles + 1)^6 tiles per tiling.

    Args:
      tiles_per_dim: tiles along each log10 concentration.
      num_tilings: number of shifted tilings per coder.

    Returns:
      A :class:`FeatureMap` with ``1 + 6 * num_tilings * (tiles_per_dim + 1)``
      features.
    """
    coders = tuple(
        TileCoder((lo,), (hi,), tiles_per_dim, num_tilings, dims=(i,))
        for i, (lo, hi) in enumerate(
            zip(envs.HIV_OBS_LOG10_LOW, envs.HIV_OBS_LOG10_HIGH)
        )
    )
    return FeatureMap(coders, bias=True)


@dataclasses.dataclass(frozen=True)
class GridDiscretiser:
    """A uniform grid over a public box: continuous state -> cell index in [0, S).

    The finite state space that DP-LSW / DP-LSL (Balle et al. 2016, defined for finite
    states) need on a continuous env. The bins come from the box alone (for Mountain
    Car: gym's declared observation bounds, ``envs.MOUNTAIN_CAR_OBS_LOW/HIGH``), never
    from data, so the map is public. Inputs outside the box are clipped into its edge
    cells, so every state has a cell. Cells are numbered with dimension 0 fastest
    (``cell = i_0 + bins_0 * (i_1 + bins_1 * ...)``), the tile coder's convention.

    Attributes:
      low, high: the box per dimension.
      bins: cells per dimension.
    """

    low: tuple[float, ...]
    high: tuple[float, ...]
    bins: tuple[int, ...]

    def __post_init__(self):
        if not (len(self.low) == len(self.high) == len(self.bins)) or not self.low:
            raise ValueError(
                "low, high and bins must be non-empty and of equal length; got "
                f"{self.low}, {self.high}, {self.bins}."
            )
        if any(h <= lo for lo, h in zip(self.low, self.high)):
            raise ValueError(
                f"high must exceed low in every dimension; got {self.low}, {self.high}."
            )
        if any(int(b) != b or b < 1 for b in self.bins):
            raise ValueError(f"bins must be integers >= 1; got {self.bins}.")

    @classmethod
    def of_tiles(cls, coder: TileCoder) -> GridDiscretiser:
        """The grid on whose cells ``coder``'s features are constant.

        Tiling k is displaced by a multiple of 1/num_tilings tile widths
        (:meth:`TileCoder.offsets`), so every tile boundary of every tiling lies on the
        grid of ``tiles_per_dim * num_tilings`` equal bins per dimension over the
        coder's box: phi(x) = phi(centre of x's cell) for every x (up to float
        round-off exactly on a boundary). A value function linear in the tile features
        is then a function of the cell, so a tabular method on these cells estimates
        the same value class.
        """
        return cls(
            coder.low,
            coder.high,
            (coder.tiles_per_dim * coder.num_tilings,) * coder.ndim,
        )

    @property
    def ndim(self) -> int:
        return len(self.low)

    @property
    def num_cells(self) -> int:
        return math.prod(self.bins)

    def edges(self) -> tuple[jax.Array, ...]:
        """Per dimension, the ``bins + 1`` cell boundaries (``low`` ... ``high``)."""
        return tuple(
            jnp.linspace(lo, hi, b + 1)
            for lo, hi, b in zip(self.low, self.high, self.bins)
        )

    def coords(self, x: jax.Array) -> jax.Array:
        """[..., d] int32 bin index of each dimension, clipped into [0, bins - 1]."""
        x = jnp.asarray(x, jnp.float32)
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        bins = jnp.asarray(self.bins)
        scaled = jnp.clip((x - low) / (high - low), 0.0, 1.0) * bins
        # floor(1.0 * bins) = bins at the upper edge: that state is in the last bin.
        return jnp.clip(jnp.floor(scaled).astype(jnp.int32), 0, bins - 1)

    def __call__(self, x: jax.Array) -> jax.Array:
        """[...] int32 cell index of states ``x [..., d]``."""
        strides = jnp.cumprod(jnp.asarray((1, *self.bins[:-1])))
        return self.coords(x) @ strides.astype(jnp.int32)

    def centres(self) -> jax.Array:
        """[S, d] the centre of every cell, in cell order."""
        mids = [(e[:-1] + e[1:]) / 2 for e in self.edges()]
        grids = jnp.meshgrid(*mids, indexing="ij")  # [bins_0, bins_1, ...]
        # Dimension 0 fastest: flatten in Fortran order.
        return jnp.stack([g.reshape(-1, order="F") for g in grids], axis=-1)
