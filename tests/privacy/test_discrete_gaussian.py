"""The discrete Gaussian noise mode: its law (exact pmf vs samples, moments), the grid
rounding, the accounting it relies on, and the plan/fit path."""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats

from privrl_jax import privacy
from privrl_jax.privacy._discrete_gaussian import (
    DiscreteGaussianNoise,
    acceptance_probability,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    failure_probability,
    randomized_round,
    sample_discrete_gaussian,
)


def _chi_square_p(y: np.ndarray, s: float) -> float:
    # Bins of expected count >= 20, the two tails pooled into the end bins.
    lo, hi = int(np.floor(-8 * s)) - 1, int(np.ceil(8 * s)) + 1
    ks = np.arange(lo, hi + 1)
    p = discrete_gaussian_pmf(ks, s)
    n = y.size
    edges = [lo]
    acc = 0.0
    for k, pk in zip(ks, p):
        acc += pk
        if acc * n >= 20:
            edges.append(k + 1)
            acc = 0.0
    edges[-1] = hi + 1
    obs = np.histogram(np.clip(y, lo, hi), bins=np.asarray(edges) - 0.5)[0]
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    expected = np.diff(cdf[np.asarray(edges) - lo]) * n
    expected[0] += cdf[0]
    expected *= n / expected.sum()
    return float(scipy.stats.chisquare(obs, expected).pvalue)


# s traced: one compile for every scale
_sample = jax.jit(lambda key, s: sample_discrete_gaussian(key, 200_000, s))


@pytest.mark.parametrize("s", [1.0, 1.5, 3.7, 12.0, 250.5])
def test_samples_follow_the_exact_pmf(s):
    y, ok = _sample(jax.random.key(11), jnp.float32(s))
    y, ok = np.asarray(y), np.asarray(ok)
    assert ok.all()
    # Fixed key: the p-value is a number, and a wrong law (e.g. the proposal itself,
    # or a Gaussian rounded to integers at s = 1) gives p < 1e-6 at this n.
    assert _chi_square_p(y, s) > 1e-3
    var = discrete_gaussian_variance(s)
    # moments: mean 0, variance the exact one, kurtosis 3 (within 5 standard errors)
    assert abs(y.mean()) < 5 * np.sqrt(var / y.size)
    assert abs(y.var() / var - 1) < 5 * np.sqrt(2 / y.size)
    assert abs(scipy.stats.kurtosis(y, fisher=False) - 3) < 5 * np.sqrt(24 / y.size)


def test_a_rounded_gaussian_fails_the_same_chi_square():
    # The test has power: at s = 1 the rounded continuous Gaussian differs from N_Z.
    y = np.rint(np.random.default_rng(0).normal(size=200_000)).astype(int)
    assert _chi_square_p(y, 1.0) < 1e-6


def test_pmf_and_variance_closed_forms():
    # Large s: N_Z(0, s^2) is close to N(0, s^2); CKS20: variance < s^2.
    assert discrete_gaussian_pmf(np.arange(-3, 4), 5.0).sum() < 1
    np.testing.assert_allclose(
        discrete_gaussian_pmf(0, 50.0), 1 / (50 * np.sqrt(2 * np.pi)), rtol=1e-9
    )
    assert discrete_gaussian_variance(0.5) < 0.25
    np.testing.assert_allclose(discrete_gaussian_variance(40.0), 1600.0, rtol=1e-9)


def test_acceptance_matches_the_sampler_and_failures_are_negligible():
    from privrl_jax.privacy import _discrete_gaussian as dg

    k0, k1 = dg._words(jax.random.key(3))
    for s in (1.0, 30.0):
        t = jnp.uint32(int(np.floor(s)) + 1)
        _, acc = dg._proposal(
            k0,
            k1,
            np.uint32(0),
            jnp.arange(400_000, dtype=jnp.uint32),
            jnp.float32(s),
            t,
        )
        a = acceptance_probability(s)
        assert abs(float(acc.mean()) - a) < 5 * np.sqrt(a * (1 - a) / 400_000)
    assert failure_probability(6_600_000, 1.0) < 1e-11
    assert failure_probability(6_600_000, 1e5) < 1e-27


def test_out_of_range_scale_gives_no_value():
    _, ok = sample_discrete_gaussian(jax.random.key(0), 10, 0.5)
    assert not np.asarray(ok).any()


def test_randomized_rounding_is_unbiased_and_within_one_step():
    x = jnp.full((200_000,), 0.3)
    k = np.asarray(randomized_round(jax.random.key(0), x, 0.25))
    assert set(np.unique(k)) == {1, 2}
    # E[k] = 0.3 / 0.25 = 1.2
    assert abs(k.mean() - 1.2) < 5 * np.sqrt(0.16 / k.size)


def test_zcdp_of_the_discrete_gaussian_is_the_gaussian_event():
    # CKS20 Thm 14: Delta'^2 / (2 s^2)-zCDP, the RDP curve of GaussianDpEvent(s/Delta').
    sigma, steps, delta = 1.3, 50, 1e-5
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(rho=1 / (2 * sigma**2)), steps)
    gauss = dp_accounting.rdp.RdpAccountant()
    gauss.compose(dp_accounting.GaussianDpEvent(sigma), steps)
    np.testing.assert_allclose(
        acc.get_epsilon(delta), gauss.get_epsilon(delta), rtol=1e-9
    )


def _plan(noise=None):
    return privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=4, microbatch_size=4),
        l2_clip_norm=2.0,
        steps=3,
        noise_multiplier=1.5,
        noise=noise,
    )


def test_plan_inflates_the_std_by_the_grid_share_and_keeps_the_event():
    plain, dg = _plan(), _plan(DiscreteGaussianNoise(grid_fraction=0.02))
    assert dg.noise_stds == pytest.approx((1.5 * 2.0 * 1.02,))
    assert dg.epsilon(1e-5).epsilon == plain.epsilon(1e-5).epsilon
    desc = dg.describe()
    assert desc["noise"] == {"kind": "discrete_gaussian", "grid_fraction": 0.02}
    from privrl_jax.privacy._plan import mechanism_from_description

    assert mechanism_from_description(desc).noise == dg.noise
    with pytest.raises(NotImplementedError):
        dg._privatizer(jax.random.key(0))


def test_privatize_releases_a_lattice_point_with_the_right_noise():
    plan = _plan(DiscreteGaussianNoise(grid_fraction=0.01))
    d = 40_000
    clipped = {"a": jnp.full((d // 2,), 0.001), "b": jnp.zeros((2, d // 4))}
    out = jax.jit(plan.privatize)(clipped, jax.random.key(5))
    flat = np.concatenate([np.asarray(out["a"]), np.asarray(out["b"]).ravel()])
    flat = flat * plan.expected_batch_size
    gamma = 0.01 * 2.0 / np.sqrt(d)
    # every released coordinate is an integer multiple of the grid step
    units = flat / gamma
    # (up to the float32 rounding of gamma * k and of the division by q N)
    assert np.abs(units - np.rint(units)).max() < 0.02
    # the noise std is sigma (1 + rho) Delta
    np.testing.assert_allclose(flat[d // 2 :].std(), 1.5 * 2.0 * 1.01, rtol=0.03)
    np.testing.assert_allclose(
        flat[: d // 2].mean(), 0.001, atol=5 * 3.03 / np.sqrt(d / 2)
    )


def test_fit_runs_with_discrete_noise():
    x = np.random.default_rng(0).normal(size=(4, 1, 3)).astype(np.float32)
    plan = _plan(DiscreteGaussianNoise())
    loss = lambda p, item: jnp.sum((p["w"] * item) ** 2)  # noqa: E731
    method, init = privacy.gradient_method(
        plan, loss, optax.sgd(0.1), {"w": jnp.ones(3)}
    )
    res = privacy.fit(plan, method, x, init, secret=privacy.DPSecret.from_seed(0))
    w = np.asarray(method.params(res.state)["w"])
    assert np.all(np.isfinite(w)) and not np.allclose(w, 1.0)


def test_discrete_noise_is_accounted_with_rdp_only(tmp_path):
    # Its guarantee is proven as zCDP (Canonne, Kamath & Steinke 2020, Thm 14); the
    # PLD accountant would account the continuous Gaussian's loss instead.
    plan = _plan(DiscreteGaussianNoise())
    with pytest.raises(ValueError, match="accountant='rdp' only"):
        plan.epsilon(1e-5, accountant="pld")
    with pytest.raises(ValueError, match="accountant='rdp' only"):
        plan.calibrate(1.0, 1e-5, accountant="pld")
    assert plan.epsilon(1e-5, accountant="rdp").epsilon == _plan().epsilon(1e-5).epsilon
    run_dir = tmp_path / "run"
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id="toy",
        dataset_size=4,
        target_epsilon=50.0,
        target_delta=1e-5,
    )
    recorder = privacy.RunRecorder(
        privacy.Checkpoints(run_dir / "ckpt"), ledger, what="step", accountant="pld"
    )
    x = np.zeros((4, 1, 3), np.float32)
    loss = lambda p, item: jnp.sum((p["w"] * item) ** 2)  # noqa: E731
    method, init = privacy.gradient_method(
        plan, loss, optax.sgd(0.1), {"w": jnp.ones(3)}
    )
    with pytest.raises(ValueError, match="accountant='rdp' only"):
        privacy.fit(plan, method, x, init, recorder=recorder)
    # Refused before anything was spent or saved.
    assert privacy.Ledger.load(run_dir).releases == []
    assert privacy.Checkpoints(run_dir / "ckpt").latest() is None


def test_privatize_puts_each_block_on_its_own_grid_with_its_own_noise():
    # Two blocks, clipped to different norms with different sigmas: each is rounded
    # to its own grid gamma_i = rho Delta_i / sqrt(d_i) and noised with its own std.
    rho = 0.01
    plan = privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=4, microbatch_size=4),
        l2_clip_norm=(2.0, 0.5),
        steps=3,
        noise_multiplier=(1.5, 3.0),
        noise=DiscreteGaussianNoise(grid_fraction=rho),
    )
    d = (20_000, 8_000)
    clipped = ({"a": jnp.zeros((d[0],))}, {"b": jnp.zeros((d[1] // 2, 2))})
    out = jax.jit(plan.privatize)(clipped, jax.random.key(11))
    flats = [
        np.asarray(out[0]["a"]) * plan.expected_batch_size,
        np.asarray(out[1]["b"]).ravel() * plan.expected_batch_size,
    ]
    for flat, delta, sigma, dim in zip(flats, (2.0, 0.5), (1.5, 3.0), d):
        units = flat / (rho * delta / np.sqrt(dim))
        assert np.abs(units - np.rint(units)).max() < 0.02
        np.testing.assert_allclose(flat.std(), sigma * (1 + rho) * delta, rtol=0.04)
    # Independent draws: the blocks' first coordinates are uncorrelated.
    n = min(d)
    corr = np.corrcoef(flats[0][:n], flats[1][:n])[0, 1]
    assert abs(corr) < 5 / np.sqrt(n)
