"""PrivORL-j's fragment transformer: shapes, padding masks, attention direction, loss,
sampler."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import diffusion
from privrl_jax.diffusion._edm import sample_training_sigma

SIZES = (2, 1, 1, 2, 1)  # s, a, r, s', d
D = sum(SIZES)
H = 4


def _net(causal=False):
    return diffusion.FragmentTransformer(
        SIZES, H, num_layers=1, num_heads=2, embed_dim=8, causal=causal
    )


@functools.cache
def _apply(causal=False):
    """One jitted apply per network, shared by the tests (compilation dominates their
    time)."""
    return jax.jit(_net(causal).apply)


@functools.cache
def _init(causal=False):
    return jax.jit(_net(causal).init)


def _inputs(seed=0, b=3):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(b, H * D)), jnp.float32)
    link = jnp.asarray(rng.normal(size=(b, D)), jnp.float32)
    has_link = jnp.array([True, False, True][:b])
    mask = jnp.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]][:b], bool)
    c = jnp.asarray(rng.normal(size=(b,)), jnp.float32)
    return x, c, link, has_link, mask


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_shape_token_count_and_zero_padding_outputs():
    net = _net()
    assert net.num_tokens == 5 * H + 6
    x, c, link, has, mask = _inputs()
    params = _init(net.causal)(jax.random.key(0), x, c, link, has, mask)
    out = _apply(net.causal)(params, x, c, link, has, mask)
    assert out.shape == x.shape
    per_step = np.asarray(out).reshape(3, H, D)
    assert np.all(per_step[~np.asarray(mask)] == 0.0)
    assert np.all(np.abs(per_step[np.asarray(mask)]).sum(-1) > 0)


@pytest.mark.parametrize("causal", [False, True])
def test_padded_token_does_not_change_real_predictions(causal):
    net = _net(causal)
    x, c, link, has, mask = _inputs()
    params = _init(net.causal)(jax.random.key(0), x, c, link, has, mask)
    out = np.asarray(_apply(net.causal)(params, x, c, link, has, mask)).reshape(3, H, D)
    # Change every padded step's values by a lot.
    pad = np.repeat(~np.asarray(mask), D, axis=1)
    x2 = jnp.where(pad, x + 100.0, x)
    out2 = np.asarray(_apply(net.causal)(params, x2, c, link, has, mask)).reshape(
        3, H, D
    )
    np.testing.assert_array_equal(out2, out)  # bitwise: the padded keys are masked out


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_padded_steps_get_no_gradient_and_loss_ignores_them():
    net = _net()
    den = diffusion.FragmentDenoiser(net.apply)
    x, c, link, has, mask = _inputs()
    params = _init(net.causal)(jax.random.key(0), x, c, link, has, mask)
    item = {"x": x[2], "link": link[2], "has_link": has[2], "step_mask": mask[2]}
    key = jax.random.key(5)

    def loss_x(xi):
        return diffusion.fragment_edm_loss(den, params, {**item, "x": xi}, key)

    g = np.asarray(jax.jit(jax.grad(loss_x))(item["x"])).reshape(H, D)
    assert np.all(g[1:] == 0.0) and np.any(g[0] != 0.0)
    # The parameter gradient is unchanged when the padded steps change.
    grad = jax.jit(jax.grad(lambda p, it: diffusion.fragment_edm_loss(den, p, it, key)))
    gp = grad(params, item)
    gp2 = grad(params, {**item, "x": item["x"].at[D:].set(7.0)})
    for a, b in zip(jax.tree_util.tree_leaves(gp), jax.tree_util.tree_leaves(gp2)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_loss_closed_form_with_a_zero_network():
    # F = 0 => D = c_skip (x + sigma n); loss = lambda(sigma) sum_real (D - x)^2 / (H
    # d).
    den = diffusion.FragmentDenoiser(lambda p, x, c, link, has, m: jnp.zeros_like(x))
    x, _, link, has, mask = _inputs()
    item = {"x": x[1], "link": link[1], "has_link": has[1], "step_mask": mask[1]}
    key = jax.random.key(3)
    loss = float(diffusion.fragment_edm_loss(den, None, item, key))
    ks, kn = jax.random.split(key)
    sigma = float(sample_training_sigma(ks, ()))
    n = np.asarray(jax.random.normal(kn, (H * D,)))
    c_skip = 1.0 / (sigma**2 + 1.0)
    err = (c_skip * (np.asarray(x[1]) + sigma * n) - np.asarray(x[1])) ** 2
    expected = (sigma**2 + 1) / sigma**2 * err[: 2 * D].sum() / (H * D)
    np.testing.assert_allclose(loss, expected, rtol=1e-4)


def test_attention_direction():
    x, c, link, has, mask = _inputs()
    full = jnp.ones_like(mask)
    for causal, moves in ((False, True), (True, False)):
        net = _net(causal)
        params = _init(net.causal)(jax.random.key(1), x, c, link, has, full)
        out = np.asarray(_apply(net.causal)(params, x, c, link, has, full)).reshape(
            3, H, D
        )
        x2 = x.at[:, -D:].add(3.0)  # change the last step only
        out2 = np.asarray(_apply(net.causal)(params, x2, c, link, has, full)).reshape(
            3, H, D
        )
        # Bidirectional: step 0 sees the last step; causal: it does not.
        assert (np.abs(out2[:, 0] - out[:, 0]).max() > 1e-4) == moves


def test_link_and_no_link():
    net = _net()
    x, c, link, has, mask = _inputs()
    params = _init(net.causal)(jax.random.key(0), x, c, link, has, mask)
    out = _apply(net.causal)(params, x, c, link, has, mask)
    out2 = _apply(net.causal)(params, x, c, link + 1.0, has, mask)
    diff = np.abs(np.asarray(out2 - out)).max(-1)
    assert diff[1] == 0.0  # has_link False: the link's value is ignored
    assert diff[0] > 1e-4 and diff[2] > 1e-4


def test_sampler_shape_and_determinism():
    net = _net()
    den = diffusion.FragmentDenoiser(net.apply)
    x, c, link, has, mask = _inputs()
    params = _init(net.causal)(jax.random.key(0), x, c, link, has, mask)
    a = diffusion.sample_fragments(
        jax.random.key(2), den, params, link, has, horizon=H, num_steps=3
    )
    b = diffusion.sample_fragments(
        jax.random.key(2), den, params, link, has, horizon=H, num_steps=3
    )
    assert a.shape == (3, H * D) and np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # the U-Net is an ablation baseline; ~13 s of compiling
def test_unet_baseline_shape_and_padding():
    net = diffusion.FragmentUNet(D, H, channels=4, embed_dim=8)
    x, c, link, has, mask = _inputs()
    params = jax.jit(net.init)(jax.random.key(0), x, c, link, has, mask)
    apply = jax.jit(net.apply)
    out = np.asarray(apply(params, x, c, link, has, mask)).reshape(3, H, D)
    assert np.all(out[~np.asarray(mask)] == 0.0)
    pad = np.repeat(~np.asarray(mask), D, axis=1)
    out2 = np.asarray(
        apply(params, jnp.where(pad, x + 100.0, x), c, link, has, mask)
    ).reshape(3, H, D)
    np.testing.assert_array_equal(out2, out)
    out3 = np.asarray(apply(params, x, c, link + 1.0, has, mask)).reshape(3, H, D)
    assert (
        np.abs(out3[1] - out[1]).max() == 0.0 and np.abs(out3[0] - out[0]).max() > 1e-5
    )
