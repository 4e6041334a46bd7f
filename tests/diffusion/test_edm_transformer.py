"""Conditional diffusion transformer for trajectory fragments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.diffusion._transformer import DiffusionTransformer

SIZES = (2, 1, 1, 2, 1)  # s, a, r, s', d
H = 3
T_DIM = sum(SIZES)


@pytest.fixture(scope="module")
def model_and_params():
    net = DiffusionTransformer(
        component_sizes=SIZES, horizon=H, num_layers=1, num_heads=2, embed_dim=16
    )
    params = jax.jit(net.init)(
        jax.random.key(0), jnp.zeros((H * T_DIM,)), jnp.zeros(()), jnp.zeros((T_DIM,))
    )
    return net, params


def test_sequence_length_and_per_example_outputs(model_and_params):
    net, params = model_and_params
    # 5 tokens per transition, 5 for the link transition, 1 for the noise level.
    assert params["params"]["pos_embed"].shape == (5 * H + 6, 16)
    x = jax.random.normal(jax.random.key(1), (4, H * T_DIM))
    c = jax.random.normal(jax.random.key(2), (4,))
    cond = jax.random.normal(jax.random.key(3), (4, T_DIM))

    @jax.jit
    def outputs(x, c, cond):
        batched = net.apply(params, x, c, cond)
        single = jax.vmap(net.apply, in_axes=(None, 0, 0, 0))(params, x, c, cond)
        no_cond = net.apply(params, x, c)
        zero_cond = net.apply(params, x, c, jnp.zeros_like(cond))
        other_cond = net.apply(params, x, c, cond + 1.0)
        return batched, single, no_cond, zero_cond, other_cond

    batched, single, no_cond, zero_cond, other_cond = outputs(x, c, cond)
    assert batched.shape == (4, H * T_DIM)
    np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(no_cond, zero_cond, rtol=1e-6)
    assert not np.allclose(other_cond, batched)


def test_paper_scale_shape_and_validation():
    net = DiffusionTransformer(
        component_sizes=(4, 2, 1, 4, 1), horizon=32, num_layers=6, num_heads=4
    )
    shapes = jax.eval_shape(
        net.init, jax.random.key(0), jnp.zeros((32 * 12,)), jnp.zeros(()), None
    )
    n_params = sum(int(np.prod(s.shape)) for s in jax.tree.leaves(shapes))
    # 6 blocks of 12 E^2 + 13 E weights dominate (E = 128): ~1.2M parameters.
    assert 1.1e6 < n_params < 1.4e6
    with pytest.raises(ValueError, match="horizon"):
        net.init(jax.random.key(0), jnp.zeros((10,)), jnp.zeros(()))
    bad = DiffusionTransformer(
        component_sizes=(1,), horizon=1, num_heads=3, embed_dim=16
    )
    with pytest.raises(ValueError, match="divisible"):
        bad.init(jax.random.key(0), jnp.zeros((1,)), jnp.zeros(()))
