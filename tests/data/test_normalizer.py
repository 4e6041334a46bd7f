"""Normalizer: closed-form statistics, masking, inverse."""

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
    np.testing.assert_allclose(n.mean, x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(n.std, x.std(0) + 1e-3, rtol=1e-5)
    z = n.normalize(x)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(n.denormalize(z), x, rtol=1e-5, atol=1e-5)


def test_constant_feature_is_safe_and_mask_ignores_padding():
    x = jnp.array([[[1.0, 3.0], [1.0, 5.0], [99.0, 99.0]]])  # [B=1, T=3, d=2]
    mask = jnp.array([[1.0, 1.0, 0.0]])
    n = data.fit_normalizer(x, mask=mask, eps=1e-3)
    np.testing.assert_allclose(n.mean, [1.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(n.std, [1e-3, 1.0 + 1e-3], rtol=1e-6)
    assert np.isfinite(n.normalize(x)).all()


def test_normalizer_is_a_jittable_pytree():
    n = data.fit_normalizer(jnp.arange(10.0).reshape(5, 2))
    out = jax.jit(lambda n, x: n.normalize(x))(n, jnp.ones((3, 2)))
    np.testing.assert_allclose(out, n.normalize(jnp.ones((3, 2))), rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="eps"):
        data.fit_normalizer(jnp.ones((3, 2)), eps=0.0)
    with pytest.raises(ValueError, match="mask shape"):
        data.fit_normalizer(jnp.ones((3, 2)), mask=jnp.ones(2))
    with pytest.raises(ValueError, match="no .*rows"):
        data.fit_normalizer(jnp.ones((3, 2)), mask=jnp.zeros(3))
