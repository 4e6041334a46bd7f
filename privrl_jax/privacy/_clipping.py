"""Per-unit clipped sums: the sensitivity-bounding half of DP-SGD (and of any DP sum).

A private batch is laid out as ``[units, items_per_unit, ...]`` with a boolean item mask
of shape ``[units, items_per_unit]`` (docs/design.md, contract 2). A unit is what
differential privacy
protects: a transition (one item), a trajectory (its transitions or fragments). Each
unit's contribution is the sum over its valid items and is clipped to global L2 norm
``C`` as one vector, so one unit moves the sum by at most ``C`` however many items it
holds.

Two builders share one clipped-sum object, :class:`ClippedSumFn`:

- :func:`clipped_grad`: the contribution is the gradient of the unit's summed loss
  (DP-SGD).
- :func:`clipped_sum`: the contribution is the sum of any per-item function of the
  parameters, e.g. GTD2's primal-dual direction, which is not the gradient of one loss;
  it may have several blocks, each clipped to its own norm.

Runs in JAX (jit/vmap-able); nothing here draws DP noise (see ``_aggregation`` and
``_plan``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import chex
import jax
import jax.numpy as jnp

from privrl_jax.privacy import _ghost
from privrl_jax.privacy._accounting import Neighboring
from privrl_jax.privacy._clip_core import ClipMetrics, clip_unit_blocks, clip_unit_grads

PyTree = Any
# ``fn(params, item) -> value`` or, with ``uses_key=True``, ``fn(params, item, key) ->
# value``.
PerItemFn = Callable[..., Any]
PerItemLoss = PerItemFn


def _per_item(fn: PerItemFn, uses_key: bool, params, items, item_mask, key):
    """``fn`` vmapped over a unit's items; item keys are ``split(unit_key, items)``."""
    if uses_key:
        item_keys = jax.random.split(key, item_mask.shape[0])
        return jax.vmap(fn, in_axes=(None, 0, 0))(params, items, item_keys)
    return jax.vmap(fn, in_axes=(None, 0))(params, items)


def _unit_loss(per_item_loss: PerItemFn, uses_key: bool) -> Callable[..., jax.Array]:
    """Sum of one unit's valid item losses; padded items are excluded with ``where``."""

    def unit_loss(params, items, item_mask, key):
        losses = _per_item(per_item_loss, uses_key, params, items, item_mask, key)
        chex.assert_shape(losses, item_mask.shape)
        return jnp.sum(jnp.where(item_mask, losses, 0.0))

    return unit_loss


def _unit_value(per_item_fn: PerItemFn, uses_key: bool) -> Callable[..., PyTree]:
    """Sum over a unit's valid items of ``per_item_fn``.

    Padded items contribute exactly zero.
    """

    def unit_value(params, items, item_mask, key):
        values = _per_item(per_item_fn, uses_key, params, items, item_mask, key)

        def masked_sum(v):
            m = item_mask.reshape(item_mask.shape + (1,) * (v.ndim - 1))
            return jnp.sum(jnp.where(m, v, jnp.zeros_like(v)), axis=0)

        return jax.tree_util.tree_map(masked_sum, values)

    return unit_value


def _validate_batch(batch: PyTree, mask: jax.Array) -> None:
    if not hasattr(mask, "ndim") or mask.ndim != 2:
        raise ValueError(
            "mask must have shape [units, items_per_unit]; got shape "
            f"{getattr(mask, 'shape', None)}. "
            "For one item per unit (e.g. transitions), add an items axis: batch[:, "
            "None], mask[:, None]."
        )
    for path, leaf in jax.tree_util.tree_leaves_with_path(batch):
        if leaf.ndim < 2 or leaf.shape[:2] != mask.shape:
            raise ValueError(
                f"batch leaf {jax.tree_util.keystr(path)} has shape {leaf.shape}, but "
                "every leaf must "
                "start with the [units, items_per_unit] axes of the mask, "
                f"{tuple(mask.shape)}. "
                "Lay the batch out as [units, items, ...] (use x[:, None] for one item "
                "per unit)."
            )


def _check_scalar_loss(fn: PerItemFn, uses_key: bool, params, batch, unit_keys):
    """Raises unless ``fn`` returns a scalar for one item (traced only, never run).

    A loss of shape (1,) or (K,) would otherwise fail deep inside the clipping.
    """
    item = jax.tree_util.tree_map(lambda x: x[0, 0], batch)
    args: tuple[Any, ...] = (params, item)
    if uses_key and unit_keys is not None:
        args += (jax.random.split(unit_keys[0], 1)[0],)
    elif uses_key:
        return
    out = jax.eval_shape(fn, *args)
    if getattr(out, "shape", None) != ():
        shape = getattr(out, "shape", None)
        got = f"shape {tuple(shape)}" if shape is not None else type(out).__name__
        raise ValueError(
            f"per_item_loss must return a scalar; got {got}. Return the item's loss "
            "as a 0-d array (e.g. jnp.sum(...) or loss[0])."
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClippedSumFn:
    """``(params, batch, mask, key) -> (clipped_sum, ClipMetrics)``.

    The clipped sum has a known sensitivity.

    Build it with :func:`clipped_grad` or :func:`clipped_sum` (or a plan's methods of
    the same names, which take the clip norms from the plan). For every unit u it
    computes the unit's contribution over its valid items, clips it (per block) and sums
    over units.

    Attributes:
      per_item_fn: the per-item loss (``kind="grad"``) or per-item value
        (``kind="value"``).
      l2_clip_norms: one clip norm per block (one block for gradients).
      kind: ``"grad"`` or ``"value"``.
      microbatch_size: units per chunk of a ``lax.scan`` (None: all at once).
      uses_key: whether ``per_item_fn`` takes a PRNG key.
      method: ``"vmap"`` (reference) or ``"ghost"`` (ghost norms; gradients only).
    """

    per_item_fn: PerItemFn
    l2_clip_norms: tuple[float, ...]
    kind: str = "grad"
    microbatch_size: int | None = None
    uses_key: bool = False
    method: str = "vmap"

    @property
    def num_blocks(self) -> int:
        return len(self.l2_clip_norms)

    @property
    def l2_clip_norm(self) -> float:
        """The clip norm of a one-block sum (raises for several blocks)."""
        if self.num_blocks != 1:
            raise ValueError(
                f"this sum has {self.num_blocks} blocks; use l2_clip_norms."
            )
        return self.l2_clip_norms[0]

    @property
    def per_item_loss(self) -> PerItemFn:
        return self.per_item_fn

    def sensitivities(
        self, neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE
    ) -> tuple[float, ...]:
        """L2 sensitivity of each block: C_i (add/remove) or 2 C_i (replace-one)."""
        return tuple(neighboring.sensitivity_factor * c for c in self.l2_clip_norms)

    def sensitivity(
        self, neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE
    ) -> float:
        """L2 sensitivity of a one-block clipped sum: C (add/remove) or 2C (replace)."""
        return neighboring.sensitivity_factor * self.l2_clip_norm

    def __call__(
        self,
        params: PyTree,
        batch: PyTree,
        mask: jax.Array,
        key: jax.Array | None = None,
    ) -> tuple[PyTree, ClipMetrics]:
        if self.uses_key and key is None:
            raise ValueError(
                "this clipped sum's function uses randomness (uses_key=True) but "
                "key=None; pass an "
                "explicit jax.random key (a missing key is never replaced by a "
                "default)."
            )
        # ``key`` is not None here when ``uses_key`` (refused above).
        unit_keys = (
            jax.random.split(cast(jax.Array, key), mask.shape[0])
            if self.uses_key
            else None
        )
        return self.with_unit_keys(params, batch, mask, unit_keys)

    def with_unit_keys(
        self,
        params: PyTree,
        batch: PyTree,
        mask: jax.Array,
        unit_keys: jax.Array | None,
    ) -> tuple[PyTree, ClipMetrics]:
        """Like ``__call__``, with the per-unit keys given.

        The keys: ``[units]`` keys, or None.
        """
        _validate_batch(batch, mask)
        if self.kind == "grad":
            _check_scalar_loss(
                self.per_item_fn, self.uses_key, params, batch, unit_keys
            )
        num_units = mask.shape[0]
        mask = mask.astype(bool)
        mb = self.microbatch_size or num_units
        if num_units % mb:
            raise ValueError(
                f"microbatch_size={mb} must divide the number of units in the batch "
                f"({num_units}); "
                "pad the batch with masked units to a multiple of the microbatch size."
            )
        if self.method == "ghost":

            def chunk_fn(p, b, m, k):
                return _ghost.ghost_clipped_grad_sum(
                    self.per_item_fn,
                    p,
                    b,
                    m,
                    k,
                    l2_clip_norm=self.l2_clip_norm,
                    uses_key=self.uses_key,
                )

        else:
            chunk_fn = self._vmap_chunk

        if mb == num_units:
            return chunk_fn(params, batch, mask, unit_keys)

        def to_chunks(x):
            return x.reshape((num_units // mb, mb) + x.shape[1:])

        chunks = jax.tree_util.tree_map(to_chunks, (batch, mask, unit_keys))
        zeros = jax.eval_shape(
            lambda: chunk_fn(params, *jax.tree_util.tree_map(lambda x: x[0], chunks))[0]
        )
        zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), zeros)

        def body(acc, chunk):
            g, m = chunk_fn(params, *chunk)
            return jax.tree_util.tree_map(jnp.add, acc, g), m

        total, metrics = jax.lax.scan(body, zeros, chunks)
        num = jnp.sum(metrics.num_units)
        metrics = ClipMetrics(
            per_unit_norms=metrics.per_unit_norms.reshape(
                (-1,) + metrics.per_unit_norms.shape[2:]
            ),
            clipped_fraction=jnp.sum(metrics.clipped_fraction * metrics.num_units)
            / jnp.maximum(num, 1),
            num_nonfinite=jnp.sum(metrics.num_nonfinite),
            num_units=num,
        )
        return total, metrics

    def _vmap_chunk(self, params, batch, mask, unit_keys):
        if self.kind == "grad":
            unit_fn = jax.grad(_unit_loss(self.per_item_fn, self.uses_key))
        else:
            unit_fn = _unit_value(self.per_item_fn, self.uses_key)
        values = jax.vmap(unit_fn, in_axes=(None, 0, 0, 0 if self.uses_key else None))(
            params, batch, mask, unit_keys
        )
        unit_mask = jnp.any(mask, axis=1)
        if self.num_blocks == 1:
            return clip_unit_grads(values, unit_mask, self.l2_clip_norm)
        if not isinstance(values, tuple) or len(values) != self.num_blocks:
            raise ValueError(
                f"{self.num_blocks} clip norms were given, so the per-item function "
                "must return a "
                f"tuple of {self.num_blocks} blocks; it returned "
                f"{jax.tree_util.tree_structure(values)}."
            )
        return clip_unit_blocks(values, unit_mask, self.l2_clip_norms)


# The name of the gradient case before the general clipped sum existed.
ClippedGradFn = ClippedSumFn


def _check_clip_norms(l2_clip_norm: float | tuple[float, ...]) -> tuple[float, ...]:
    norms = (
        tuple(l2_clip_norm)
        if isinstance(l2_clip_norm, (tuple, list))
        else (l2_clip_norm,)
    )
    if not norms:
        raise ValueError("l2_clip_norm: give at least one clip norm.")
    out = []
    for c in norms:
        try:
            c = float(c)
        except (TypeError, ValueError):
            raise ValueError(
                f"l2_clip_norm must be a finite number > 0; got {c!r}."
            ) from None
        if not 0 < c < float("inf"):
            raise ValueError(f"l2_clip_norm must be a finite number > 0; got {c!r}.")
        out.append(c)
    return tuple(out)


def _check_common(microbatch_size: int | None, method: str) -> None:
    if microbatch_size is not None and (
        isinstance(microbatch_size, bool)
        or not isinstance(microbatch_size, int)
        or microbatch_size < 1
    ):
        raise ValueError(
            f"microbatch_size must be a positive int or None; got {microbatch_size!r}."
        )
    if method not in ("vmap", "ghost"):
        raise ValueError(f"method must be 'vmap' or 'ghost'; got {method!r}.")


def clipped_grad(
    per_item_loss: PerItemFn,
    *,
    l2_clip_norm: float,
    microbatch_size: int | None = None,
    uses_key: bool = False,
    method: str = "vmap",
) -> ClippedSumFn:
    """Builds the per-unit clipped gradient sum of ``per_item_loss``.

    Like ``jax.grad``, for DP-SGD.

    Args:
      per_item_loss: ``loss(params, item) -> scalar`` for one item (one transition, one
        trajectory step), or ``loss(params, item, key)`` when ``uses_key``. A unit's
        loss is the sum over its valid items; write the maths for one item and let this
        function vmap it.
      l2_clip_norm: clip norm C > 0 applied to each unit's whole gradient (all
        parameters as one vector).
      microbatch_size: units processed at once (``lax.scan`` over chunks bounds memory);
        must divide the number of units of the batches it is called on. ``None``: all
        units at once.
      uses_key: whether the loss takes a PRNG key; each unit then gets ``split(key,
        units)[u]`` and each item a split of that, so results do not depend on
        ``microbatch_size``.
      method: ``"vmap"`` (materialises per-unit gradients; the reference) or ``"ghost"``
        (ghost norms).

    Returns:
      A :class:`ClippedSumFn`: ``fn(params, batch, mask, key=None) -> (clipped_sum,
      ClipMetrics)`` where ``batch`` leaves are ``[units, items, ...]`` and ``mask`` is
      ``[units, items]`` bool.

    Raises:
      ValueError: for a non-positive or non-finite clip norm, a microbatch size < 1, or
        an unknown method.

    Example:
      >>> import jax.numpy as jnp
      >>> loss = lambda w, x: jnp.sum(w * x)  # gradient of one item is x itself
      >>> fn = clipped_grad(loss, l2_clip_norm=1.0)
      >>> batch = jnp.array([[[10.0, 0.0]], [[0.0, 10.0]]])  # 2 units x 1 item x 2 dims
      >>> total, _ = fn(jnp.zeros(2), batch, jnp.ones((2, 1), bool))
      >>> total.tolist()
      [1.0, 1.0]
    """
    norms = _check_clip_norms(l2_clip_norm)
    if len(norms) != 1:
        raise ValueError(
            "clipped_grad clips a gradient as one block: give one l2_clip_norm."
        )
    _check_common(microbatch_size, method)
    return ClippedSumFn(
        per_item_fn=per_item_loss,
        l2_clip_norms=norms,
        kind="grad",
        microbatch_size=microbatch_size,
        uses_key=uses_key,
        method=method,
    )


def clipped_sum(
    per_item_fn: PerItemFn,
    *,
    l2_clip_norm: float | tuple[float, ...],
    microbatch_size: int | None = None,
    uses_key: bool = False,
) -> ClippedSumFn:
    """Builds the per-unit clipped sum of any per-item function of the parameters.

    A unit's contribution is ``sum_j mask[u, j] * per_item_fn(params, batch[u, j])``; it
    is clipped to ``l2_clip_norm`` and summed over units. With several clip norms,
    ``per_item_fn`` returns a tuple of that many blocks and each block is clipped to its
    own norm (GTD2's primal and dual directions, say), so block i of the sum has
    sensitivity C_i (2 C_i under replace-one).

    Args:
      per_item_fn: ``fn(params, item) -> pytree`` (or a tuple of k pytrees), or
        ``fn(params, item, key)`` when ``uses_key``.
      l2_clip_norm: C > 0, or a tuple of k clip norms, one per block.
      microbatch_size: units per ``lax.scan`` chunk (None: all at once).
      uses_key: whether ``per_item_fn`` takes a PRNG key.

    Returns:
      A :class:`ClippedSumFn` (vmap path; ghost norms apply to gradients only).

    Example:
      >>> import jax.numpy as jnp
      >>> fn = clipped_sum(lambda w, x: (x, 2 * x), l2_clip_norm=(1.0, 1.0))
      >>> batch = jnp.array([[[3.0, 4.0]]])  # 1 unit x 1 item x 2 dims
      >>> (a, b), _ = fn(None, batch, jnp.ones((1, 1), bool))
      >>> [round(v, 3) for v in a.tolist() + b.tolist()]
      [0.6, 0.8, 0.6, 0.8]
    """
    norms = _check_clip_norms(l2_clip_norm)
    _check_common(microbatch_size, "vmap")
    return ClippedSumFn(
        per_item_fn=per_item_fn,
        l2_clip_norms=norms,
        kind="value",
        microbatch_size=microbatch_size,
        uses_key=uses_key,
        method="vmap",
    )
