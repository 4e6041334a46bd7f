"""AIM (McKenna et al. 2022) beside PGM / MST: its exponential mechanism's law and
accounting, the quality score, sensitivities, the budget's composition; mbi fits last.

Everything up to the ``mbi`` section runs without the optional extra.
"""

import itertools
import math

import dp_accounting
import jax
import numpy as np
import pytest
from synth_testlib import small_transition_table

from privrl_jax import privacy, synth
from privrl_jax.privacy._accounting import zcdp_rho
from privrl_jax.privacy._plan import mechanism_from_description
from privrl_jax.synth._marginal import (
    aim_candidates,
    aim_scores,
    estimate_model,
    marginal_counts,
    measure,
    model_marginal,
    transition_columns,
)

# ------------------------------------------------------------ the exponential mechanism


def test_gumbel_max_draws_follow_the_exponential_mechanisms_softmax():
    """40000 Gumbel-max draws (fixed keys) against softmax(eps * q / (2 Delta)): every
    frequency within 5 binomial standard deviations of its probability, and Pearson's
    chi-square below its 1e-4 upper quantile (5 degrees of freedom: 25.7)."""
    scores = np.array([0.0, 1.0, 2.0, 5.0, -1.0, 4.0])
    em = privacy.ExponentialMechanism(epsilon=2.0, sensitivity=3.0)
    n = 40_000
    keys = jax.random.split(jax.random.key(0), n)
    picks = np.asarray(jax.jit(jax.vmap(lambda k: em.select(k, scores)))(keys))
    logits = 2.0 * scores / (2 * 3.0)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    np.testing.assert_allclose(
        np.asarray(jax.nn.softmax(em.logits(scores))), p, rtol=1e-6
    )
    freq = np.bincount(picks, minlength=scores.size) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n)), (freq, p)
    chi2 = n * np.sum((freq - p) ** 2 / p)
    assert chi2 < 25.7, chi2
    # A larger epsilon concentrates the law on the best score.
    hot = privacy.ExponentialMechanism(epsilon=200.0, sensitivity=3.0)
    assert int(hot.select(jax.random.key(1), scores)) == 3


def test_exponential_mechanism_is_recorded_as_its_bounded_range_zcdp(tmp_path):
    em = privacy.ExponentialMechanism(epsilon=0.6, sensitivity=22.0)
    assert em.event() == dp_accounting.ZCDpEvent(0.6**2 / 8)
    assert em.rho == pytest.approx(0.045, rel=1e-12)
    # The ledger rebuilds the event from the description and refuses a mismatch.
    assert mechanism_from_description(em.describe()) == em
    ledger = privacy.Ledger.open(
        tmp_path, dataset_id="x", dataset_size=10, target_epsilon=5.0, target_delta=1e-6
    )
    ledger.record(em.event(), what="selection", params=em.describe())
    # Reloading verifies the recorded event against its parameters.
    assert privacy.Ledger.load(tmp_path).rho() == pytest.approx(em.rho, rel=1e-12)
    with pytest.raises(ValueError, match="does not match"):
        ledger.record(
            dp_accounting.ZCDpEvent(0.1), what="selection", params=em.describe()
        )
    # RDP composes it; its epsilon is that of rho-zCDP (one Gaussian of the same rho).
    gauss = privacy.GaussianMechanism.from_zcdp(em.rho, l2_sensitivity=1.0)
    for delta in (1e-6, 1e-3):
        assert privacy.compute_epsilon(em.event(), delta).epsilon == pytest.approx(
            privacy.compute_epsilon(gauss.event(), delta).epsilon, rel=1e-9
        )
    # PLD cannot take it, and says which accountant can.
    with pytest.raises(ValueError, match="use accountant='rdp'"):
        privacy.compute_epsilon(em.event(), 1e-6, accountant="pld")
    with pytest.raises(ValueError, match="epsilon"):
        privacy.ExponentialMechanism(epsilon=0.0, sensitivity=1.0)


# -------------------------------------------------------------- candidates and scores
def test_candidates_are_the_workloads_downward_closure_with_overlap_weights():
    cands, w = aim_candidates(("a", "b", "c"), 2)
    assert cands == (("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"))
    # Workload {ab, ac, bc}: "a" meets two of them once; "ab" meets ab twice, ac and bc
    # once each.
    np.testing.assert_array_equal(w, [2, 2, 2, 4, 4, 4])
    names = transition_columns(4, 2)
    cands, w = aim_candidates(names, 2)
    assert len(cands) == 12 + 66
    assert set(w[:12]) == {11.0} and set(w[12:]) == {22.0}  # d - 1 and 2 (d - 1)
    cands3, w3 = aim_candidates(names, 3)
    assert len(cands3) == 12 + 66 + 220
    # A 1-way clique meets C(11, 2) triples; a pair: 2 C(10, 1) + 2 [its own]...
    assert w3[0] == math.comb(11, 2)
    brute = sum(
        len({"obs0", "obs1", "obs2"} & set(q)) for q in itertools.combinations(names, 3)
    )
    assert w3[cands3.index(("obs0", "obs1", "obs2"))] == brute
    with pytest.raises(ValueError, match="max_clique_size"):
        aim_candidates(names, 13)


def test_quality_score_equals_a_naive_reference():
    rng = np.random.default_rng(0)
    sizes = [3, 4, 12]
    counts = [rng.integers(0, 20, k).astype(float) for k in sizes]
    estimates = [rng.uniform(0, 20, k) for k in sizes]
    weights = np.array([2.0, 5.0, 4.0])
    std = 1.7
    got = aim_scores(counts, estimates, weights, std)
    for r in range(3):
        err = 0.0
        for i in range(sizes[r]):
            err += abs(counts[r][i] - estimates[r][i])
        # E|N(0, std^2)| = std sqrt(2 / pi) on each of the n_r cells.
        ref = weights[r] * (err - std * math.sqrt(2 / math.pi) * sizes[r])
        assert got[r] == pytest.approx(ref, rel=1e-12)
    # Without noise the score is the weighted L1 error alone.
    np.testing.assert_allclose(
        aim_scores(counts, estimates, weights, 0.0),
        [w * np.abs(c - e).sum() for c, e, w in zip(counts, estimates, weights)],
    )


def _disc():
    return synth.transition_discretisation(
        obs_low=[0, 0, -5, -5],
        obs_high=[4, 4, 5, 5],
        act_low=[-1, -1],
        act_high=[1, 1],
        reward_range=(0.0, 1.0),
        obs_bins=6,
        act_bins=4,
        reward_bins=4,
    )


def _table(rng, n):
    scale = np.array([2.2, 2.2, 5.5, 5.5, 1.1, 1.1, 0.5, 2.2, 2.2, 5.5, 5.5, 0.0])
    centre = np.array([2, 2, 0, 0, 0, 0, 0.5, 2, 2, 0, 0, 0])
    t = rng.uniform(-1, 1, (n, 12)) * scale + centre
    t[:, -1] = rng.integers(0, 2, n)
    return t


@pytest.mark.parametrize("seed", [0, 1])
def test_one_row_moves_each_candidate_by_one_count_and_each_score_by_its_weight(seed):
    rng = np.random.default_rng(seed)
    disc = _disc()
    cands, w = aim_candidates(disc.names, 2)
    codes = disc.discretise(_table(rng, 300))
    base = marginal_counts(codes, disc, cands)
    # A fixed model estimate (earlier releases) and noise std: data-independent.
    est = [rng.uniform(0, 3, c.size) for c in base]
    score = aim_scores(base, est, w, 2.0)
    worst = np.zeros(len(cands))
    for _ in range(20):
        extra = disc.discretise(_table(rng, 1))
        j = rng.integers(len(codes))
        for other in (np.concatenate([codes, extra]), np.delete(codes, j, 0)):
            moved = marginal_counts(other, disc, cands)
            for b, m in zip(base, moved):
                diff = np.abs(m - b)
                assert diff.sum() == 1 and diff.max() == 1  # one cell, one count
            d = np.abs(aim_scores(moved, est, w, 2.0) - score)
            assert np.all(d <= w + 1e-9)
            worst = np.maximum(worst, d / w)
    # Each weight bounds its score's move, and some row attains it.
    assert worst.max() == pytest.approx(1.0)


def test_aim_refuses_too_few_rounds_before_anything_is_released():
    disc = _disc()
    codes = disc.discretise(_table(np.random.default_rng(0), 50))
    seen = []
    with pytest.raises(ValueError, match="rounds must be an int > the 12 columns"):
        synth.fit_aim(
            jax.random.key(0),
            codes,
            disc,
            noise_multiplier=1.0,
            num_rows=5,
            rounds=12,
            on_release=lambda w, m: seen.append(w),
        )
    assert seen == []


# ---------------------------------------------------------------------------------- mbi
@pytest.fixture(scope="module")
def small():
    pytest.importorskip(
        "mbi",
        reason="the marginal baselines need the optional extra: pip install mbi==2.0.0",
    )
    disc, codes, _ = small_transition_table()
    return disc, codes


@pytest.fixture(scope="module")
def aim_run(small):
    disc, codes = small
    sigma = 0.8
    seen = []
    fit = synth.fit_aim(
        jax.random.key(0),
        codes,
        disc,
        noise_multiplier=sigma,
        num_rows=400,
        iters=300,
        rounds=8,
        round_iters=300,
        on_release=lambda what, m: seen.append((what, m)),
    )
    return sigma, fit, seen


@pytest.mark.slow  # ~30 s: five mbi compiles of the AIM loop
def test_aim_spends_exactly_its_rho_and_rdp_sees_one_gaussian(aim_run):
    sigma, fit, seen = aim_run
    rho = 0.5 / sigma**2
    assert [w for w, _ in seen] == [w for w, _ in fit.mechanisms]
    first, rounds = seen[0][1], seen[1:]
    assert isinstance(first, privacy.GaussianMechanism)
    assert first.l2_sensitivity == pytest.approx(math.sqrt(5))
    # Rounds alternate: the selection (EM, sensitivity max_r w_r = 2 (d - 1)), then the
    # Gaussian measurement of one marginal (sensitivity 1), 10% / 90% of the round.
    ems, gs = rounds[0::2], rounds[1::2]
    assert len(ems) == len(gs) == len(fit.selected) >= 2
    rho_t = []
    for (_, em), (_, g) in zip(ems, gs):
        assert isinstance(em, privacy.ExponentialMechanism) and em.sensitivity == 8.0
        assert isinstance(g, privacy.GaussianMechanism) and g.l2_sensitivity == 1.0
        assert em.rho / g.rho == pytest.approx(1 / 9, rel=1e-12)
        rho_t.append(em.rho + g.rho)
    # The 1-way marginals are priced as d = 5 rounds' measurements of rho / T each;
    # every round but the last costs rho / T times a power of 4 (annealing); the last
    # spends exactly the remainder, so the whole run is rho-zCDP with rho the budget.
    assert first.rho == pytest.approx(5 * 0.9 * rho / 8, rel=1e-12)
    for r in rho_t[:-1]:
        k = math.log(r / (rho / 8), 4)
        assert k == pytest.approx(round(k), abs=1e-9) and round(k) >= 0
    spent = first.rho + sum(rho_t)
    assert spent == pytest.approx(rho, rel=1e-12)
    assert rho_t[-1] == pytest.approx(rho - first.rho - sum(rho_t[:-1]), rel=1e-9)
    events = dp_accounting.ComposedDpEvent([m.event() for _, m in seen])
    assert zcdp_rho(events) == pytest.approx(rho, rel=1e-12)
    assert any(isinstance(e, dp_accounting.ZCDpEvent) for e in events.events)
    for delta in (1e-6, 1e-4):
        assert privacy.compute_epsilon(events, delta).epsilon == pytest.approx(
            privacy.compute_epsilon(
                dp_accounting.GaussianDpEvent(sigma), delta
            ).epsilon,
            rel=1e-9,
        )
    cands, _ = aim_candidates(small_names := transition_columns(1, 1), 2)
    assert set(fit.selected) <= set(cands) and len(small_names) == 5
    assert fit.codes.shape == (400, 5)
    assert len(fit.measurements) == 5 + len(fit.selected)


def test_numpy_variable_elimination_matches_mbi(small):
    """model_marginal (NumPy) against mbi's own (jitted) variable elimination, on every
    pair of a model whose cliques are a chain of 2-way marginals (most pairs are not in
    it: elimination needed), and on its supported cliques."""
    disc, codes = small
    cliques = [(n,) for n in disc.names] + [
        ("obs0", "act0"),
        ("act0", "next_obs0"),
        ("next_obs0", "reward"),
    ]
    counts = marginal_counts(codes, disc, cliques)
    meas = measure(jax.random.key(2), counts, cliques, None)
    model = estimate_model(disc, meas, iters=200)
    pairs = list(itertools.combinations(disc.names, 2))
    for q in [*pairs, ("reward", "obs0"), ("act0",)]:
        ours = model_marginal(model, q)
        theirs = np.asarray(model.project(q).datavector(), np.float64)
        np.testing.assert_allclose(ours, theirs, rtol=2e-4, atol=1e-3 * ours.max())
        assert ours.sum() == pytest.approx(float(model.total), rel=1e-9)


@pytest.mark.slow  # ~25 s: four mbi compiles
def test_noiseless_aim_is_greedy_and_records_no_noise(small):
    """noise_multiplier = 0: T - d greedy rounds, every release exact (None). The first
    pick is the candidate of largest w_r ||x_r - x_hat_r||_1 with x_hat the product of
    the exact 1-way marginals (what mbi fits to them), a naive reference here."""
    disc, codes = small
    seen = []
    fit = synth.fit_aim(
        jax.random.key(0),
        codes,
        disc,
        noise_multiplier=0.0,
        num_rows=50,
        iters=300,
        rounds=8,
        round_iters=300,
        on_release=lambda what, m: seen.append((what, m)),
    )
    assert all(m is None for _, m in seen)
    assert len(fit.selected) == 8 - 5
    cands, w = aim_candidates(disc.names, 2)
    n = len(codes)
    p = {
        c[0]: x / n for c, x in zip(cands[:5], marginal_counts(codes, disc, cands[:5]))
    }
    ref = []
    for c, x, wr in zip(cands, marginal_counts(codes, disc, cands), w):
        prod = p[c[0]] if len(c) == 1 else np.outer(p[c[0]], p[c[1]]).ravel()
        ref.append(wr * np.abs(x - n * prod).sum())
    assert fit.selected[0] == cands[int(np.argmax(ref))]
    assert len(cands[int(np.argmax(ref))]) == 2
