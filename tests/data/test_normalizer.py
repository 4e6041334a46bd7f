"""Normalizer: closed-form statistics, the std floor, masking, inverse, bounds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import data


def test_fit_matches_numpy_and_inverts():
    x = np.random.default_rng(0).normal(
        loc=[1.0, -2.0, 5.0], scale=[0.5, 2.0, 3.0], size=(500, 3)
    )
    n = data.fit_normalizer(x)
    np.testing.assert_allclose(n.shift, x.mean(0), rtol=1e-6)
    # Every std is far above the floor, so the scale is the std itself (no + eps).
    np.testing.assert_allclose(n.scale, x.std(0), rtol=1e-6)
    z = np.asarray(n.normalize(x))
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z.std(0), 1.0, rtol=1e-5)
    np.testing.assert_allclose(n.denormalize(z), x, rtol=1e-5, atol=1e-5)


def test_near_constant_features_get_the_floor_by_hand():
    # Columns: constant 4; std 5e-4 (below the floor 1e-3); std 2e-3 (above it).
    x = np.array([[4.0, 1.0, 0.0], [4.0, 1.001, 0.004]])
    n = data.fit_normalizer(x, min_scale=1e-3)
    # By hand: means (4, 1.0005, 0.002); population stds (0, 5e-4, 2e-3).
    np.testing.assert_allclose(n.shift, [4.0, 1.0005, 0.002], rtol=1e-6)
    np.testing.assert_allclose(n.scale, [1e-3, 1e-3, 2e-3], rtol=1e-5)
    # Off the constant by 0.01 lands at 0.01 / 1e-3 = 10, finite: no blow-up.
    np.testing.assert_allclose(
        n.normalize(jnp.array([[4.01, 1.0005, 0.004]])),
        [[10.0, 0.0, 1.0]],
        rtol=1e-4,
        atol=1e-3,
    )


def test_mask_ignores_padding_and_weights_rows():
    x = jnp.array([[[1.0, 3.0], [1.0, 5.0], [np.nan, 99.0]]])  # [B=1, T=3, d=2]
    mask = jnp.array([[1.0, 1.0, 0.0]])
    n = data.fit_normalizer(x, mask=mask)
    np.testing.assert_allclose(n.shift, [1.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(n.scale, [1e-3, 1.0], rtol=1e-6)
    # Weight 3 on the first row: mean 3.5, var (3 * 0.25 + 2.25) / 4 = 0.75.
    n = data.fit_normalizer(jnp.array([[3.0], [5.0]]), mask=jnp.array([3.0, 1.0]))
    np.testing.assert_allclose(n.shift, [3.5], rtol=1e-6)
    np.testing.assert_allclose(n.scale, [np.sqrt(0.75)], rtol=1e-6)


def test_identity_mask_leaves_features_untouched():
    x = np.array([[0.0, 10.0], [1.0, 30.0]])
    n = data.fit_normalizer(x, identity_mask=[True, False])
    np.testing.assert_array_equal(n.shift, [0.0, 20.0])
    np.testing.assert_array_equal(n.scale, [1.0, 10.0])
    ident = data.Normalizer.identity(3)
    np.testing.assert_array_equal(ident.normalize(jnp.arange(3.0)), [0.0, 1.0, 2.0])


def test_from_bounds_maps_onto_minus_one_one():
    n = data.normalizer_from_bounds([0.0, -2.0], [4.0, 2.0])
    x = jnp.array([[0.0, -2.0], [4.0, 2.0], [2.0, 0.0]])
    np.testing.assert_allclose(n.normalize(x), [[-1, -1], [1, 1], [0, 0]])
    np.testing.assert_allclose(n.denormalize(n.normalize(x)), x)


def test_normalizer_is_a_jittable_pytree():
    n = data.fit_normalizer(jnp.arange(10.0).reshape(5, 2))
    out = jax.jit(lambda n, x: n.normalize(x))(n, jnp.ones((3, 2)))
    np.testing.assert_allclose(out, n.normalize(jnp.ones((3, 2))), rtol=1e-6)
    assert n.shift.dtype == n.scale.dtype == jnp.float32


def test_errors():
    with pytest.raises(ValueError, match="min_scale"):
        data.fit_normalizer(jnp.ones((3, 2)), min_scale=0.0)
    with pytest.raises(ValueError, match="mask shape"):
        data.fit_normalizer(jnp.ones((3, 2)), mask=jnp.ones(2))
    with pytest.raises(ValueError, match="no .*rows"):
        data.fit_normalizer(jnp.ones((3, 2)), mask=jnp.zeros(3))
    with pytest.raises(ValueError, match=">= 0"):
        data.fit_normalizer(jnp.ones((3, 2)), mask=jnp.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="NaN"):
        data.fit_normalizer(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="identity_mask"):
        data.fit_normalizer(jnp.ones((3, 2)), identity_mask=[True])
    with pytest.raises(ValueError, match="high > low"):
        data.normalizer_from_bounds([0.0], [0.0])
