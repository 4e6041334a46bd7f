"""Noise is added once, with std sigma*C on the sum, and normalised by the expected
batch size."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats

from privrl_jax.privacy import DPTrainState
from privrl_jax.privacy._aggregation import (
    add_gaussian_noise,
    dp_aggregator,
    dpsgd,
    make_dp_step,
)
from privrl_jax.privacy._clipping import clipped_grad

D = 1_000_000


def _noise_of(tx, n=D, leaves=1):
    zeros = {f"w{i}": jnp.zeros(n // leaves) for i in range(leaves)}
    state = tx.init(zeros)
    out, state = tx.update(zeros, state)
    return np.concatenate(
        [np.asarray(v) for v in jax.tree_util.tree_leaves(out)]
    ), state


def test_noise_std_is_sigma_c_on_the_sum():
    sigma, c = 1.3, 0.7
    noise, _ = _noise_of(add_gaussian_noise(sigma, c, jax.random.key(0)))
    rel = abs(noise.std() / (sigma * c) - 1)
    assert rel < 6 / np.sqrt(2 * D)  # 6-sigma bound on the sample std's relative error


def test_aggregator_divides_by_expected_batch_size():
    sigma, c, b = 2.0, 1.5, 64.0
    noise, _ = _noise_of(
        dp_aggregator(
            noise_multiplier=sigma,
            l2_clip_norm=c,
            expected_batch_size=b,
            key=jax.random.key(1),
        )
    )
    assert abs(noise.std() / (sigma * c / b) - 1) < 6 / np.sqrt(2 * D)


@pytest.mark.parametrize("key", [0, 1, 2])
def test_ks_accepts_sigma_c_rejects_wrong_scales(key):
    sigma, c = 1.0, 2.0
    noise, _ = _noise_of(add_gaussian_noise(sigma, c, jax.random.key(key)), n=20_000)
    std = sigma * c
    assert scipy.stats.kstest(noise, "norm", args=(0, std)).pvalue > 1e-3
    assert scipy.stats.kstest(noise, "norm", args=(0, 2 / 3 * std)).pvalue < 1e-6
    assert scipy.stats.kstest(noise, "norm", args=(0, 1.5 * std)).pvalue < 1e-6


def test_fresh_noise_each_release_and_each_leaf():
    tx = add_gaussian_noise(1.0, 1.0, jax.random.key(0))
    zeros = {"a": jnp.zeros(1000), "b": jnp.zeros(1000)}
    state = tx.init(zeros)
    n1, state = tx.update(zeros, state)
    n2, state = tx.update(zeros, state)
    assert int(state.count) == 2
    assert abs(np.corrcoef(n1["a"], n2["a"])[0, 1]) < 0.15
    assert abs(np.corrcoef(n1["a"], n1["b"])[0, 1]) < 0.15


def test_noise_in_float32_for_bf16_params():
    tx = add_gaussian_noise(1.0, 1.0, jax.random.key(0))
    zeros = jnp.zeros(100_000, jnp.bfloat16)
    out, _ = tx.update(zeros, tx.init(zeros))
    assert out.dtype == jnp.bfloat16
    assert abs(float(jnp.std(out.astype(jnp.float32))) - 1) < 0.02


def test_missing_key_is_an_error():
    with pytest.raises(ValueError, match="key"):
        add_gaussian_noise(1.0, 1.0, None)
    with pytest.raises(ValueError, match="expected_batch_size"):
        dp_aggregator(
            noise_multiplier=1.0,
            l2_clip_norm=1.0,
            expected_batch_size=0,
            key=jax.random.key(0),
        )


def test_accumulated_microbatches_equal_one_batch_with_one_noise_draw():
    """G microbatches accumulated then one noise draw == one batch of G*b
    (pitfall 8)."""
    loss = lambda w, x: 0.5 * jnp.sum((w - x) ** 2)  # noqa: E731
    clip = clipped_grad(loss, l2_clip_norm=1.0)
    tx = dpsgd(
        optax.sgd(0.1),
        noise_multiplier=1.0,
        l2_clip_norm=1.0,
        expected_batch_size=8.0,
        key=jax.random.key(5),
    )
    dp = make_dp_step(clip, tx)
    params = jnp.zeros(3)
    x = jax.random.normal(jax.random.key(0), (8, 1, 3)) * 3
    mask = jnp.ones((8, 1), bool)
    state = DPTrainState(params, tx.init(params))
    one, _ = jax.jit(dp.step)(state, x, mask)
    acc = jnp.zeros(3)
    for g in range(4):
        acc, _ = jax.jit(dp.accumulate)(
            acc, params, x[2 * g : 2 * g + 2], mask[2 * g : 2 * g + 2]
        )
    many = jax.jit(dp.apply)(state, acc)
    np.testing.assert_allclose(one.params, many.params, rtol=1e-6)
    # One release happened: the noise counter moved by exactly one.
    assert int(many.opt_state[0][0].count) == 1


def test_empty_batch_update_is_pure_noise():
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    clip = clipped_grad(loss, l2_clip_norm=1.0)
    tx = dpsgd(
        optax.sgd(1.0),
        noise_multiplier=1.0,
        l2_clip_norm=1.0,
        expected_batch_size=4.0,
        key=jax.random.key(9),
    )
    dp = make_dp_step(clip, tx)
    params = jnp.zeros(50_000)
    state = DPTrainState(params, tx.init(params))
    new, m = jax.jit(dp.step)(state, jnp.zeros((4, 1, 50_000)), jnp.zeros((4, 1), bool))
    assert int(m.num_units) == 0
    update = np.asarray(new.params)
    assert np.all(np.isfinite(update))
    assert abs(update.std() / 0.25 - 1) < 0.02  # sigma*C / (qN) = 1/4


@pytest.mark.parametrize("size", [1, 2, 7, 1000, 100_001])
def test_fast_normal_is_jax_normal_of_the_original_threefry_stream(size):
    """Same PRNG and transform as jax.random.normal, just the two-words-per-hash counter
    layout."""
    from privrl_jax.privacy._aggregation import standard_normal as _standard_normal_f32  # noqa: PLC0415

    key = jax.random.fold_in(jax.random.key(7), 3)
    got = np.asarray(jax.jit(_standard_normal_f32, static_argnums=1)(key, size))
    previous = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", False)
    try:
        want = np.asarray(jax.random.normal(key, (size,), jnp.float32))
    finally:
        jax.config.update("jax_threefry_partitionable", previous)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    # Another PRNG implementation falls back to jax.random.normal itself.
    rbg = jax.random.key(7, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(_standard_normal_f32(rbg, size)),
        np.asarray(jax.random.normal(rbg, (size,), jnp.float32)),
    )


def test_make_dp_step_refuses_an_optimizer_without_dp_noise():
    """``make_dp_step(clip, optax.adam(...))`` would train on the clipped sum with no
    noise."""
    loss = lambda w, x: 0.5 * jnp.sum((w - x) ** 2)  # noqa: E731
    clip = clipped_grad(loss, l2_clip_norm=1.0)
    params, x, mask = jnp.zeros(3), jnp.ones((4, 1, 3)), jnp.ones((4, 1), bool)
    for plain in (
        optax.adam(1e-3),
        optax.chain(optax.add_noise(1.0, 0.0, 0), optax.sgd(0.1)),
    ):
        state = DPTrainState(params, plain.init(params))
        with pytest.raises(ValueError, match="adds no DP noise"):
            jax.jit(make_dp_step(clip, plain).step)(state, x, mask)
    # The same step with the DP noise transform runs and moves the noise counter once.
    tx = dpsgd(
        optax.sgd(0.1),
        noise_multiplier=1.0,
        l2_clip_norm=1.0,
        expected_batch_size=4.0,
        key=jax.random.key(0),
    )
    new, _ = jax.jit(make_dp_step(clip, tx).step)(
        DPTrainState(params, tx.init(params)), x, mask
    )
    assert int(new.opt_state[0][0].count) == 1
