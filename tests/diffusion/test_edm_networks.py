"""ResidualMLP and random Fourier features."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import diffusion
from privrl_jax.diffusion._networks import RandomFourierFeatures


def _count(tree):
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def test_paper_scale_parameter_count():
    """Width 1024, depth 6, 130-dim input: ~6.6M parameters (PrivORL: "about 6M")."""
    d, dt, w, depth, f = 130, 128, 1024, 6, 16
    net = diffusion.ResidualMLP(width=w, depth=depth)
    shapes = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((d,)), jnp.zeros(()))
    expected = (
        (f + 1) * dt
        + dt  # Fourier -> dim_t
        + dt * dt
        + dt  # second time layer
        + d * dt
        + dt  # input projection
        + dt * w
        + w  # to width
        + depth * (w * w + w)  # residual blocks
        + w * d
        + d  # output
    )
    assert _count(shapes) == expected
    assert 6.0e6 < expected < 7.0e6


def test_fourier_features():
    emb = RandomFourierFeatures(dim=16, seed=3)
    c = jnp.linspace(-2.0, 2.0, 7)
    variables = emb.init(jax.random.key(0), c)
    assert _count(variables) == 0  # fixed frequencies: nothing for DP noise to perturb
    out = np.asarray(emb.apply(variables, c))
    assert out.shape == (7, 17)
    np.testing.assert_allclose(out[:, 0], c)
    np.testing.assert_allclose(out[:, 1:9] ** 2 + out[:, 9:] ** 2, 1.0, rtol=1e-5)
    # Same seed, same features; another seed, other features.
    again = RandomFourierFeatures(dim=16, seed=3).apply({}, c)
    other = RandomFourierFeatures(dim=16, seed=4).apply({}, c)
    np.testing.assert_array_equal(out, again)
    assert not np.allclose(out, other)


def test_outputs_are_per_example():
    """No cross-example op: a batch gives the same rows as examples one by one."""
    net = diffusion.ResidualMLP(width=32, depth=2, layer_norm=True)
    x = jax.random.normal(jax.random.key(0), (5, 4))
    c = jax.random.normal(jax.random.key(1), (5,))
    cond = jax.random.normal(jax.random.key(2), (5, 2))
    params = jax.jit(net.init)(jax.random.key(3), x, c, cond)
    apply = jax.jit(net.apply)
    batch = apply(params, x, c, cond)
    assert batch.shape == (5, 4)
    single = jax.jit(jax.vmap(net.apply, in_axes=(None, 0, 0, 0)))(params, x, c, cond)
    np.testing.assert_allclose(batch, single, rtol=1e-5, atol=1e-6)
    # The conditioning is used.
    assert not np.allclose(apply(params, x, c, cond + 1.0), batch)


def test_odd_fourier_dim_is_rejected():
    with pytest.raises(ValueError, match="even"):
        RandomFourierFeatures(dim=5).init(jax.random.key(0), jnp.zeros(()))
