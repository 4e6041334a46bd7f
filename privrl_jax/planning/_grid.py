"""Grid discretisation: the baseline POOL's zones replace (pool.txt, Sec. 3.2).

Each coordinate of the observable box [0, min(lambda_h, 1)) is cut into q equal
bins, giving q^(w+d) cells ("each dimension discretized into q bins", Sec. 3.2,
Discretization strategy); Q is constant on a cell, the tabular reading of Qin et
al. 2023 and Gong & Simchi-Levi 2023 extended to w + d dimensions. Beyond the
boundary the value is the constant of the boundary's cell (the same constant
extension as Algorithm 1, line 15). One transition lands in one cell, so the
private statistics and their sensitivity are those of POOL.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@struct.dataclass
class GridGeometry:
    """q bins per dimension on the observable box of every stage.

    Attributes:
      boundary: [H, n] lambda_h.
      bins: q (static).
    """

    boundary: jax.Array
    bins: int = struct.field(pytree_node=False)

    @property
    def dim(self) -> int:
        return self.boundary.shape[-1]

    @property
    def horizon(self) -> int:
        return self.boundary.shape[0]

    @property
    def num_cells(self) -> int:
        """K = q^n."""
        return self.bins**self.dim


def make_grid_geometry(boundary: np.ndarray | jax.Array, bins: int) -> GridGeometry:
    """The grid of ``bins`` per dimension for boundaries [H, n] (or [n]).

    Args:
      boundary: [H, n] observable boundaries lambda_h, or [n] for one stage
        (H = 1); n = w + d.
      bins: q, the bins per dimension; the grid has K = q^n cells.

    Returns:
      The :class:`GridGeometry`.

    Raises:
      ValueError: `bins` below 1, or more than 5e7 cells.
    """
    lam = jnp.asarray(boundary, jnp.float32)
    if lam.ndim == 1:
        lam = lam[None]
    if bins < 1:
        raise ValueError(f"bins must be >= 1; got {bins}")
    if bins ** lam.shape[-1] > 50_000_000:
        raise ValueError(
            f"{bins}^{lam.shape[-1]} grid cells do not fit; lower the bins"
        )
    return GridGeometry(boundary=lam, bins=int(bins))


def grid_cell(geom: GridGeometry, h: jax.Array, b: jax.Array) -> jax.Array:
    """Row-major cell of b [n] at stage h.

    Coordinates past the box go to the last bin.
    """
    box = jnp.minimum(geom.boundary[h], 1.0)
    idx = jnp.clip(jnp.floor(b / box * geom.bins), 0, geom.bins - 1).astype(jnp.int32)
    strides = geom.bins ** jnp.arange(geom.dim - 1, -1, -1, dtype=jnp.int32)
    return jnp.sum(idx * strides)


def grid_value(
    geom: GridGeometry, h: jax.Array, q_flat: jax.Array, b: jax.Array
) -> jax.Array:
    """Q_bar_h(b): the value of b's cell, or of lambda_h's cell beyond the boundary."""
    inside = jnp.all(b < geom.boundary[h])
    edge = jnp.minimum(geom.boundary[h], 1.0)
    return q_flat[grid_cell(geom, h, jnp.where(inside, b, edge))]
