"""Per-unit clipped gradient sums: the sensitivity-bounding half of DP-SGD.

A private batch is laid out as ``[units, items_per_unit, ...]`` with a boolean item mask of shape
``[units, items_per_unit]`` (DESIGN.md, contract 2). A unit is what differential privacy protects: a
transition (one item), a trajectory (its transitions or fragments). Each unit's gradient is taken over
the sum of its valid items' losses and clipped to global L2 norm ``C`` as one vector, so one unit moves
the summed gradient by at most ``C`` however many items it holds.

Runs in JAX (jit/vmap-able); nothing here draws DP noise (see ``_aggregation``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp

PyTree = Any
# ``loss(params, item) -> scalar`` or, with ``uses_key=True``, ``loss(params, item, key) -> scalar``.
PerItemLoss = Callable[..., jax.Array]


class Neighboring(enum.Enum):
    """Neighbouring relations between datasets, as dp-accounting names them."""

    ADD_OR_REMOVE_ONE = "add_or_remove_one"
    REPLACE_ONE = "replace_one"


class ClipMetrics(NamedTuple):
    """Diagnostics of one clipped-sum call (they depend on private data: never release them).

    Attributes:
      per_unit_norms: [units] float32 pre-clip global L2 norm of each unit's gradient; 0 for
        masked units and for units whose gradient was non-finite.
      clipped_fraction: scalar, fraction of present units whose norm exceeded the clip norm.
      num_nonfinite: scalar int32, present units whose gradient had a NaN/inf (zeroed).
      num_units: scalar int32, units with at least one valid item.
    """

    per_unit_norms: jax.Array
    clipped_fraction: jax.Array
    num_nonfinite: jax.Array
    num_units: jax.Array


def _unit_loss(
    per_item_loss: PerItemLoss, uses_key: bool
) -> Callable[[PyTree, PyTree, jax.Array, jax.Array | None], jax.Array]:
    """Sum of one unit's valid item losses; padded items are excluded with ``where``."""

    def unit_loss(params, items, item_mask, key):
        if uses_key:
            item_keys = jax.random.split(key, item_mask.shape[0])
            losses = jax.vmap(per_item_loss, in_axes=(None, 0, 0))(params, items, item_keys)
        else:
            losses = jax.vmap(per_item_loss, in_axes=(None, 0))(params, items)
        chex.assert_shape(losses, item_mask.shape)
        return jnp.sum(jnp.where(item_mask, losses, 0.0))

    return unit_loss


def clip_unit_grads(
    grads: PyTree, unit_mask: jax.Array, l2_clip_norm: jax.typing.ArrayLike
) -> tuple[PyTree, ClipMetrics]:
    """Clips a batch of per-unit gradients to norm ``C`` each and sums them.

    Args:
      grads: pytree whose leaves have a leading unit axis ``[units, ...]``.
      unit_mask: [units] bool, False for padded units.
      l2_clip_norm: the clip norm C > 0.

    Returns:
      ``(clipped_sum, metrics)``: the sum over units of ``g_u * min(1, C / ||g_u||)``, with padded and
      non-finite units contributing exactly zero.

    Formal guarantees: every unit's contribution has global L2 norm <= C (up to float rounding), so
    adding or removing one unit moves the sum by at most C; no NaN appears for norms of 0 or +inf;
    leaf dtypes and tree structure are preserved.
    """
    leaves = jax.tree_util.tree_leaves(grads)
    num_units = unit_mask.shape[0]
    sq = sum(jnp.sum(jnp.reshape(x, (num_units, -1)).astype(jnp.float32) ** 2, axis=1) for x in leaves)
    scale, keep, metrics = clip_factors(jnp.sqrt(sq), unit_mask, l2_clip_norm)

    def weighted_sum(g):
        # ``where`` (not multiply) so NaN/inf in dropped units cannot leak through 0 * inf.
        g32 = jnp.where(
            keep.reshape((-1,) + (1,) * (g.ndim - 1)), g.astype(jnp.float32), 0.0
        )
        return jnp.tensordot(scale, g32, axes=1).astype(g.dtype)

    return jax.tree_util.tree_map(weighted_sum, grads), metrics


def clip_factors(
    norms: jax.Array, unit_mask: jax.Array, l2_clip_norm: jax.typing.ArrayLike
) -> tuple[jax.Array, jax.Array, ClipMetrics]:
    """Per-unit clip scales from per-unit norms, shared by the vmap and ghost paths.

    Args:
      norms: [units] global L2 norm of each unit's gradient.
      unit_mask: [units] bool, False for padded units.
      l2_clip_norm: the clip norm C > 0.

    Returns:
      ``(scale, keep, metrics)``: ``scale = min(1, C / norm)`` on kept units and 0 elsewhere; ``keep``
      is False for padded and non-finite units, whose gradients must be dropped with ``where``.
    """
    finite = jnp.isfinite(norms)
    keep = unit_mask & finite
    # min(1, C/n) written so that n = 0 gives 1 and n = inf is excluded by ``keep``.
    scale = jnp.where(keep, l2_clip_norm / jnp.maximum(norms, l2_clip_norm), 0.0)
    present = jnp.sum(unit_mask)
    metrics = ClipMetrics(
        per_unit_norms=jnp.where(keep, norms, 0.0),
        clipped_fraction=jnp.sum(keep & (norms > l2_clip_norm)) / jnp.maximum(present, 1),
        num_nonfinite=jnp.sum(unit_mask & ~finite).astype(jnp.int32),
        num_units=present.astype(jnp.int32),
    )
    return scale, keep, metrics


def _validate_batch(batch: PyTree, mask: jax.Array) -> None:
    if not hasattr(mask, "ndim") or mask.ndim != 2:
        raise ValueError(
            f"mask must have shape [units, items_per_unit]; got shape {getattr(mask, 'shape', None)}. "
            "For one item per unit (e.g. transitions), add an items axis: batch[:, None], mask[:, None]."
        )
    for path, leaf in jax.tree_util.tree_leaves_with_path(batch):
        if leaf.ndim < 2 or leaf.shape[:2] != mask.shape:
            raise ValueError(
                f"batch leaf {jax.tree_util.keystr(path)} has shape {leaf.shape}, but every leaf must "
                f"start with the [units, items_per_unit] axes of the mask, {tuple(mask.shape)}. "
                "Lay the batch out as [units, items, ...] (use x[:, None] for one item per unit)."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClippedGradFn:
    """``(params, batch, mask, key) -> (clipped_sum, ClipMetrics)`` with a known sensitivity.

    Build it with :func:`clipped_grad`. Calling it computes, for every unit u, the gradient of
    ``sum_j mask[u, j] * loss(params, batch[u, j])``, clips it to ``l2_clip_norm`` and sums over units.
    """

    per_item_loss: PerItemLoss
    l2_clip_norm: float
    microbatch_size: int | None = None
    uses_key: bool = False
    method: str = "vmap"

    def sensitivity(self, neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE) -> float:
        """L2 sensitivity of the clipped sum: C under add/remove, 2C under replace-one."""
        if neighboring == Neighboring.REPLACE_ONE:
            return 2.0 * self.l2_clip_norm
        return self.l2_clip_norm

    def __call__(
        self, params: PyTree, batch: PyTree, mask: jax.Array, key: jax.Array | None = None
    ) -> tuple[PyTree, ClipMetrics]:
        if self.uses_key and key is None:
            raise ValueError(
                "this clipped gradient's loss uses randomness (uses_key=True) but key=None; pass an "
                "explicit jax.random key (a missing key is never replaced by a default)."
            )
        unit_keys = jax.random.split(key, mask.shape[0]) if self.uses_key else None
        return self.with_unit_keys(params, batch, mask, unit_keys)

    def with_unit_keys(
        self, params: PyTree, batch: PyTree, mask: jax.Array, unit_keys: jax.Array | None
    ) -> tuple[PyTree, ClipMetrics]:
        """Like ``__call__`` with the per-unit keys given (``[units]`` keys, or None)."""
        _validate_batch(batch, mask)
        num_units = mask.shape[0]
        mask = mask.astype(bool)
        mb = self.microbatch_size or num_units
        if num_units % mb:
            raise ValueError(
                f"microbatch_size={mb} must divide the number of units in the batch ({num_units}); "
                "pad the batch with masked units to a multiple of the microbatch size."
            )
        if self.method == "ghost":
            from privrl_jax.privacy import _ghost  # noqa: PLC0415  (optional fast path)

            chunk_fn = lambda p, b, m, k: _ghost.ghost_clipped_grad_sum(  # noqa: E731
                self.per_item_loss, p, b, m, k, l2_clip_norm=self.l2_clip_norm, uses_key=self.uses_key
            )
        else:
            chunk_fn = self._vmap_chunk

        if mb == num_units:
            return chunk_fn(params, batch, mask, unit_keys)

        def to_chunks(x):
            return x.reshape((num_units // mb, mb) + x.shape[1:])

        chunks = jax.tree_util.tree_map(to_chunks, (batch, mask, unit_keys))

        def body(acc, chunk):
            g, m = chunk_fn(params, *chunk)
            return jax.tree_util.tree_map(jnp.add, acc, g), m

        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        total, metrics = jax.lax.scan(body, zeros, chunks)
        num = jnp.sum(metrics.num_units)
        metrics = ClipMetrics(
            per_unit_norms=metrics.per_unit_norms.reshape(-1),
            clipped_fraction=jnp.sum(metrics.clipped_fraction * metrics.num_units) / jnp.maximum(num, 1),
            num_nonfinite=jnp.sum(metrics.num_nonfinite),
            num_units=num,
        )
        return total, metrics

    def _vmap_chunk(self, params, batch, mask, unit_keys):
        unit_loss = _unit_loss(self.per_item_loss, self.uses_key)
        grads = jax.vmap(jax.grad(unit_loss), in_axes=(None, 0, 0, 0 if self.uses_key else None))(
            params, batch, mask, unit_keys
        )
        return clip_unit_grads(grads, jnp.any(mask, axis=1), self.l2_clip_norm)


def clipped_grad(
    per_item_loss: PerItemLoss,
    *,
    l2_clip_norm: float,
    microbatch_size: int | None = None,
    uses_key: bool = False,
    method: str = "vmap",
) -> ClippedGradFn:
    """Builds the per-unit clipped gradient sum of ``per_item_loss``, like ``jax.grad`` for DP-SGD.

    Args:
      per_item_loss: ``loss(params, item) -> scalar`` for one item (one transition, one trajectory
        step), or ``loss(params, item, key)`` when ``uses_key``. A unit's loss is the sum over its
        valid items; write the maths for one item and let this function vmap it.
      l2_clip_norm: clip norm C > 0 applied to each unit's whole gradient (all parameters as one vector).
      microbatch_size: units processed at once (``lax.scan`` over chunks bounds memory); must divide the
        number of units of the batches it is called on. ``None``: all units at once.
      uses_key: whether the loss takes a PRNG key; each unit then gets ``split(key, units)[u]`` and each
        item a split of that, so results do not depend on ``microbatch_size``.
      method: ``"vmap"`` (materialises per-unit gradients; the reference) or ``"ghost"`` (ghost norms).

    Returns:
      A :class:`ClippedGradFn`: ``fn(params, batch, mask, key=None) -> (clipped_sum, ClipMetrics)``
      where ``batch`` leaves are ``[units, items, ...]`` and ``mask`` is ``[units, items]`` bool.

    Raises:
      ValueError: for a non-positive or non-finite clip norm, a microbatch size < 1, or an unknown
        method.

    Example:
      >>> import jax.numpy as jnp
      >>> loss = lambda w, x: jnp.sum(w * x)  # gradient of one item is x itself
      >>> fn = clipped_grad(loss, l2_clip_norm=1.0)
      >>> batch = jnp.array([[[10.0, 0.0]], [[0.0, 10.0]]])  # 2 units x 1 item x 2 dims
      >>> total, _ = fn(jnp.zeros(2), batch, jnp.ones((2, 1), bool))
      >>> total.tolist()
      [1.0, 1.0]
    """
    if not (isinstance(l2_clip_norm, (int, float)) and 0 < l2_clip_norm < float("inf")):
        raise ValueError(f"l2_clip_norm must be a finite number > 0; got {l2_clip_norm!r}.")
    if microbatch_size is not None and (not isinstance(microbatch_size, int) or microbatch_size < 1):
        raise ValueError(f"microbatch_size must be a positive int or None; got {microbatch_size!r}.")
    if method not in ("vmap", "ghost"):
        raise ValueError(f"method must be 'vmap' or 'ghost'; got {method!r}.")
    return ClippedGradFn(
        per_item_loss=per_item_loss,
        l2_clip_norm=float(l2_clip_norm),
        microbatch_size=microbatch_size,
        uses_key=uses_key,
        method=method,
    )
