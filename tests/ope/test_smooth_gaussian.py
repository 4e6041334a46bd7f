"""The privacy curve of Gaussian noise scaled to a smooth sensitivity
(privrl_jax.ope._smooth_gaussian):
closed form against Monte Carlo and dp-accounting, and NRS07's constants checked against
it."""

import math

import dp_accounting
import numpy as np
import pytest

from privrl_jax.ope._balle import smooth_params
from privrl_jax.ope._smooth_gaussian import (
    calibrate_smooth_alpha,
    hockey_stick,
    smooth_gaussian_delta,
)

DELTA = 1e-5


def _monte_carlo_hockey_stick(rng, eps, a, t, d, n=1_000_000):
    """E_{e^eps}(N(0,I) || N(a e1, t^2 I)) = P(L > eps) - e^eps Q(L > eps), both by
    sampling."""
    mean = np.zeros(d)
    mean[0] = a

    def loss(z):  # log p(z) - log q(z)
        return (
            -0.5 * np.sum(z**2, 1)
            + np.sum((z - mean) ** 2, 1) / (2 * t * t)
            + d * math.log(t)
        )

    p_hit = np.mean(loss(rng.standard_normal((n, d))) > eps)
    q_hit = np.mean(loss(mean + t * rng.standard_normal((n, d))) > eps)
    # 6 sigma of the estimate (two independent binomial means).
    tol = 6 * math.sqrt(
        p_hit * (1 - p_hit) / n + math.exp(2 * eps) * q_hit * (1 - q_hit) / n
    )
    return p_hit - math.exp(eps) * q_hit, tol


@pytest.mark.parametrize(
    "eps, a, t, d",
    [(0.5, 0.8, 1.3, 2), (0.5, 0.8, 0.7, 3), (1.0, 1.5, 1.1, 5), (0.2, 0.5, 0.9, 1)],
)
def test_hockey_stick_matches_monte_carlo(eps, a, t, d):
    est, tol = _monte_carlo_hockey_stick(np.random.default_rng(0), eps, a, t, d)
    assert hockey_stick(eps, a, t, d) == pytest.approx(est, abs=tol)


@pytest.mark.parametrize("eps, a", [(0.1, 0.05), (1.0, 0.3), (2.0, 1.0), (10.0, 2.0)])
def test_shift_only_curve_is_dp_accountings_gaussian(eps, a):
    # t = 1: the Gaussian mechanism with sensitivity a and std 1 (dp-accounting's PLD,
    # pessimistic discretisation, so it may sit slightly above the exact value).
    pld = dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=1.0, sensitivity=a, value_discretization_interval=1e-5
    )
    ref = pld.get_delta_for_epsilon(eps)
    assert hockey_stick(eps, a, 1.0, 4) == pytest.approx(ref, rel=1e-3, abs=1e-12)
    # Continuous in t at t = 1, where the closed form switches branches: t = e^(+-1e-4)
    # brackets the t = 1 value (a larger std at the neighbour hides more) and t =
    # e^(+-1e-7), where the conservative substitute of |log t| < 1e-5 applies, meets it
    # within 0.5%.
    assert (
        hockey_stick(eps, a, math.exp(1e-4), 4)
        < ref
        < hockey_stick(eps, a, math.exp(-1e-4), 4)
    )
    for t in (math.exp(1e-4), math.exp(-1e-4)):
        assert hockey_stick(eps, a, t, 4) == pytest.approx(ref, rel=0.05)
    for t in (math.exp(1e-7), math.exp(-1e-7)):
        assert hockey_stick(eps, a, t, 4) == pytest.approx(ref, rel=5e-3, abs=1e-12)


@pytest.mark.parametrize("d", [1, 5, 20])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_nrs07_constants_are_admissible(eps, d):
    # The constants DP-LSW / DP-LSL use: the worst pair any beta-smooth bound allows
    # stays within delta.
    p = smooth_params(eps, DELTA, d)
    assert smooth_gaussian_delta(eps, p.alpha, p.beta, d) <= DELTA
    # Not vacuous: the check fails once alpha or beta is far too large.
    assert smooth_gaussian_delta(eps, 20 * p.alpha, p.beta, d) > DELTA
    assert smooth_gaussian_delta(eps, p.alpha, 10 * eps, d) > DELTA


def test_exact_calibration_is_tight_and_grid_stable():
    eps, d = 1.0, 5
    beta = smooth_params(eps, DELTA, d).beta
    alpha = calibrate_smooth_alpha(eps, DELTA, beta, d, margin=0.01, tol=1e-4)
    assert smooth_gaussian_delta(eps, alpha, beta, d) <= DELTA * 0.99
    assert smooth_gaussian_delta(eps, alpha * 1.001, beta, d) > DELTA * 0.99
    # The sup sits on the grid's corners: a finer grid finds nothing worse.
    assert smooth_gaussian_delta(eps, alpha, beta, d, grid=40) <= DELTA * 0.99 * (
        1 + 1e-6
    )
    # beta = 0 is the plain Gaussian mechanism: 1/alpha is dp-accounting's calibrated
    # std.
    std = dp_accounting.pld.accountant.get_smallest_gaussian_noise(
        dp_accounting.pld.common.DifferentialPrivacyParameters(eps, DELTA * 0.99)
    )
    assert 1 / calibrate_smooth_alpha(eps, DELTA, 0.0, d) == pytest.approx(
        std, rel=2e-3
    )
    # And it is less noise than NRS07's closed form (~5x at eps = 1).
    assert alpha > 4 * smooth_params(eps, DELTA, d).alpha


def test_exact_params_and_bad_calibration():
    p = smooth_params(1.0, DELTA, 5, "exact")
    assert p.beta == smooth_params(1.0, DELTA, 5).beta
    assert smooth_gaussian_delta(1.0, p.alpha, p.beta, 5) <= DELTA
    with pytest.raises(ValueError, match="calibration"):
        smooth_params(1.0, DELTA, 5, "loose")
