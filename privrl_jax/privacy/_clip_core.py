"""Per-unit clip factors and clipped sums from per-unit values.

The bottom of the clipping stack.

Shared by the reference ``vmap`` path (``_clipping``) and the ghost path (``_ghost``);
it imports neither, so the two sit above it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp

PyTree = Any


class ClipMetrics(NamedTuple):
    """Diagnostics of one clipped-sum call.

    They depend on private data: never release them.

    Attributes:
      per_unit_norms: [units] float32 pre-clip global L2 norm of each unit's
        contribution ([units, blocks] when the contribution has several separately
        clipped blocks); 0 for masked units and for units whose contribution was
        non-finite.
      clipped_fraction: scalar, fraction of present units with a norm above its clip
        norm (in any block).
      num_nonfinite: scalar int32, present units whose contribution had a NaN/inf
        (zeroed).
      num_units: scalar int32, units with at least one valid item.
    """

    per_unit_norms: jax.Array
    clipped_fraction: jax.Array
    num_nonfinite: jax.Array
    num_units: jax.Array


def clip_factors(
    norms: jax.Array, unit_mask: jax.Array, l2_clip_norm: jax.typing.ArrayLike
) -> tuple[jax.Array, jax.Array, ClipMetrics]:
    """Per-unit clip scales from per-unit norms, shared by the vmap and ghost paths.

    Args:
      norms: [units] global L2 norm of each unit's gradient.
      unit_mask: [units] bool, False for padded units.
      l2_clip_norm: the clip norm C > 0.

    Returns:
      ``(scale, keep, metrics)``: ``scale = min(1, C / norm)`` on kept units and 0
      elsewhere; ``keep`` is False for padded and non-finite units, whose gradients must
      be dropped with ``where``.
    """
    finite = jnp.isfinite(norms)
    keep = unit_mask & finite
    # min(1, C/n) written so that n = 0 gives 1 and n = inf is excluded by ``keep``.
    scale = jnp.where(keep, l2_clip_norm / jnp.maximum(norms, l2_clip_norm), 0.0)
    present = jnp.sum(unit_mask)
    metrics = ClipMetrics(
        per_unit_norms=jnp.where(keep, norms, 0.0),
        clipped_fraction=jnp.sum(keep & (norms > l2_clip_norm))
        / jnp.maximum(present, 1),
        num_nonfinite=jnp.sum(unit_mask & ~finite).astype(jnp.int32),
        num_units=present.astype(jnp.int32),
    )
    return scale, keep, metrics


def _unit_sq_norms(tree: PyTree, num_units: int) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(tree)
    # An array for any tree with leaves (``sum`` of nothing would be the int 0).
    return cast(
        jax.Array,
        sum(
            jnp.sum(jnp.reshape(x, (num_units, -1)).astype(jnp.float32) ** 2, axis=1)
            for x in leaves
        ),
    )


def _weighted_sum(tree: PyTree, scale: jax.Array, keep: jax.Array) -> PyTree:
    def one(g):
        # ``where`` (not multiply) so NaN/inf in dropped units cannot leak through 0 *
        # inf.
        g32 = jnp.where(
            keep.reshape((-1,) + (1,) * (g.ndim - 1)), g.astype(jnp.float32), 0.0
        )
        return jnp.tensordot(scale, g32, axes=1).astype(g.dtype)

    return jax.tree_util.tree_map(one, tree)


def clip_unit_grads(
    grads: PyTree, unit_mask: jax.Array, l2_clip_norm: jax.typing.ArrayLike
) -> tuple[PyTree, ClipMetrics]:
    """Clips a batch of per-unit gradients to norm ``C`` each and sums them.

    Args:
      grads: pytree whose leaves have a leading unit axis ``[units, ...]``.
      unit_mask: [units] bool, False for padded units.
      l2_clip_norm: the clip norm C > 0.

    Returns:
      ``(clipped_sum, metrics)``: the sum over units of ``g_u * min(1, C / ||g_u||)``,
      with padded and non-finite units contributing exactly zero.

    Formal guarantees: every unit's contribution has global L2 norm <= C (up to float
    rounding), so adding or removing one unit moves the sum by at most C; no NaN appears
    for norms of 0 or +inf; leaf dtypes and tree structure are preserved.
    """
    num_units = unit_mask.shape[0]
    scale, keep, metrics = clip_factors(
        jnp.sqrt(_unit_sq_norms(grads, num_units)), unit_mask, l2_clip_norm
    )
    return _weighted_sum(grads, scale, keep), metrics


def clip_unit_blocks(
    blocks: Sequence[PyTree], unit_mask: jax.Array, l2_clip_norms: Sequence[float]
) -> tuple[tuple[PyTree, ...], ClipMetrics]:
    """Clips each block of each unit's contribution to its own norm and sums over units.

    Args:
      blocks: k pytrees whose leaves have a leading unit axis ``[units, ...]`` (e.g.
        GTD2's primal and dual directions).
      unit_mask: [units] bool, False for padded units.
      l2_clip_norms: k clip norms C_1..C_k > 0.

    Returns:
      ``(sums, metrics)``: per block, the sum over units of ``b_u * min(1, C_i /
      ||b_u||)``; ``metrics.per_unit_norms`` is ``[units, k]``. A unit with a non-finite
      value in any block contributes zero to every block.

    Formal guarantees: one unit moves block i of the sum by at most C_i in L2 norm,
    whatever it does to the other blocks; tree structures and dtypes are preserved.
    """
    if len(blocks) != len(l2_clip_norms):
        raise ValueError(
            f"{len(blocks)} blocks but {len(l2_clip_norms)} clip norms; give one clip "
            "norm per block."
        )
    num_units = unit_mask.shape[0]
    norms = jnp.stack([jnp.sqrt(_unit_sq_norms(b, num_units)) for b in blocks], axis=1)
    finite = jnp.all(jnp.isfinite(norms), axis=1)
    keep = unit_mask & finite
    sums, clipped = [], jnp.zeros(num_units, bool)
    for i, (block, c) in enumerate(zip(blocks, l2_clip_norms)):
        scale, _, _ = clip_factors(norms[:, i], keep, c)
        sums.append(_weighted_sum(block, scale, keep))
        clipped = clipped | (keep & (norms[:, i] > c))
    present = jnp.sum(unit_mask)
    metrics = ClipMetrics(
        per_unit_norms=jnp.where(keep[:, None], norms, 0.0),
        clipped_fraction=jnp.sum(clipped) / jnp.maximum(present, 1),
        num_nonfinite=jnp.sum(unit_mask & ~finite).astype(jnp.int32),
        num_units=present.astype(jnp.int32),
    )
    return tuple(sums), metrics
