"""privrl_jax.privacy.audit: epsilon lower bounds checked on mechanisms whose epsilon is
known.

The reference epsilon of the Gaussian mechanism comes from dp-accounting's PLD
accountant (exact for one Gaussian, up to its 1e-4 discretisation). Every key/seed is
fixed, so each assert is deterministic; the bounds' own guarantee is "valid with
probability >= confidence over seeds". The choices of k (how many guesses) are fixed
fractions of m, set before looking at any outcome.
"""

import json
import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from privrl_jax.privacy import audit, compute_epsilon
from privrl_jax.privacy._accounting import Sampling, dpsgd_event
from privrl_jax.privacy._aggregation import add_gaussian_noise
from privrl_jax.privacy._audit import (
    density_scores,
    draw_inclusion,
    gdp_delta,
    gdp_epsilon,
    one_run_p_value,
)
from privrl_jax.privacy._clipping import clipped_grad

DELTA = 1e-5
CONF = 0.95


def _true_eps(sigma: float) -> float:
    return compute_epsilon(
        dp_accounting.GaussianDpEvent(sigma), DELTA, accountant="pld"
    ).epsilon


def _gaussian_scores(m: int, sigma: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per canary: [in] + N(0, sigma^2), i.e. the Gaussian mechanism of sensitivity 1
    along its
    own coordinate; GaussianDpEvent(sigma) is its exact privacy."""
    inclusion = draw_inclusion(seed, m)
    noise = np.random.default_rng(seed + 10_000).standard_normal(m)
    return inclusion + sigma * noise, inclusion


def _one_run(
    m: int, sigma: float, seed: int, delta: float = DELTA
) -> audit.AuditResult:
    scores, inclusion = _gaussian_scores(m, sigma, seed)
    k = m // 100  # 1% "in" and 1% "out" guesses, fixed in advance
    return audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=delta, k_positive=k, k_negative=k, confidence=CONF
    )


def _all_correct_max(r: int, confidence: float = CONF) -> float:
    # delta = 0, all r guesses right: the p-value is p^r with p = e^eps / (1 + e^eps),
    # so the largest rejected eps solves p^r = 1 - confidence.
    a = (1 - confidence) ** (1 / r)
    return math.log(a / (1 - a))


# ------------------------------------------------------------------------ one-run audit


def test_one_run_never_exceeds_true_epsilon_and_grows_with_m():
    sigma = 1.0
    eps = _true_eps(sigma)  # 4.377
    small = [_one_run(1_000, sigma, seed).epsilon_lower_bound for seed in range(5)]
    large = [_one_run(100_000, sigma, seed).epsilon_lower_bound for seed in range(3)]
    assert max(small + large) <= eps
    # Measured: m=1000 gives 0.92..1.79 (0.21..0.41 eps), m=100000 gives 2.50..2.77
    # (0.57..0.63 eps). One run with 1% guesses cannot reach eps: the guesses' precision
    # saturates (Steinke et al., their Gaussian experiments); the point is the monotone
    # gain from more canaries.
    assert min(large) > max(small)
    assert 0.5 * eps < min(large)


def test_pure_bound_is_above_delta_bound():
    # The delta term only adds to the p-value, so the delta > 0 bound is the smaller
    # one.
    pure = _one_run(100_000, 1.0, 0, delta=0.0)
    approx = _one_run(100_000, 1.0, 0)
    assert pure.method == "one_run_pure" and approx.method == "one_run"
    assert pure.correct == approx.correct
    assert approx.epsilon_lower_bound <= pure.epsilon_lower_bound


def test_non_private_release_hits_the_m_limited_maximum():
    m = 1_000
    scores, inclusion = _gaussian_scores(m, 0.0, seed=7)  # sigma = 0: the score is [in]
    k = m // 4  # fewer than the ~m/2 included canaries, so every guess is right
    pure = audit.one_run_epsilon_lower_bound(scores, inclusion, delta=0.0, k_positive=k)
    assert pure.correct == pure.guesses == k
    assert pure.epsilon_lower_bound == pytest.approx(
        _all_correct_max(k), abs=1e-7
    )  # 4.418
    both = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=0.0, k_positive=k, k_negative=k
    )
    assert both.correct == 2 * k
    assert both.epsilon_lower_bound == pytest.approx(
        _all_correct_max(2 * k), abs=1e-7
    )  # 5.114
    # With delta the bound is the root of p-value = 1 - confidence, below the pure one.
    approx = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=DELTA, k_positive=k
    )
    p = one_run_p_value(m, k, k, approx.epsilon_lower_bound, DELTA)
    assert p == pytest.approx(1 - CONF, rel=1e-6)
    assert approx.epsilon_lower_bound < pure.epsilon_lower_bound  # 4.391


def test_halved_noise_is_caught():
    accounted_sigma = 2.0
    eps = _true_eps(accounted_sigma)  # 1.993: what the ledger would claim
    bug = _one_run(
        100_000, accounted_sigma / 2, seed=0
    )  # the mechanism actually used sigma / 2
    ok = _one_run(100_000, accounted_sigma, seed=0)
    assert bug.epsilon_lower_bound > eps  # measured 2.64 > 1.99 (correct sigma: 1.23)
    assert ok.epsilon_lower_bound <= eps


def test_p_value_delta_term_by_hand():
    # m=10, r=4, v=3, eps=0: Bin(4, 1/2) pmf = [1, 4, 6, 4, 1] / 16.
    beta = 5 / 16  # P[Bin >= 3]
    alpha = max(
        6 / 16 / 1, (6 + 4) / 16 / 2, (6 + 4 + 1) / 16 / 3
    )  # P[3 - i <= Bin < 3] / i
    assert one_run_p_value(10, 4, 3, 0.0, 0.0) == pytest.approx(beta)
    assert one_run_p_value(10, 4, 3, 0.0, 1e-3) == pytest.approx(
        beta + 2 * 10 * 1e-3 * alpha
    )


def test_audit_result_is_json_and_inputs_are_checked():
    result = _one_run(1_000, 1.0, 0)
    assert json.loads(json.dumps(result.to_dict()))["m"] == 1_000
    scores, inclusion = _gaussian_scores(10, 1.0, 0)
    with pytest.raises(ValueError):
        audit.one_run_epsilon_lower_bound(scores, inclusion, delta=DELTA, k_positive=11)
    with pytest.raises(ValueError):
        audit.one_run_epsilon_lower_bound(
            scores, inclusion.astype(int), delta=DELTA, k_positive=1
        )
    with pytest.raises(ValueError):
        audit.one_run_epsilon_lower_bound(
            scores, inclusion, delta=DELTA, k_positive=1, confidence=1
        )


def test_draw_inclusion_is_fair_and_reproducible():
    a = draw_inclusion(jax.random.key(0), 100_000)
    assert a.dtype == np.bool_
    assert np.array_equal(a, draw_inclusion(jax.random.key(0), 100_000))
    assert not np.array_equal(a, draw_inclusion(jax.random.key(1), 100_000))
    assert abs(a.mean() - 0.5) < 5 * 0.5 / math.sqrt(a.size)  # 5 standard errors


# ---------------------------------------------------------------- Clopper-Pearson audit


def test_clopper_pearson_hand_case():
    tp, fp, n = 90, 5, 100
    tpr_lo = scipy.stats.beta.ppf(0.025, tp, n - tp + 1)
    fpr_hi = scipy.stats.beta.ppf(0.975, fp + 1, n - fp)
    # The beta quantiles are the exact binomial tail inversions.
    assert scipy.stats.binom.sf(tp - 1, n, tpr_lo) == pytest.approx(0.025)
    assert scipy.stats.binom.cdf(fp, n, fpr_hi) == pytest.approx(0.025)
    expected = max(
        math.log((tpr_lo - DELTA) / fpr_hi),
        math.log((1 - fpr_hi - DELTA) / (1 - tpr_lo)),
    )
    got = audit.clopper_pearson_epsilon_lower_bound(tp, fp, n, n, delta=DELTA)
    assert got == pytest.approx(expected, rel=1e-12)  # 1.988, from the first direction
    assert audit.clopper_pearson_epsilon_lower_bound(50, 50, n, n, delta=DELTA) == 0.0


def test_clopper_pearson_on_the_gaussian_mechanism():
    # Many runs of one canary: the threshold test at 1/2 on N(1, 1) vs N(0, 1).
    sigma, runs = 1.0, 20_000
    rng = np.random.default_rng(0)
    a = 1 + sigma * rng.standard_normal(runs)
    b = sigma * rng.standard_normal(runs)
    t = 2.5  # fixed in advance: a low-FPR test
    got = audit.clopper_pearson_epsilon_lower_bound(
        int((a >= t).sum()), int((b >= t).sum()), runs, runs, delta=DELTA
    )
    assert 0.5 < got <= _true_eps(sigma)  # measured 1.94 <= 4.38


# -------------------------------------------------------------------------- Gaussian DP


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0, 5.0])
def test_gdp_conversion_matches_dp_accounting(sigma):
    # 1/sigma-GDP is exactly the Gaussian mechanism with noise multiplier sigma.
    eps = gdp_epsilon(1 / sigma, DELTA)
    assert eps == pytest.approx(_true_eps(sigma), rel=1e-4)  # measured <= 3e-8 relative
    assert gdp_delta(eps, 1 / sigma) == pytest.approx(DELTA, rel=1e-6)


def test_gdp_estimate_on_gaussian_scores():
    sigma, n = 1.0, 20_000
    rng = np.random.default_rng(1)
    est = audit.gaussian_dp_epsilon_estimate(
        1 + sigma * rng.standard_normal(n), sigma * rng.standard_normal(n), delta=DELTA
    )
    assert abs(est.mu - 1 / sigma) < 5 * math.sqrt(2 / n)
    assert 0 < est.mu_lower_bound <= 1 / sigma  # measured 0.920 (mu = 1.002)
    assert 0 < est.epsilon_estimate_low <= _true_eps(sigma)
    assert est.epsilon_estimate_low <= est.epsilon_estimate
    assert json.loads(json.dumps(est.to_dict()))["delta"] == DELTA


# ------------------------------------------------------------ white-box DP-SGD canaries

D, M, C, STEPS = 1024, 1000, 0.5, 4


def _white_box_scores(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """STEPS full-batch DP-SGD releases through the library's clipping and noise: M
    canary units
    at Dirac coordinates (each in with probability 1/2), 8 real units on the other
    coordinates."""
    canaries = audit.dirac_canaries(D, M, jax.random.key(0))
    inclusion = draw_inclusion(jax.random.key(1), M)
    others = np.setdiff1d(np.arange(D), canaries.coordinates)
    real = np.zeros((8, D))
    real[:, others] = np.random.default_rng(2).standard_normal((8, others.size))
    x = jnp.asarray(np.concatenate([canaries.gradients(), real]))[:, None, :]
    mask = jnp.asarray(np.concatenate([inclusion, np.ones(8, bool)]))[:, None]
    loss = lambda w, item: jnp.sum(w * item)  # noqa: E731  a unit's gradient is its row
    total, _ = clipped_grad(loss, l2_clip_norm=C)(jnp.zeros(D), x, mask)
    tx = add_gaussian_noise(sigma, C, jax.random.key(3))
    state = tx.init(total)
    score = np.zeros(M)
    for _ in range(STEPS):  # the same clipped sum every step (full batch, fixed params)
        noised, state = tx.update(total, state)
        score += canaries.scores(noised) / C
    return score, inclusion


def test_white_box_dpsgd_bound_below_accountant():
    sigma = 2.0  # STEPS=4 releases at sigma=2 compose to one Gaussian at sigma=1
    event = dpsgd_event(sigma, 1.0, STEPS, sampling=Sampling.FULL_BATCH)
    eps = compute_epsilon(event, DELTA, accountant="pld").epsilon  # 4.377
    scores, inclusion = _white_box_scores(sigma)
    result = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=DELTA, k_positive=M // 20, k_negative=M // 20
    )
    assert 0 < result.epsilon_lower_bound <= eps  # measured 1.92 (93 of 100 right)


def test_white_box_non_private_hits_the_maximum():
    scores, inclusion = _white_box_scores(0.0)
    k = M // 4
    result = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=0.0, k_positive=k
    )
    assert result.correct == k
    assert result.epsilon_lower_bound == pytest.approx(_all_correct_max(k), abs=1e-7)


def test_random_direction_canaries_score_pytrees():
    canaries = audit.random_direction_canaries(64, 3, 0)
    assert np.allclose(np.linalg.norm(canaries.directions, axis=1), 1.0)
    row = jnp.asarray(canaries.directions[1])
    update = {"a": row[:40], "b": row[40:]}
    # Leaves flatten in key order ("a" then "b"), the order ravel_pytree uses.
    assert canaries.scores(update)[1] == pytest.approx(1.0, rel=1e-6)


# ---------------------------------------------------- black-box synthetic-data canaries


def _synthetic_audit(generator: str) -> audit.AuditResult:
    rng = np.random.default_rng(5)
    data = rng.standard_normal((2_000, 6))
    m = 200
    canaries = audit.out_of_distribution_canaries(data, m, 6)
    inclusion = draw_inclusion(7, m)
    train = np.concatenate([data, canaries[inclusion]])
    if (
        generator == "copy"
    ):  # a memorising generator: the training rows, slightly jittered
        released = train + 0.01 * rng.standard_normal(train.shape)
    else:  # a generator that ignores its data (epsilon = 0)
        released = rng.standard_normal(train.shape)
    scores = density_scores(released, canaries, k=1)
    return audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=DELTA, k_positive=m // 4
    )


def test_ood_canaries_lie_outside_the_bounding_box():
    data = np.random.default_rng(0).uniform(-1, 1, (500, 3))
    canaries = audit.out_of_distribution_canaries(data, 50, 0)
    outside = np.any((canaries < data.min(0)) | (canaries > data.max(0)), axis=1)
    assert outside.all()


def test_black_box_synthetic_data_audit():
    leaky = _synthetic_audit("copy")
    assert leaky.correct == leaky.guesses == 50
    pure_max = _all_correct_max(50)  # 2.785; measured 2.779 with the delta term
    assert 0.9 * pure_max < leaky.epsilon_lower_bound <= pure_max
    # An epsilon = 0 generator: a positive bound happens with probability <= 5% over
    # seeds.
    assert _synthetic_audit("independent").epsilon_lower_bound == 0.0


def test_density_scores_kde_ranks_like_distance():
    released = np.array([[0.0, 0.0], [0.1, 0.0]])
    canaries = np.array([[0.05, 0.0], [3.0, 0.0]])
    assert np.argmax(density_scores(released, canaries)) == 0
    assert np.argmax(density_scores(released, canaries, bandwidth=0.5)) == 0
    assert density_scores(released, canaries, k=2)[0] == pytest.approx(-0.05)


# ----------------------------------------------------------- agreement with jax-privacy


def test_agrees_with_jax_privacy():
    jpa = pytest.importorskip(
        "jax_privacy.auditing",
        reason='needs the audit extra: pip install -e ".[audit]"',
    )
    m, k = 2_000, 100
    scores, inclusion = _gaussian_scores(m, 1.0, seed=3)
    auditor = jpa.CanaryScoreAuditor(scores[inclusion], scores[~inclusion])
    # One run, one-sided (jax-privacy has k_neg = 0), at the threshold of our k-th
    # highest score: the same theorem evaluated with the same guesses; both solve for
    # eps with brentq, so they agree to the root-finding tolerance (theirs is
    # xtol=1e-6).
    ours = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=DELTA, k_positive=k
    )
    theirs = auditor.epsilon_one_run(
        1 - CONF, DELTA, threshold_strategy=jpa.Explicit(float(np.sort(scores)[m - k]))
    )
    assert ours.epsilon_lower_bound == pytest.approx(theirs, abs=1e-5)
    # GDP: both take max over thresholds of Phi^-1(TPR_lo) - Phi^-1(FPR_hi) with
    # Bonferroni over 2n bounds. jax-privacy's n counts only its Pareto-frontier
    # thresholds, ours every distinct score by default, so ours is the more conservative
    # (lower); on jax-privacy's thresholds the two are the same formula and agree to
    # float precision.
    gdp_theirs = auditor.epsilon_from_gdp(1 - CONF, DELTA)
    gdp_ours = audit.gaussian_dp_epsilon_estimate(
        scores[inclusion], scores[~inclusion], delta=DELTA
    )
    assert 0 < gdp_ours.epsilon_estimate_low <= gdp_theirs
    frontier = getattr(
        auditor, "_thresholds", None
    )  # private attribute: checked, not assumed
    if frontier is not None:
        same = audit.gaussian_dp_epsilon_estimate(
            scores[inclusion], scores[~inclusion], delta=DELTA, thresholds=frontier
        )
        assert same.epsilon_estimate_low == pytest.approx(gdp_theirs, rel=1e-8)
