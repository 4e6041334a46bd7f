"""Ghost-norm clipping: per-unit clipped gradient sums without per-unit gradients.

``clipped_grad(..., method="ghost")`` dispatches each microbatch to
:func:`ghost_clipped_grad_sum`, which returns exactly what the reference ``vmap(grad)``
path returns (the clipped sum over units and :class:`ClipMetrics`) but never
materialises one gradient per unit for the layers it understands.

How it works, for a flax linen model called inside ``per_item_loss``:

1. **Discover** (trace only): run the loss under ``nn.intercept_methods`` and record
   every call of an ``nn.Dense``, ``nn.DenseGeneral``, ``nn.Embed``, ``nn.LayerNorm``
   or ``nn.Conv``,
   and which ``params`` leaf is its kernel/bias/embedding/scale (by object identity
   inside the trace). A leaf is *ghost-covered* when every call that uses it is one of
   these layers, in one role.
2. **Prove coverage** (trace only): forward-mode dependency analysis of the loss's jaxpr
   with the outputs of the covered calls under ``stop_gradient`` (their inputs' paths
   kept). A covered leaf that still reaches the loss is used somewhere else too (weight
   tying into custom code, also when that code feeds another layer's input, a
   regulariser, ...) and is demoted to the exact fallback. Leaves that never reach the
   loss get an exact zero gradient.
3. **One backward pass**: a zero perturbation is added to each covered call's output;
   ``vmap`` over units of ``grad`` w.r.t. (perturbations, fallback leaves) gives, per
   unit, every layer's output gradient ``D`` and the exact per-unit gradients of the
   fallback leaves (custom params...), while the layers' inputs ``A`` are auxiliary
   outputs. A LayerNorm instead runs with a zero perturbation added to its scale and
   bias per item, whose gradients are the item's scale and bias gradients. With one
   item per unit the item's loss is called directly (no inner ``vmap`` over items),
   so the activations are ``[units, ...]`` as in a plain gradient.
4. **Norms**: for a dense layer the unit's kernel gradient is ``A_u^T D_u`` summed over
   the unit's positions ``t`` (items x sequence positions), so
   ``||g_u||^2 = <A_u A_u^T, D_u D_u^T>`` (Gram form, cost ``T^2 (d_in + d_out)``) or
   ``||A_u^T D_u||^2`` computed directly (cost ``T d_in d_out``), the cheaper one per
   layer; with one position this is ``||a||^2 ||d||^2``. The bias gradient is
   ``sum_t D_ut``; an embedding's is a scatter-add of ``D_ut`` into rows ``idx_ut``,
   whose Gram form is ``sum_{t,s} [idx_t = idx_s] <D_t, D_s>``. A LayerNorm's scale
   gradient is ``sum_t x_hat_ut * D_ut`` (one vector of the scale's size per unit,
   summed by the backward pass from the forward's ``x_hat``) and its bias's
   ``sum_t D_ut``; a LayerNorm whose feature axes are not the trailing ones, or whose
   statistics use a named axis, falls back. A convolution is the dense rule on its
   input patches (``_ghost_conv``: ``A_u`` = the patches of the unit's output
   positions, block-diagonal over feature groups); circular, reflecting or causal
   padding and weight masks fall back.
5. **Book-keeping** (Bu et al., 2023): the clipped sum of a kernel is ``A^T (s * D)``
   over all units at once, with the per-unit clip factor ``s_u = C / max(||g_u||, C)``;
   no second backward. A convolution's is its own weight gradient at ``s * D``.

Everything is a pure function of its inputs, so it works under ``jit``, ``vmap`` and
inside ``shard_map``/``pmap`` (it is called once per microbatch chunk).

Limits: what ghost norms cannot cover falls back, per parameter leaf, to exact per-unit
gradients (``vmap`` of ``grad``: the same result, slower), never to a wrong norm:

- a layer called inside a transform of its own (``nn.remat``, ``nn.jit`` /
  ``jax.jit``, ``nn.scan``, ``nn.vmap`` around it): its input cannot be handed out of
  that trace, so its parameters fall back (found at trace time, where its input
  belongs to another trace than the loss's);
- layers with a custom ``dot_general``, ``promote_dtype`` or
  ``DenseGeneral(batch_dims=...)``, and any other layer (``nn.Conv``...), are not
  intercepted; parameters outside a flax module, or also used outside their layer
  (tied weights), fall back too.

A run says once which layers fell back (a ``UserWarning`` naming them); call
:func:`ghost_coverage` to see every leaf's path beforehand. A model whose transform
still hides a layer's input from the capture raises a ``ValueError`` suggesting
``method="vmap"``.

References:
  Goodfellow, "Efficient per-example gradient computations", 2015,
  https://arxiv.org/abs/1510.01799
  Li et al., "Large language models can be strong differentially private learners",
  2022 (ghost clipping for sequences), https://arxiv.org/abs/2110.05679
  Bu et al., "Differentially private optimization on large model at small cost"
  (book-keeping), 2023, https://arxiv.org/abs/2210.00038
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any, cast

import flax.linen as nn
import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from privrl_jax.privacy import _ghost_conv
from privrl_jax.privacy._clip_core import ClipMetrics, clip_factors

PyTree = Any

_DENSE = "dense"
_EMBED = "embed"
_NORM = "norm"  # nn.LayerNorm: its scale takes the weight role
_CONV = "conv"  # nn.Conv: the dense rule on input patches (``_ghost_conv``)
_WEIGHT = "weight"
_BIAS = "bias"


@dataclasses.dataclass(frozen=True)
class _LayerCall:
    """One call of a supported layer, as seen for one item.

    Static trace-time information.
    """

    kind: str  # _DENSE, _EMBED or _NORM
    module: str  # module type and path, for messages: "Dense('Dense_0',)"
    weight: (
        int | None
    )  # params leaf index of the kernel / embedding, None if not a params leaf
    bias: (
        int | None
    )  # params leaf index of the bias, None if absent or not a params leaf
    in_shape: tuple[int, ...]  # per-item input shape
    out_shape: tuple[int, ...]  # per-item output shape
    out_dtype: Any
    contract: tuple[
        int, ...
    ]  # per-item input axes contracted with the kernel (dense only)
    num_features: int  # trailing output axes holding features (a norm's feature axes)
    num_embeddings: int  # embed only
    conv: _ghost_conv.ConvGeometry | None = None  # conv only


def _norm_features(module: nn.LayerNorm, ndim: int) -> int | None:
    """How many trailing axes a LayerNorm's scale and bias span, or None.

    None when its rule does not apply (feature axes not the trailing ones, statistics
    over a named axis, or no parameters).
    """
    if module.axis_name is not None or not (module.use_scale or module.use_bias):
        return None
    axes = sorted({a % ndim for a in np.atleast_1d(module.feature_axes).tolist()})
    if axes != list(range(ndim - len(axes), ndim)):
        return None
    return len(axes)


def _call_kind(
    module: nn.Module, method_name: str, args: tuple, kwargs: dict
) -> str | None:
    """Which supported layer this is, or None.

    Exact types only (a subclass may change the maths).
    """
    if method_name != "__call__":
        return None
    module_type = type(module)
    if module_type is nn.LayerNorm:
        x = _inputs(args, kwargs)
        if _norm_features(cast(nn.LayerNorm, module), jnp.ndim(x)) is None:
            return None
        return _NORM
    if module_type is nn.Conv:
        geo = _ghost_conv.geometry(module, _inputs(args, kwargs))
        return None if geo is None else _CONV
    if module_type not in (nn.Dense, nn.DenseGeneral, nn.Embed):
        return None
    if (
        getattr(module, "promote_dtype", nn.dtypes.promote_dtype)
        is not nn.dtypes.promote_dtype
    ):
        return None
    if module_type is nn.Embed:
        return _EMBED
    if (
        getattr(module, "dot_general", None) is not None
        or getattr(module, "dot_general_cls", None) is not None
    ):
        return None
    if module_type is nn.DenseGeneral and tuple(np.atleast_1d(module.batch_dims)):
        return None
    return _DENSE


def _variable(module: nn.Module, name: str) -> Any:
    if not module.has_variable("params", name):
        return None
    return nn.meta.unbox(module.get_variable("params", name))


def _inputs(args: tuple, kwargs: dict) -> jax.Array:
    if args:
        return args[0]
    return kwargs["inputs"] if "inputs" in kwargs else kwargs["x"]


def _stopped(out: jax.Array, args: tuple, kwargs: dict) -> jax.Array:
    """The call's output with its parameters' path cut but its inputs' path kept.

    For the dependency analysis only (trace, never evaluated): ``0 * sum(input)`` adds
    nothing but keeps, in the jaxpr, every float input's path to the output, so a
    covered leaf that also builds a layer's input by other code (a tied weight) is
    still seen to reach the loss outside its own layer, and falls back.
    """
    out = jax.lax.stop_gradient(out)
    live = [
        x
        for x in jax.tree_util.tree_leaves((args, kwargs))
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.inexact)
    ]
    if not live:
        return out
    zero = cast(jax.Array, sum(jnp.sum(x.astype(jnp.float32)) for x in live) * 0)
    return out + zero.astype(out.dtype)


class _Tracer:
    """Trace-time state shared by the interceptor and the function it instruments.

    ``mode`` is "discover" (record calls, leave outputs alone), "analyze"
    (``stop_gradient`` the outputs of ``active`` calls) or "capture" (add
    ``perturbations[k]`` to the outputs of ``active`` calls and keep their inputs).
    """

    def __init__(
        self, mode, *, leaf_ids=None, calls=None, active=(), perturbations=None
    ):
        self.mode = mode
        self.leaf_ids = leaf_ids or {}
        self.owners = {}  # leaf index -> innermost module that holds it (discover mode)
        self.calls = [] if calls is None else calls
        self.expected = calls
        self.active = frozenset(active)
        self.perturbations = perturbations or {}
        self.inputs = {}
        self.count = 0
        # discover mode: the trace the loss runs in. A call whose input belongs to
        # another (nn.scan / nn.vmap / nn.remat / jax.jit around the layer) cannot hand
        # its input out of that trace: its parameters take the exact fallback.
        self.outer_trace = None
        self.nested: list[str] = []
        self.passthrough = False  # inside a LayerNorm this tracer is re-running

    def __call__(self, next_fun, args, kwargs, context):
        if self.passthrough:
            return next_fun(*args, **kwargs)
        kind = _call_kind(context.module, context.method_name, args, kwargs)
        if self.mode == "discover":
            self._record_owner(context.module)
        if kind is None:
            return next_fun(*args, **kwargs)
        k = self.count
        self.count += 1
        module = context.module
        if self.mode == "discover":
            return self._discover(kind, module, next_fun, args, kwargs)
        if k >= len(self.expected) or self.expected[k].kind != kind:
            raise RuntimeError(
                "ghost clipping: the model called its layers in a different order than "
                "when it was "
                "first traced; per_item_loss must call the same layers for every item."
            )
        if k not in self.active:
            return next_fun(*args, **kwargs)
        if self.mode == "capture" and kind == _NORM:
            return self._perturbed_norm(module, self.perturbations[k], args, kwargs)
        out = next_fun(*args, **kwargs)
        if self.mode == "analyze":
            return _stopped(out, args, kwargs)
        self.inputs[k] = _inputs(args, kwargs)
        return out + self.perturbations[k]

    def _perturbed_norm(self, module, perturbation, args, kwargs):
        """The LayerNorm itself with a zero added to its scale and bias, per item.

        The gradients w.r.t. these zeros are the item's scale and bias gradients,
        ``sum_t x_hat_t * D_t`` and ``sum_t D_t``, formed by the backward pass from
        the forward's own ``x_hat``: nothing is recomputed (a parameter-free clone
        computing ``x_hat`` again cost a second set of statistics per norm).
        """
        params = {}
        if module.use_scale:
            params["scale"] = _variable(module, "scale") + perturbation[0]
        if module.use_bias:
            params["bias"] = _variable(module, "bias") + perturbation[1]
        self.passthrough = True  # the clone is this layer, not a new call
        try:
            return module.clone(parent=None).apply({"params": params}, *args, **kwargs)
        finally:
            self.passthrough = False

    def _record_owner(self, module):
        # Outer modules are intercepted first, so the innermost owner of a leaf is
        # written last.
        name = f"{type(module).__name__}{module.path}"
        for x in jax.tree_util.tree_leaves(
            nn.meta.unbox(module.variables.get("params", {}))
        ):
            if id(x) in self.leaf_ids:
                self.owners[self.leaf_ids[id(x)]] = name

    def _discover(self, kind, module, next_fun, args, kwargs):
        x = _inputs(args, kwargs)
        out = next_fun(*args, **kwargs)
        ids = self.leaf_ids
        name = f"{type(module).__name__}{module.path}"
        trace = getattr(x, "_trace", None)
        if trace is not None and trace is not self.outer_trace:
            self.nested.append(name)
            ids = {}  # no leaf of this call is ghost-covered
        if kind == _NORM:
            scale = (
                ids.get(id(_variable(module, "scale"))) if module.use_scale else None
            )
            bias = ids.get(id(_variable(module, "bias"))) if module.use_bias else None
            call = _LayerCall(
                _NORM,
                name,
                scale,
                bias,
                tuple(x.shape),
                tuple(out.shape),
                out.dtype,
                (),
                _norm_features(module, x.ndim),
                0,
            )
        elif kind == _CONV:
            weight = ids.get(id(_variable(module, "kernel")))
            bias = ids.get(id(_variable(module, "bias"))) if module.use_bias else None
            call = _LayerCall(
                _CONV,
                name,
                weight,
                bias,
                tuple(x.shape),
                tuple(out.shape),
                out.dtype,
                (),
                1,
                0,
                _ghost_conv.geometry(module, x),
            )
        elif kind == _EMBED:
            weight = ids.get(id(_variable(module, "embedding")))
            call = _LayerCall(
                _EMBED,
                name,
                weight,
                None,
                tuple(x.shape),
                tuple(out.shape),
                out.dtype,
                (),
                1,
                module.num_embeddings,
            )
        else:
            if type(module) is nn.Dense:
                contract, num_features = (x.ndim - 1,), 1
            else:
                axis = tuple(np.atleast_1d(module.axis).tolist())
                contract = tuple(a % x.ndim for a in axis)
                num_features = len(tuple(np.atleast_1d(module.features)))
            weight = ids.get(id(_variable(module, "kernel")))
            bias = ids.get(id(_variable(module, "bias"))) if module.use_bias else None
            call = _LayerCall(
                _DENSE,
                name,
                weight,
                bias,
                tuple(x.shape),
                tuple(out.shape),
                out.dtype,
                contract,
                num_features,
                0,
            )
        self.calls.append(call)
        return out


def _call_loss(per_item_loss, uses_key, params, item, key):
    return per_item_loss(params, item, key) if uses_key else per_item_loss(params, item)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What takes which path, decided at trace time from one item's trace."""

    calls: tuple[_LayerCall, ...]
    owners: dict  # leaf index -> name of the innermost module holding it
    ghost: dict  # leaf index -> (role, tuple of call indices)
    fallback: tuple[int, ...]  # leaf indices with exact per-unit gradients
    unused: tuple[int, ...]  # leaf indices the loss does not depend on: zero gradient
    active: frozenset  # call indices that need a perturbation
    nested: tuple[str, ...] = ()  # layers called inside a transform of their own


def _leaf_roles(calls):
    roles: dict[int, list] = {}
    for k, c in enumerate(calls):
        if c.weight is not None:
            # num_features fixes how a shared kernel is split into (d_in, d_out) for
            # every call.
            # A shared conv kernel also needs one feature-group split for every call.
            roles.setdefault(c.weight, []).append(
                ((c.kind, _WEIGHT, c.num_features, _ghost_conv.num_groups(c.conv)), k)
            )
        if c.bias is not None:
            roles.setdefault(c.bias, []).append(((c.kind, _BIAS), k))
    return roles


def _dependencies(closed_jaxpr, num_leading: int) -> set[int]:
    """Indices ``i >= num_leading`` of the jaxpr's inputs that its outputs depend on.

    Returned as i - lead.
    """

    def walk(jaxpr, in_deps):
        deps = {}
        for var, d in zip(jaxpr.invars, in_deps):
            deps[var] = d
        for eqn in jaxpr.eqns:
            ins = [
                deps.get(v, frozenset())
                if not isinstance(v, jex_core.Literal)
                else frozenset()
                for v in eqn.invars
            ]
            sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            sub = getattr(sub, "jaxpr", sub)
            if (
                isinstance(sub, jex_core.Jaxpr)
                and len(sub.invars) == len(ins)
                and len(sub.outvars) == len(eqn.outvars)
            ):
                outs = walk(sub, ins)
            else:
                # unknown structure (scan, cond, custom rules...):
                # every output sees every input
                union = frozenset().union(*ins)
                outs = [union] * len(eqn.outvars)
            for v, d in zip(eqn.outvars, outs):
                deps[v] = d
        return [
            deps.get(v, frozenset())
            if not isinstance(v, jex_core.Literal)
            else frozenset()
            for v in jaxpr.outvars
        ]

    jaxpr = closed_jaxpr.jaxpr
    n = len(jaxpr.invars)
    in_deps = [
        frozenset([i - num_leading]) if i >= num_leading else frozenset()
        for i in range(n)
    ]
    return set().union(*walk(jaxpr, in_deps))


def _plan(per_item_loss, uses_key, params, item, key) -> _Plan:
    """Discovers the supported layer calls.

    It also proves which leaves the ghost norms cover exactly.
    """
    leaves, treedef = jax.tree_util.tree_flatten(params)
    calls: list[_LayerCall] | tuple[_LayerCall, ...] = []
    owners: dict[int, str] = {}
    nested: list[str] = []

    def discover(leaves, item, key):
        tracer = _Tracer(
            "discover", leaf_ids={id(x): i for i, x in enumerate(leaves)}, calls=calls
        )
        tracer.owners = owners
        tracer.nested = nested
        # The loss's own trace, read off a traced input (eval_shape traces them all).
        tracer.outer_trace = next(
            (
                getattr(x, "_trace", None)
                for x in jax.tree_util.tree_leaves((leaves, item))
                if isinstance(x, jax.core.Tracer)
            ),
            None,
        )
        with nn.intercept_methods(tracer):
            return _call_loss(
                per_item_loss,
                uses_key,
                jax.tree_util.tree_unflatten(treedef, leaves),
                item,
                key,
            )

    out = jax.eval_shape(discover, leaves, item, key)
    if getattr(out, "shape", None) != ():
        raise ValueError(
            "per_item_loss must return a scalar; got shape "
            f"{getattr(out, 'shape', None)}."
        )
    calls = tuple(calls)
    roles = _leaf_roles(calls)
    inexact = [i for i, x in enumerate(leaves) if jnp.issubdtype(x.dtype, jnp.inexact)]
    covered = {
        i
        for i, r in roles.items()
        if len({role for role, _ in r}) == 1 and i in inexact
    }

    def dependencies(active):
        """Leaf indices whose tangent reaches the loss.

        Computed with the ``active`` calls' outputs stopped.
        """

        def tangent_out(leaves, tangents, item, key):
            def loss(floats):
                full = list(leaves)
                for i, x in zip(inexact, floats):
                    full[i] = x
                with nn.intercept_methods(
                    _Tracer("analyze", calls=calls, active=active)
                ):
                    return _call_loss(
                        per_item_loss,
                        uses_key,
                        jax.tree_util.tree_unflatten(treedef, full),
                        item,
                        key,
                    )

            return jax.jvp(loss, ([leaves[i] for i in inexact],), (tangents,))[1]

        tangents = [jnp.zeros(leaves[i].shape, leaves[i].dtype) for i in inexact]
        jaxpr = jax.make_jaxpr(tangent_out)(leaves, tangents, item, key)
        return {
            inexact[j] for j in _dependencies(jaxpr, len(leaves)) if j < len(inexact)
        }

    used = dependencies(frozenset())
    covered &= used
    # demoting a leaf can un-stop a call and expose another leaf: iterate to a fixpoint
    while True:
        active = frozenset(k for i in covered for _, k in roles[i])
        leaked = covered & dependencies(active)
        if not leaked:
            break
        covered -= leaked

    ghost = {
        i: (roles[i][0][0], tuple(k for _, k in roles[i])) for i in sorted(covered)
    }
    fallback = tuple(i for i in sorted(used) if i not in covered)
    unused = tuple(i for i in range(len(leaves)) if i not in used)
    return _Plan(calls, owners, ghost, fallback, unused, active, tuple(nested))


def _first_item(batch: PyTree, unit_keys: jax.Array | None, uses_key: bool):
    item = jax.tree_util.tree_map(lambda x: x[0, 0], batch)
    # The caller passes unit keys whenever ``uses_key``.
    key = jax.random.split(cast(jax.Array, unit_keys)[0], 1)[0] if uses_key else None
    return item, key


def _positions(call: _LayerCall, x: jax.Array, d: jax.Array):
    """Flattens one call's inputs and output gradients to ``[units, positions, dim]``.

    ``x``: [units, items, *in_shape], ``d``: [units, items, *out_shape]. For a dense
    layer the contracted input axes go last, in the kernel's order, so that ``A^T D``
    has the kernel's layout.
    """
    units = x.shape[0]
    d = d.reshape(
        units,
        -1,
        int(np.prod(call.out_shape[len(call.out_shape) - call.num_features :])),
    )
    if call.kind == _CONV:  # the input patches of every output position
        # A _CONV call always carries its geometry.
        return _ghost_conv.patches(
            cast(_ghost_conv.ConvGeometry, call.conv), x, units
        ), d
    if call.kind == _EMBED:
        idx = x.reshape(units, -1)
        idx = jnp.where(
            idx < 0, idx + call.num_embeddings, idx
        )  # jnp.take's negative indexing
        if call.num_embeddings == 1:  # Embed broadcasts its only row
            idx = jnp.zeros_like(idx)
        return idx, d
    free = [a for a in range(len(call.in_shape)) if a not in call.contract]
    x = jnp.transpose(
        x, (0, 1) + tuple(2 + a for a in free) + tuple(2 + a for a in call.contract)
    )
    d_in = int(np.prod([call.in_shape[a] for a in call.contract]))
    return x.reshape(units, -1, d_in), d


def _per_unit(v: jax.Array, ndim: int) -> jax.Array:
    """``v`` [units] shaped to broadcast against an array of ``ndim`` axes."""
    return v.reshape((-1,) + (1,) * (ndim - 1))


def _dense_sq_norms(a: jax.Array, d: jax.Array) -> jax.Array:
    """Per-unit ``||A_u^T D_u||_F^2`` for a: [U, T, d_in], d: [U, T, d_out].

    Computed in the cheapest form.
    """
    _, t, d_in = a.shape
    d_out = d.shape[-1]
    if t == 1:
        return jnp.sum(a[:, 0] ** 2, axis=-1) * jnp.sum(d[:, 0] ** 2, axis=-1)
    if (
        t * (d_in + d_out) <= d_in * d_out
    ):  # Gram form, T^2 (d_in + d_out) flops per unit
        gram_a = jnp.einsum("uti,usi->uts", a, a)
        gram_d = jnp.einsum("uto,uso->uts", d, d)
        return jnp.sum(gram_a * gram_d, axis=(1, 2))
    g = jnp.einsum("uti,uto->uio", a, d)  # direct, T d_in d_out flops per unit
    return jnp.sum(g**2, axis=(1, 2))


def _embed_sq_norms(idx: jax.Array, d: jax.Array, num_embeddings: int) -> jax.Array:
    """Per-unit squared norm of scatter-adding d: [U, T, f] into rows idx: [U, T]."""
    t, f = d.shape[1:]
    if t * (1 + f) <= num_embeddings * f:  # Gram form with the "same row" indicator
        same = (idx[:, :, None] == idx[:, None, :]).astype(d.dtype)
        return jnp.sum(same * jnp.einsum("uto,uso->uts", d, d), axis=(1, 2))
    one_hot = jax.nn.one_hot(idx, num_embeddings, dtype=d.dtype)
    return jnp.sum(jnp.einsum("utv,uto->uvo", one_hot, d) ** 2, axis=(1, 2))


def ghost_clipped_grad_sum(
    per_item_loss: Callable[..., jax.Array],
    params: PyTree,
    batch: PyTree,
    mask: jax.Array,
    unit_keys: jax.Array | None,
    *,
    l2_clip_norm: jax.typing.ArrayLike,
    uses_key: bool,
) -> tuple[PyTree, ClipMetrics]:
    """Clipped sum of per-unit gradients by ghost norms and book-keeping.

    One backward pass.

    Same contract as the reference ``vmap`` path of :class:`ClippedGradFn` for one
    microbatch: the gradient of unit u is that of ``sum_j mask[u, j] *
    per_item_loss(params, batch[u, j])``; it is scaled by ``C / max(||g_u||, C)`` and
    summed over units; padded units and units whose gradient is non-finite contribute
    exactly zero.

    Args:
      per_item_loss: ``loss(params, item) -> scalar`` or ``loss(params, item, key)``;
        the flax layers it calls inline are found by interception (see the module
        docstring).
      params: the parameter pytree.
      batch: pytree with leaves ``[units, items, ...]``.
      mask: [units, items] bool item mask.
      unit_keys: [units] PRNG keys when ``uses_key`` (item keys are ``split(unit_key,
        items)``, as in the reference path), else None.
      l2_clip_norm: the clip norm C > 0.
      uses_key: whether ``per_item_loss`` takes a key.

    Returns:
      ``(clipped_sum, metrics)`` like :func:`clip_unit_grads`: the clipped sum has the
      structure and dtypes of ``params``; ``metrics.per_unit_norms`` is each unit's
      full-gradient norm.

    Formal guarantees: every unit's contribution has global L2 norm <= C up to float
    rounding, because the norm that sets its scale is the exact norm of the very
    per-unit gradient that is summed (kernel gradients are ``A_u^T D_u`` in both);
    parameters the interception cannot account for exactly once use exact per-unit
    gradients. Matches ``method="vmap"`` to float32 rounding.
    """
    # Jitted with the loss as a static argument: called eagerly it compiles once instead
    # of dispatching op by op; under an outer jit/shard_map it is simply inlined.
    return _ghost_jit(
        per_item_loss, params, batch, mask, unit_keys, l2_clip_norm, uses_key
    )


@functools.partial(jax.jit, static_argnums=(0, 6))
def _ghost_jit(per_item_loss, params, batch, mask, unit_keys, l2_clip_norm, uses_key):
    return _ghost_clipped_grad_sum(
        per_item_loss,
        params,
        batch,
        mask,
        unit_keys,
        l2_clip_norm=l2_clip_norm,
        uses_key=uses_key,
    )


def _ghost_clipped_grad_sum(
    per_item_loss: Callable[..., jax.Array],
    params: PyTree,
    batch: PyTree,
    mask: jax.Array,
    unit_keys: jax.Array | None,
    *,
    l2_clip_norm: jax.typing.ArrayLike,
    uses_key: bool,
) -> tuple[PyTree, ClipMetrics]:
    leaves, treedef = jax.tree_util.tree_flatten(params)
    num_units, num_items = mask.shape
    mask = mask.astype(bool)
    item, key = _first_item(batch, unit_keys, uses_key)
    plan = _plan(per_item_loss, uses_key, params, item, key)
    _warn_fallback(plan, params)
    calls = plan.calls

    def item_loss(fallback_leaves, perturbations, item, key):
        full = list(leaves)
        for i, x in zip(plan.fallback, fallback_leaves):
            full[i] = x
        tracer = _Tracer(
            "capture", calls=calls, active=plan.active, perturbations=perturbations
        )
        with nn.intercept_methods(tracer):
            loss = _call_loss(
                per_item_loss,
                uses_key,
                jax.tree_util.tree_unflatten(treedef, full),
                item,
                key,
            )
        return loss, tracer.inputs

    def unit_loss(free, items, item_mask, key):
        fallback_leaves, perturbations = free
        if num_items == 1:
            # One item per unit (example-level DP): its loss is called directly, not
            # under an inner vmap, whose [units, 1, ...] activations would send XLA's
            # CPU reductions over features (LayerNorm's backward) down a rank-3 path
            # about 8x slower than a plain gradient's rank-2 one.
            first = functools.partial(jax.tree_util.tree_map, lambda x: x[0])
            item_key = jax.random.split(key, 1)[0] if uses_key else None
            loss, inputs = item_loss(
                fallback_leaves, first(perturbations), first(items), item_key
            )
            inputs = jax.tree_util.tree_map(lambda x: x[None], inputs)
            return jnp.where(item_mask[0], loss, 0.0), inputs
        if uses_key:
            item_keys = jax.random.split(key, num_items)
            losses, inputs = jax.vmap(item_loss, in_axes=(None, 0, 0, 0))(
                fallback_leaves, perturbations, items, item_keys
            )
        else:
            losses, inputs = jax.vmap(item_loss, in_axes=(None, 0, 0, None))(
                fallback_leaves, perturbations, items, None
            )
        return jnp.sum(jnp.where(item_mask, losses, 0.0)), inputs

    def perturbation(call):
        if call.kind != _NORM:
            return jnp.zeros((num_units, num_items) + call.out_shape, call.out_dtype)
        # A norm's: one zero scale and one zero bias per item, in the params' dtype.
        shape = (num_units, num_items) + call.out_shape[-call.num_features :]
        leaf = call.weight if call.weight is not None else call.bias
        dtype = leaves[leaf].dtype if leaf is not None else call.out_dtype
        return jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)

    perturbations = {k: perturbation(calls[k]) for k in sorted(plan.active)}
    fallback_leaves = [leaves[i] for i in plan.fallback]
    try:
        (fallback_grads, out_grads), inputs = jax.vmap(
            jax.grad(unit_loss, has_aux=True),
            in_axes=((None, 0), 0, 0, 0 if uses_key else None),
        )((fallback_leaves, perturbations), batch, mask, unit_keys)
    except jax.errors.UnexpectedTracerError as e:
        raise ValueError(
            "ghost clipping could not read a layer's inputs: per_item_loss seems to "
            "run its model "
            "inside a transform of its own (jax.jit, jax.vmap, lax.scan, nn.scan, "
            "nn.vmap, ...). "
            "Call the model inline in per_item_loss, or use method='vmap'."
        ) from e

    # Per-leaf positions, concatenated over the calls that share the leaf. A norm's
    # are its items, with the per-item scale and bias gradients.
    flat = {
        k: tuple(g.reshape(num_units, num_items, -1) for g in out_grads[k])
        if calls[k].kind == _NORM
        else _positions(calls[k], inputs[k], out_grads[k])
        for k in plan.active
    }

    def stacked(call_ids, j):
        parts = [flat[k][j] for k in call_ids]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)

    f32 = lambda x: x.astype(jnp.float32)  # noqa: E731
    sq = jnp.zeros((num_units,), jnp.float32)
    # A norm's per-unit scale and bias gradients, sum_t x_hat_t * D_t and sum_t D_t
    # summed over the unit's items: [units, features], the size of the parameter,
    # reused by the clipped sum (a product with the clip factors: no [units, features]
    # broadcast of them, no reduction over a scaled copy).
    norm_grads = {}
    for i, (role, call_ids) in plan.ghost.items():
        d = f32(stacked(call_ids, 1))
        if role[0] == _NORM:
            norm_grads[i] = jnp.sum(
                d if role[1] == _BIAS else f32(stacked(call_ids, 0)), axis=1
            )
            sq += jnp.sum(norm_grads[i] ** 2, axis=-1)
        elif role[1] == _BIAS:
            sq += jnp.sum(jnp.sum(d, axis=1) ** 2, axis=-1)
        elif role[0] == _EMBED:
            sq += _embed_sq_norms(
                stacked(call_ids, 0), d, calls[call_ids[0]].num_embeddings
            )
        elif role[0] == _CONV:
            sq += _ghost_conv.sq_norms(stacked(call_ids, 0), d, role[3])
        else:
            sq += _dense_sq_norms(f32(stacked(call_ids, 0)), d)
    for g in fallback_grads:
        sq += jnp.sum(f32(g).reshape(num_units, -1) ** 2, axis=1)

    norms = jnp.sqrt(sq)
    unit_mask = jnp.any(mask, axis=1)
    scale, keep, metrics = clip_factors(norms, unit_mask, l2_clip_norm)

    def kept(
        x,
    ):  # ``where`` (not multiply) so NaN/inf of dropped units cannot leak via 0 * inf
        return jnp.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), f32(x), 0.0)

    out = [jnp.zeros_like(x) for x in leaves]
    for i, (role, call_ids) in plan.ghost.items():
        if i in norm_grads:
            total = jnp.tensordot(scale, kept(norm_grads[i]), axes=1)
            out[i] = total.reshape(leaves[i].shape).astype(leaves[i].dtype)
            continue
        if role[0] == _CONV and role[1] == _WEIGHT:
            # The convolution's own weight gradient at s D, per call sharing the kernel.
            # ``call_ids`` is never empty, so the sum is an array.
            total = sum(  # type: ignore[assignment]
                _ghost_conv.kernel_grad(
                    calls[k].conv,
                    leaves[i],
                    kept(inputs[k]),
                    kept(out_grads[k]) * _per_unit(scale, out_grads[k].ndim),
                )
                for k in call_ids
            )
            out[i] = total.astype(leaves[i].dtype)
            continue
        d = kept(stacked(call_ids, 1)) * scale[:, None, None]
        if role[1] == _BIAS:
            total = jnp.sum(d, axis=(0, 1))
        elif role[0] == _EMBED:
            idx = stacked(call_ids, 0).reshape(-1)
            total = jnp.zeros((leaves[i].shape[0], d.shape[-1]), jnp.float32)
            total = total.at[idx].add(d.reshape(-1, d.shape[-1]))
        else:
            # A^T (s D) as one 2-D product contracting the leading axis, the form of a
            # non-private weight gradient: XLA's CPU backend then runs it on a
            # transposed operand in place, where the 3-D einsum first copied A^T.
            a = kept(stacked(call_ids, 0))
            total = jax.lax.dot_general(
                a.reshape(-1, a.shape[-1]),
                d.reshape(-1, d.shape[-1]),
                (((0,), (0,)), ((), ())),
            )
        out[i] = total.reshape(leaves[i].shape).astype(leaves[i].dtype)
    for i, g in zip(plan.fallback, fallback_grads):
        out[i] = jnp.tensordot(scale, kept(g), axes=1).astype(leaves[i].dtype)

    return jax.tree_util.tree_unflatten(treedef, out), metrics


# Fallback messages already given in this process: a run says each once.
_WARNED: set[str] = set()


def _fallback_owners(plan: _Plan) -> list[str]:
    names: list[str] = []
    for i in plan.fallback:
        name = plan.owners.get(i, "parameters used outside any flax module")
        if name not in names:
            names.append(name)
    return names


def _warn_fallback(plan: _Plan, params: PyTree) -> None:
    """Says once which parameters ghost clipping could not cover.

    Once per distinct set of layers; those compute with exact per-unit gradients:
    correct, but slower.
    """
    if not plan.fallback:
        return
    names = _fallback_owners(plan)
    msg = (
        f"ghost clipping: {len(plan.fallback)} parameter leaf/leaves of "
        f"{', '.join(names)} fall back to exact per-unit gradients (correct, slower)"
        + (
            f"; {', '.join(dict.fromkeys(plan.nested))} run inside a transform of "
            "their own (nn.scan / nn.vmap / nn.remat / jax.jit)"
            if plan.nested
            else ""
        )
        + ". privacy.ghost_coverage(...) lists every leaf's path."
    )
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)


def ghost_coverage(
    per_item_loss: Callable[..., jax.Array],
    params: PyTree,
    item: PyTree,
    key: jax.Array | None = None,
    *,
    uses_key: bool = False,
) -> dict[str, str]:
    """Says how ``method="ghost"`` computes each leaf's per-unit gradient norm.

    Traces ``per_item_loss`` once (nothing is computed) and reports, keyed by the leaf's
    path (``jax.tree_util.keystr``):

    - ``"ghost: <Layer>(<path>) <role>"``: from the layer's inputs and output gradients;
    - ``"fallback: <Module>(<path>)"``: exact per-unit gradients (vmap) for this leaf
      only, because no supported layer owns it (custom params) or it is also
      used outside its layer;
    - ``"unused"``: the loss does not depend on it; its gradient is exactly zero.

    Args:
      per_item_loss: as for :func:`clipped_grad`.
      params: the parameter pytree.
      item: one item (batch leaves without the [units, items] axes).
      key: a PRNG key when ``uses_key``.
      uses_key: whether ``per_item_loss`` takes a key.

    Returns:
      ``{leaf path: description}``, in leaf order.

    Example:
      >>> import flax.linen as nn, jax, jax.numpy as jnp
      >>> model = nn.Sequential([nn.Dense(4), nn.LayerNorm(), nn.Dense(1)])
      >>> params = model.init(jax.random.key(0), jnp.ones(3))
      >>> loss = lambda p, x: jnp.sum(model.apply(p, x) ** 2)
      >>> for path, how in ghost_coverage(loss, params, jnp.ones(3)).items():
      ...     print(path, "->", how)
      ['params']['layers_0']['bias'] -> ghost: Dense('layers_0',) bias
      ['params']['layers_0']['kernel'] -> ghost: Dense('layers_0',) kernel
      ['params']['layers_1']['bias'] -> ghost: LayerNorm('layers_1',) bias
      ['params']['layers_1']['scale'] -> ghost: LayerNorm('layers_1',) scale
      ['params']['layers_2']['bias'] -> ghost: Dense('layers_2',) bias
      ['params']['layers_2']['kernel'] -> ghost: Dense('layers_2',) kernel
    """
    if uses_key and key is None:
        raise ValueError(
            "uses_key=True but key=None; pass the PRNG key the loss would receive."
        )
    plan = _plan(per_item_loss, uses_key, params, item, key)
    report = {}
    for i, (path, _) in enumerate(jax.tree_util.tree_leaves_with_path(params)):
        if i in plan.ghost:
            role, call_ids = plan.ghost[i]
            call = plan.calls[call_ids[0]]
            what = (
                "bias"
                if role[1] == _BIAS
                else {_EMBED: "embedding", _NORM: "scale"}.get(call.kind, "kernel")
            )
            uses = f" (shared by {len(call_ids)} calls)" if len(call_ids) > 1 else ""
            how = f"ghost: {call.module} {what}{uses}"
        elif i in plan.fallback:
            how = f"fallback: {plan.owners.get(i, 'used outside any flax module')}"
            nested = [n for n in plan.nested if n == plan.owners.get(i)]
            if nested:
                how += " (inside nn.scan / nn.vmap / nn.remat / jax.jit)"
        else:
            how = "unused"
        report[jax.tree_util.keystr(path)] = how
    return report
