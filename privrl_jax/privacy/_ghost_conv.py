"""The ghost rule of ``nn.Conv``: per-unit kernel-gradient norms from input patches.

A convolution is a dense layer applied at every output position ``p`` to the patch of
the input under the window at ``p``: with the patches ``P_u`` of unit u
(``[positions, C_in * prod(window)]``, one row per output position of every item) and
the gradient ``D_u`` at the layer's output (``[positions, C_out]``), the unit's kernel
gradient is ``P_u^T D_u`` (block-diagonal over feature groups). Its squared norm is
``sum_g <P_ug P_ug^T, D_ug D_ug^T>`` (Gram form, ``T^2 (K + O/G)`` flops per group) or
``sum_g ||P_ug^T D_ug||^2`` computed directly (``T K O/G``): the cheaper one is taken,
as for dense layers. The clipped sum is the convolution's own weight gradient
(``vjp`` of the same flax module without its bias) at the reweighted output gradients
``s_u D_u``, over all units at once: one contraction, as in a non-private step.

The patches come from :func:`jax.lax.conv_general_dilated_patches` with the module's
strides, padding and dilations; their feature axis is ordered channel-major
(``c * prod(window) + w``), so feature group ``g`` is the contiguous block ``g``.

References:
  Bu, Mao & Xu, "Scalable and efficient training of large convolutional neural
  networks with differential privacy", NeurIPS 2022, https://arxiv.org/abs/2205.10683
  Lee & Kifer, "Scaling up differentially private deep learning with fast per-example
  gradient clipping", PoPETs 2021, https://arxiv.org/abs/2009.03106
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.linen.linear import canonicalize_padding

_SPATIAL = "HWD"  # names of up to three spatial axes in the dimension-number strings


@dataclasses.dataclass(frozen=True)
class ConvGeometry:
    """What a ``nn.Conv`` call does to its input, read at trace time."""

    kernel_size: tuple[int, ...]
    strides: tuple[int, ...]
    padding: Any  # "SAME", "VALID" or a tuple of (low, high) pairs
    input_dilation: tuple[int, ...]
    kernel_dilation: tuple[int, ...]
    groups: int
    # The same module without bias, in at least float32, unbound: its vjp w.r.t. the
    # kernel is the clipped sum. Not part of equality (modules compare by fields).
    kernel_only: Any = dataclasses.field(compare=False, hash=False)


def geometry(module: nn.Module, x: jax.Array) -> ConvGeometry | None:
    """The geometry of a plain ``nn.Conv`` call on input ``x``, or None.

    None when the rule does not apply (a weight mask, a custom convolution or dtype
    promotion, circular, reflecting or causal padding, more than three spatial axes, no
    batch-free item).
    """
    if type(module) is not nn.Conv:
        return None
    if (
        module.mask is not None
        or module.conv_general_dilated is not None
        or module.conv_general_dilated_cls is not None
        or getattr(module, "promote_dtype", nn.dtypes.promote_dtype)
        is not nn.dtypes.promote_dtype
    ):
        return None
    size = module.kernel_size
    size = (size,) if isinstance(size, int) else tuple(size)
    n = len(size)
    if not 1 <= n <= len(_SPATIAL) or jnp.ndim(x) < n + 1:
        return None
    padding = canonicalize_padding(module.padding, n)
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            return None  # CIRCULAR / REFLECT / CAUSAL pad the input first: not here
    else:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)

    def each(v):
        v = 1 if v is None else v
        return (int(v),) * n if isinstance(v, int) else tuple(int(a) for a in v)

    kernel_only = module.clone(
        parent=None,
        use_bias=False,
        dtype=jnp.promote_types(module.dtype or x.dtype, jnp.float32),
    )
    return ConvGeometry(
        size,
        each(module.strides),
        padding,
        each(module.input_dilation),
        each(module.kernel_dilation),
        int(module.feature_group_count),
        kernel_only,
    )


def _specs(n: int) -> tuple[str, str, str]:
    s = _SPATIAL[:n]
    return "N" + s + "C", s + "IO", "N" + s + "C"


def patches(geo: ConvGeometry, x: jax.Array, units: int) -> jax.Array:
    """The input patches of every output position, ``[units, positions, C_in * K]``.

    Args:
      geo: the call's geometry.
      x: the call's inputs, ``[units, items, *batch_dims, *spatial, C_in]``.
      units: the leading axis size.

    Returns:
      float32 patches, channel-major along the last axis; positions run over items,
      batch dimensions and output positions.
    """
    n = len(geo.kernel_size)
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    x = x.reshape((-1,) + x.shape[x.ndim - n - 1 :])
    p = jax.lax.conv_general_dilated_patches(
        x,
        geo.kernel_size,
        geo.strides,
        geo.padding,
        lhs_dilation=geo.input_dilation,
        rhs_dilation=geo.kernel_dilation,
        dimension_numbers=_specs(n),
        # the patches are a copy, not a product: no reduced-precision passes
        precision=jax.lax.Precision.HIGHEST,
    )
    return p.reshape(units, -1, p.shape[-1])


def sq_norms(p: jax.Array, d: jax.Array, groups: int) -> jax.Array:
    """Per-unit ``sum_g ||P_ug^T D_ug||_F^2``, the cheaper of the Gram and direct forms.

    Args:
      p: [units, T, G * K] patches (group-major blocks along the last axis).
      d: [units, T, O] output gradients (channel ``g * O/G + o`` is in group g).
      groups: The number of feature groups G.

    Returns:
      [units] squared kernel-gradient norms.
    """
    u, t, gk = p.shape
    o = d.shape[-1]
    k, og = gk // groups, o // groups
    p = p.reshape(u, t, groups, k)
    d = d.reshape(u, t, groups, og)
    if t * (k + og) <= k * og:  # Gram form, T^2 (K + O/G) flops per unit and group
        gram_p = jnp.einsum("utgk,usgk->ugts", p, p)
        gram_d = jnp.einsum("utgo,usgo->ugts", d, d)
        return jnp.sum(gram_p * gram_d, axis=(1, 2, 3))
    g = jnp.einsum("utgk,utgo->ugko", p, d)  # direct, T K O/G flops per unit and group
    return jnp.sum(g**2, axis=(1, 2, 3))


def kernel_grad(
    geo: ConvGeometry, kernel: jax.Array, x: jax.Array, cotangent: jax.Array
) -> jax.Array:
    """``sum_u P_u^T (s_u D_u)``, in the kernel's layout.

    The convolution's weight gradient at the (reweighted) output gradients
    ``cotangent``.

    Args:
      geo: the call's geometry.
      kernel: the kernel (only its shape and dtype matter: the map is linear).
      x: the call's inputs, ``[units, items, ...]`` (dropped units zeroed).
      cotangent: ``[units, items, *out_shape]``, the reweighted output gradients.

    Returns:
      float32 array of the kernel's shape.
    """

    def conv(w):
        return geo.kernel_only.apply({"params": {"kernel": w}}, x)

    w = jnp.zeros(kernel.shape, jnp.promote_types(kernel.dtype, jnp.float32))
    out, vjp = jax.vjp(conv, w)
    return vjp(cotangent.astype(out.dtype))[0].astype(jnp.float32)


def num_groups(geo: ConvGeometry | None) -> int | None:
    """Feature groups of a conv call (None for other layers)."""
    return None if geo is None else geo.groups
