"""Ghost clipping of ``nn.Conv`` equals the per-unit vmap reference.

1-D and 2-D, strides, padding, dilations, feature groups, items with batch axes, both
norm forms, fallbacks."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.privacy import _ghost_conv, ghost_coverage
from privrl_jax.privacy._clip_core import clip_unit_grads
from privrl_jax.privacy._ghost import ghost_clipped_grad_sum

# These tests build fallback leaves on purpose; the one-line fallback warning itself is
# asserted where it is tested (pytest.warns records it whatever this filter says).
pytestmark = pytest.mark.filterwarnings("ignore:ghost clipping:UserWarning")

RTOL = 2e-5  # float32; the paths sum in different orders


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


class Conv2D(nn.Module):
    """Stride 2 SAME, then grouped (4 groups) with explicit uneven padding and kernel
    dilation, then input dilation (a transposed convolution) without bias."""

    @nn.compact
    def __call__(self, x):
        h = nn.relu(nn.Conv(8, (3, 3), strides=2, padding="SAME")(x))
        h = nn.Conv(
            8,
            (3, 2),
            padding=((1, 0), (2, 1)),
            feature_group_count=4,
            kernel_dilation=(1, 2),
        )(h)
        h = nn.Conv(6, (2, 2), padding=((0, 1), (1, 0)), input_dilation=2)(nn.tanh(h))
        return nn.Dense(1)(h.reshape(-1))


class Conv1D(nn.Module):
    """1-D over items that hold a batch of 2 sequences: stride 2, then 2 groups with
    integer padding and no bias."""

    @nn.compact
    def __call__(self, x):
        h = nn.Conv(4, 3, strides=2)(x)
        h = nn.Conv(4, 5, padding=1, feature_group_count=2, use_bias=False)(nn.tanh(h))
        return jnp.mean(h, axis=(-2, -1))


class Wide(nn.Module):
    """Few positions and many channels: the Gram form of the norm (T^2 (K + O) < T K O),
    one kernel called twice (its positions are stacked)."""

    @nn.compact
    def __call__(self, x):
        conv = nn.Conv(32, 3, padding="VALID")
        h = conv(x)
        return jnp.sum(conv(nn.tanh(h[..., :1, :].repeat(3, -2)[..., :16])) ** 2)


CASES = {
    "2d_stride_groups_dilation": (Conv2D(), (7, 9, 4)),
    "1d_item_batch_groups": (Conv1D(), (2, 12, 2)),
    "gram_form_shared_kernel": (Wide(), (3, 16)),
}


def _problem(name):
    model, shape = CASES[name]
    units, items = 5, 2
    batch = {"x": _normal(0, (units, items) + shape), "y": _normal(1, (units, items))}
    mask = jnp.asarray(
        np.array([[1, 1], [0, 0], [1, 0], [1, 1], [0, 1]], bool)
    )  # unit 1 is padding
    params = jax.jit(model.init)(jax.random.key(1), batch["x"][0, 0])

    def loss(p, item):
        return jnp.mean((model.apply(p, item["x"]) - item["y"]) ** 2)

    return loss, params, batch, mask


def _reference(loss, params, batch, mask, clip):
    """Per-unit gradients by vmap(grad), clipped and summed (independent of ghost)."""

    def unit_loss(p, items, m):
        losses = jax.vmap(loss, in_axes=(None, 0))(p, items)
        return jnp.sum(jnp.where(m, losses, 0.0))

    grads = jax.vmap(jax.grad(unit_loss), in_axes=(None, 0, 0))(params, batch, mask)
    return clip_unit_grads(grads, jnp.any(mask, axis=1), clip), grads


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_matches_per_unit_vmap(name):
    loss, params, batch, mask = _problem(name)
    coverage = ghost_coverage(loss, params, jax.tree.map(lambda a: a[0, 0], batch))
    assert all(how.startswith("ghost") for how in coverage.values()), coverage
    ghost = jax.jit(
        lambda c: ghost_clipped_grad_sum(
            loss, params, batch, mask, None, l2_clip_norm=c, uses_key=False
        )
    )
    reference = jax.jit(lambda c: _reference(loss, params, batch, mask, c))
    for clip in (0.05, 1e6):  # every present unit clipped; none clipped
        (g_ref, m_ref), grads = jax.device_get(reference(np.float32(clip)))
        g, m = jax.device_get(ghost(np.float32(clip)))
        scale = max(float(np.max(np.abs(x))) for x in jax.tree.leaves(g_ref))
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * scale),
            g_ref,
            g,
        )
        norms = np.sqrt(
            sum(
                np.sum(np.asarray(x, np.float64).reshape(5, -1) ** 2, axis=1)
                for x in jax.tree.leaves(grads)
            )
        )
        np.testing.assert_allclose(m.per_unit_norms, norms, rtol=RTOL, atol=1e-6)
        assert m.per_unit_norms[1] == 0.0 and int(m.num_units) == 4
        np.testing.assert_allclose(m.clipped_fraction, m_ref.clipped_fraction)


def test_both_norm_forms_equal_the_materialised_kernel_gradient():
    """sq_norms's Gram and direct forms against ||P_g^T D_g||^2 in float64, groups 2."""
    rng = np.random.default_rng(3)
    for t, k, o in ((2, 12, 16), (40, 6, 4)):  # Gram is cheaper first, direct second
        p = rng.normal(size=(3, t, 2 * k))
        d = rng.normal(size=(3, t, 2 * o))
        expected = sum(
            np.sum(
                np.einsum(
                    "utk,uto->uko",
                    p[..., g * k : (g + 1) * k],
                    d[..., g * o : (g + 1) * o],
                )
                ** 2,
                axis=(1, 2),
            )
            for g in range(2)
        )
        got = _ghost_conv.sq_norms(
            jnp.asarray(p, jnp.float32), jnp.asarray(d, jnp.float32), 2
        )
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_unsupported_conv_forms_take_the_exact_fallback():
    """Circular padding and a weight mask are not the patch rule: exact per-unit
    gradients, still equal to the reference."""

    class Odd(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Conv(3, 3, padding="CIRCULAR")(x)
            mask = jnp.tril(jnp.ones((3, 3, 3)))
            return jnp.sum(nn.Conv(3, 3, mask=mask)(h) ** 2)

    model = Odd()
    batch = {"x": _normal(5, (4, 1, 6, 3))}
    mask = jnp.ones((4, 1), bool)
    params = jax.jit(model.init)(jax.random.key(2), batch["x"][0, 0])
    loss = lambda p, item: model.apply(p, item["x"])  # noqa: E731
    coverage = ghost_coverage(loss, params, jax.tree.map(lambda a: a[0, 0], batch))
    assert all(how.startswith("fallback") for how in coverage.values()), coverage
    g, _ = ghost_clipped_grad_sum(
        loss, params, batch, mask, None, l2_clip_norm=1.0, uses_key=False
    )
    (g_ref, _), _ = _reference(loss, params, batch, mask, 1.0)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(b, a, rtol=RTOL, atol=1e-6), g_ref, g
    )
