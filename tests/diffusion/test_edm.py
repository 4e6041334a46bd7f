"""EDM preconditioning, loss and sampler against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from privrl_jax import diffusion
from privrl_jax.diffusion._edm import (
    edm_loss_weight,
    edm_preconditioning,
    karras_sigmas,
    sample_training_sigma,
)

SIGMAS = np.array([1e-3, 0.05, 0.5, 1.0, 2.0, 10.0, 80.0])


def _zero_net(params, x, c_noise):
    del params, c_noise
    return jnp.zeros_like(x)


@pytest.fixture(scope="module")
def net_and_params():
    net = diffusion.ResidualMLP(width=32, depth=2)
    params = jax.jit(net.init)(jax.random.key(0), jnp.zeros((3,)), jnp.zeros(()))
    return net, params


@pytest.mark.parametrize("sigma_data", [0.5, 1.0, 2.0])
def test_preconditioning_matches_closed_form(sigma_data):
    pre = edm_preconditioning(SIGMAS, sigma_data)
    s, sd = SIGMAS.astype(np.float64), sigma_data
    np.testing.assert_allclose(pre.c_skip, sd**2 / (s**2 + sd**2), rtol=1e-6)
    np.testing.assert_allclose(pre.c_out, s * sd / np.sqrt(s**2 + sd**2), rtol=1e-6)
    np.testing.assert_allclose(pre.c_in, 1 / np.sqrt(s**2 + sd**2), rtol=1e-6)
    np.testing.assert_allclose(pre.c_noise, np.log(s) / 4, rtol=1e-6)
    # The loss weight is 1 / c_out^2 (EDM Sec. 5: unit effective weight).
    np.testing.assert_allclose(
        edm_loss_weight(SIGMAS, sigma_data),
        1 / (s * sd / np.sqrt(s**2 + sd**2)) ** 2,
        rtol=1e-5,
    )


def test_preconditioning_at_sigma_data():
    pre = edm_preconditioning(1.0, 1.0)
    assert float(pre.c_skip) == pytest.approx(0.5)
    assert float(pre.c_out) == pytest.approx(np.sqrt(0.5))
    assert float(pre.c_in) == pytest.approx(np.sqrt(0.5))
    assert float(pre.c_noise) == pytest.approx(0.0)


def test_denoiser_returns_input_as_sigma_goes_to_zero(net_and_params):
    net, params = net_and_params
    den = jax.jit(diffusion.EDMDenoiser(net.apply, sigma_data=1.0))
    x = jax.random.normal(jax.random.key(1), (5, 3))
    for sigma in (1e-3, 1e-5):
        out = den(params, x, sigma)
        # |D - x| <= (1 - c_skip)|x| + c_out |F| = O(sigma^2 + sigma).
        np.testing.assert_allclose(out, x, atol=20 * sigma)
    assert not np.allclose(den(params, x, 1.0), x, atol=1e-2)


def test_denoiser_at_large_sigma_is_scaled_network_output(net_and_params):
    net, params = net_and_params
    den = jax.jit(diffusion.EDMDenoiser(net.apply, sigma_data=0.5))
    x = jax.random.normal(jax.random.key(2), (4, 3))
    sigma = 1e4
    pre = edm_preconditioning(sigma, 0.5)
    raw = jax.jit(net.apply)(params, pre.c_in * x, jnp.full((4,), pre.c_noise))
    expected = pre.c_skip * x + pre.c_out * raw
    np.testing.assert_allclose(den(params, x, sigma), expected, rtol=1e-5, atol=1e-6)
    # Per-example sigma [B] gives the same as the scalar, row by row.
    np.testing.assert_allclose(
        den(params, x, jnp.full((4,), sigma)), expected, rtol=1e-5
    )


def test_edm_loss_at_closed_form_with_zero_network():
    """F = 0 gives D = c_skip (x + sigma n), so the loss is analytic."""
    den = diffusion.EDMDenoiser(_zero_net, sigma_data=1.0)
    x = np.array([0.3, -1.2, 2.0])
    noise = np.array([1.0, 0.5, -0.7])
    for sigma in (0.1, 1.0, 5.0):
        c_skip = 1 / (sigma**2 + 1)
        weight = (sigma**2 + 1) / sigma**2
        expected = weight * np.mean((c_skip * (x + sigma * noise) - x) ** 2)
        got = diffusion.edm_loss_at(
            den, None, jnp.asarray(x), sigma, jnp.asarray(noise)
        )
        assert float(got) == pytest.approx(expected, rel=1e-5)


def test_training_sigma_is_lognormal():
    sigma = sample_training_sigma(jax.random.key(0), (20000,))
    result = scipy.stats.kstest(np.log(np.asarray(sigma)), "norm", args=(-1.2, 1.2))
    assert result.pvalue > 0.01
    # And rejects a wrong P_mean.
    assert (
        scipy.stats.kstest(np.log(np.asarray(sigma)), "norm", args=(-1.0, 1.2)).pvalue
        < 1e-6
    )


def test_noise_multiplicity_keeps_mean_and_reduces_variance(net_and_params):
    net, params = net_and_params
    den = diffusion.EDMDenoiser(net.apply)
    x = jnp.array([0.5, -0.5, 1.0])
    keys = jax.random.split(jax.random.key(3), 4000)

    @jax.jit
    def losses_1_and_8(keys):
        def loss(k):
            return jax.vmap(
                lambda key: diffusion.edm_loss(den, params, x, key, num_noise=k)
            )(keys)

        return loss(1), loss(8)

    l1, l8 = map(np.asarray, losses_1_and_8(keys))
    # Same expectation (within 4 standard errors of the K=1 mean) ...
    assert abs(l1.mean() - l8.mean()) < 4 * l1.std() / np.sqrt(len(l1))
    # ... and variance reduced by about K (a factor >= 4 is asserted).
    assert l8.var() < l1.var() / 4


def test_edm_loss_is_one_example_and_vmaps_to_per_example_grads(net_and_params):
    net, params = net_and_params
    den = diffusion.EDMDenoiser(net.apply)
    xs = jax.random.normal(jax.random.key(4), (6, 3))
    keys = jax.random.split(jax.random.key(5), 6)
    grad_fn = jax.grad(lambda p, x, k: diffusion.edm_loss(den, p, x, k))
    grads = jax.jit(jax.vmap(grad_fn, in_axes=(None, 0, 0)))(params, xs, keys)
    g0 = jax.jit(grad_fn)(params, xs[0], keys[0])
    for leaf_batched, leaf_single in zip(jax.tree.leaves(grads), jax.tree.leaves(g0)):
        assert leaf_batched.shape[0] == 6
        np.testing.assert_allclose(leaf_batched[0], leaf_single, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="num_noise"):
        diffusion.edm_loss(den, params, xs[0], keys[0], num_noise=0)


def test_karras_sigmas():
    sig = np.asarray(karras_sigmas(16))
    assert sig.shape == (17,)
    assert sig[0] == pytest.approx(80.0, rel=1e-5)
    assert sig[-2] == pytest.approx(0.002, rel=1e-4)
    assert sig[-1] == 0.0
    assert np.all(np.diff(sig) < 0)
    # N = 3, rho = 1: linear spacing.
    np.testing.assert_allclose(
        karras_sigmas(3, sigma_min=1.0, sigma_max=3.0, rho=1.0), [3, 2, 1, 0]
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sigma_data": 0.0},
        {"sigma_min": 100.0},
        {"s_churn": -1.0},
        {"p_std": float("nan")},
    ],
)
def test_config_validation(kwargs):
    with pytest.raises(ValueError, match="EDMConfig"):
        diffusion.EDMConfig(**kwargs)


class GaussianDenoiser:
    """Exact E[x0 | x0 + s n], x0 ~ N(mu, cov): mu + cov (cov + s^2 I)^-1 (x - mu)."""

    def __init__(self, mu, cov):
        self.mu = jnp.asarray(mu)
        lam, u = np.linalg.eigh(np.asarray(cov))
        self.lam, self.u = jnp.asarray(lam), jnp.asarray(u)

    def __call__(self, params, x, sigma):
        del params
        sigma = jnp.broadcast_to(sigma, x.shape[:-1])[..., None]
        z = (x - self.mu) @ self.u
        return self.mu + (z * self.lam / (self.lam + sigma**2)) @ self.u.T


# Churn's bias on the variance shrinks with the number of steps (var ~1.09 at 32 steps,
# ~1.02 at 128 for unit data), so the stochastic sampler is tested at paper scale.
@pytest.mark.parametrize("s_churn,num_steps", [(0.0, 32), (40.0, 128)])
def test_sampler_with_exact_gaussian_denoiser_recovers_mean_and_cov(s_churn, num_steps):
    mu = np.array([1.0, -2.0, 0.5])
    a = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [-0.3, 0.2, 0.5]])
    cov = a @ a.T
    den = GaussianDenoiser(mu, cov)
    config = diffusion.EDMConfig(s_churn=s_churn)
    x = np.asarray(
        diffusion.edm_sample(
            jax.random.key(0),
            den,
            None,
            num_samples=8000,
            dim=3,
            num_steps=num_steps,
            config=config,
        )
    )
    assert x.shape == (8000, 3)
    # Standard errors: mean ~0.011, cov entries ~0.016; tolerances are ~5 SE.
    np.testing.assert_allclose(x.mean(0), mu, atol=0.06)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08)


def test_sampler_detects_a_wrong_denoiser():
    """Sanity check of the test above: a denoiser for the wrong covariance fails it."""
    mu, cov = np.zeros(2), np.eye(2)
    x = np.asarray(
        diffusion.edm_sample(
            jax.random.key(0),
            GaussianDenoiser(mu, 2.0 * cov),
            None,
            num_samples=4000,
            dim=2,
            num_steps=32,
            config=diffusion.EDMConfig(s_churn=0.0),
        )
    )
    assert np.all(np.abs(np.diag(np.cov(x.T)) - 2.0) < 0.15)
    assert not np.allclose(np.cov(x.T), cov, atol=0.08)


def test_sampler_is_reproducible_and_key_dependent():
    den = GaussianDenoiser(np.zeros(2), np.eye(2))
    kw = {"num_samples": 16, "dim": 2, "num_steps": 4}
    size_before = diffusion.edm_sample._cache_size()
    a = diffusion.edm_sample(jax.random.key(1), den, None, **kw)
    b = diffusion.edm_sample(jax.random.key(1), den, None, **kw)
    c = diffusion.edm_sample(jax.random.key(2), den, None, **kw)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # New keys do not retrace: one compilation for the three calls.
    assert diffusion.edm_sample._cache_size() == size_before + 1


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_samples": 0, "dim": 2, "num_steps": 4}, "num_samples"),
        ({"num_samples": 2, "dim": 0, "num_steps": 4}, "dim"),
        ({"num_samples": 2, "dim": 2, "num_steps": 0}, "num_steps"),
    ],
)
def test_sampler_validates_shapes(kwargs, match):
    den = GaussianDenoiser(np.zeros(2), np.eye(2))
    with pytest.raises(ValueError, match=match):
        diffusion.edm_sample(jax.random.key(0), den, None, **kwargs)


def test_equal_denoisers_share_a_compilation(net_and_params):
    net, _ = net_and_params
    assert diffusion.EDMDenoiser(net.apply) == diffusion.EDMDenoiser(net.apply)
    assert hash(diffusion.EDMDenoiser(net.apply)) == hash(
        diffusion.EDMDenoiser(net.apply)
    )


def test_edm_loss_is_the_mean_of_edm_loss_at_over_its_draws(net_and_params):
    # Reference: redraw the same (sigma, noise) pairs as edm_loss and average
    # edm_loss_at.
    net, params = net_and_params
    den = diffusion.EDMDenoiser(net.apply)
    x, key, k = jnp.array([0.3, -1.2, 0.7]), jax.random.key(11), 5
    key_sigma, key_noise = jax.random.split(key)
    sigmas = sample_training_sigma(key_sigma, (k,))
    noises = jax.random.normal(key_noise, (k, 3))
    ref = np.mean(
        [
            float(diffusion.edm_loss_at(den, params, x, s, n))
            for s, n in zip(sigmas, noises)
        ]
    )
    np.testing.assert_allclose(
        float(diffusion.edm_loss(den, params, x, key, num_noise=k)), ref, rtol=1e-5
    )
