"""The DP sliced Wasserstein score of a PrivORL-n selection (``select.sw_score``).

The noiseless statistic against a naive reference (a per-row binning loop and scipy's
1-D Wasserstein distance between the binned laws); its sensitivity by brute force over
neighbouring data sets (every removal moves the count table by exactly sqrt(P), every
replacement by at most sqrt(2 P), which some replacement attains); the ledger of a
selection scored by it against dp-accounting's repeat-and-select of the PrivORL-n plan
composed with the histogram's Gaussian; the audit's expected choice against its closed
form.
"""

import math

import dp_accounting
import jax
import numpy as np
import pytest
import scipy.stats

from privrl_jax import privacy
from privrl_jax.pipelines import select
from privrl_jax.pipelines.select import privorl_n as select_privorl_n
from privrl_jax.pipelines.select import sw_score

RNG = np.random.default_rng(5)
SENS = RNG.normal(size=(30, 4))
SYN = RNG.normal(size=(20, 4)) * 1.5 + 0.7


def _naive_counts(x, dirs, r, bins):
    width = 2 * r / bins
    out = np.zeros((len(dirs), bins))
    for p, u in enumerate(dirs):
        for row in x:
            v = min(r, max(-r, float(np.dot(row, u))))
            b = bins - 1 if v == r else int((v + r) // width)
            out[p, b] += 1
    return out


@pytest.mark.parametrize(("r", "bins"), [(1.0, 4), (2.5, 16), (40.0, 7)])
def test_statistic_is_the_mean_1d_wasserstein_of_the_binned_projections(r, bins):
    dirs = sw_score.directions(5, 4)
    np.testing.assert_allclose(np.linalg.norm(dirs, axis=1), 1.0, rtol=1e-12)
    hs, hy = _naive_counts(SENS, dirs, r, bins), _naive_counts(SYN, dirs, r, bins)
    np.testing.assert_array_equal(sw_score.projection_counts(SENS, dirs, r, bins), hs)
    centres = -r + (np.arange(bins) + 0.5) * 2 * r / bins
    ref = np.mean(
        [
            scipy.stats.wasserstein_distance(centres, centres, hs[p], hy[p])
            for p in range(len(dirs))
        ]
    )
    got = sw_score.sliced_distance(SENS, SYN, dirs, r, bins)
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_statistic_tracks_a_shift_and_is_zero_on_equal_tables():
    dirs = sw_score.directions(64, 4)
    assert sw_score.sliced_distance(SENS, SENS, dirs, 6.0, 64) == 0.0
    # A shift by t along the first axis moves each projection by t u_1, so the
    # unbinned sliced W1 is t mean_p |u_p1| exactly; binning moves every point by at
    # most half a bin, hence the distance by at most one bin width (2R / B = 0.02).
    t = 0.8
    shifted = SENS + np.array([t, 0.0, 0.0, 0.0])
    assert np.abs(SENS @ dirs.T).max() + t < 6.0  # nothing clipped
    got = sw_score.sliced_distance(SENS, shifted, dirs, 6.0, 600)
    assert abs(got - t * np.abs(dirs[:, 0]).mean()) <= 0.02


def test_one_row_moves_the_counts_by_sqrt_p_removed_and_at_most_sqrt_2p_replaced():
    num_p, r, bins = 3, 2.0, 8
    dirs = sw_score.directions(num_p, 4, seed=3)
    x = SENS[:12]
    full = sw_score.projection_counts(x, dirs, r, bins)
    far = np.array([[50.0, -50.0, 50.0, -50.0]])  # clipped on every direction
    for i in range(len(x)):
        removed = sw_score.projection_counts(np.delete(x, i, 0), dirs, r, bins)
        assert np.linalg.norm(full - removed) == pytest.approx(math.sqrt(num_p))
    added = sw_score.projection_counts(np.vstack([x, far]), dirs, r, bins)
    assert np.linalg.norm(added - full) == pytest.approx(math.sqrt(num_p))
    worst = 0.0
    for i in range(len(x)):
        for new in [*SYN[:10], far[0], -far[0], x[i]]:
            y = x.copy()
            y[i] = new
            d = np.linalg.norm(sw_score.projection_counts(y, dirs, r, bins) - full)
            assert d <= math.sqrt(2 * num_p) + 1e-12
            worst = max(worst, d)
    assert worst == pytest.approx(math.sqrt(2 * num_p))
    add = sw_score.mechanism(num_p, 2.0, privacy.Neighboring.ADD_OR_REMOVE_ONE)
    rep = sw_score.mechanism(num_p, 2.0, privacy.Neighboring.REPLACE_ONE)
    assert add.l2_sensitivity == pytest.approx(math.sqrt(num_p))
    assert rep.l2_sensitivity == pytest.approx(math.sqrt(2 * num_p))
    assert add.noise_std == pytest.approx(2 * math.sqrt(num_p))


def test_dp_score_is_minus_the_statistic_plus_the_counts_noise():
    dirs = sw_score.directions(8, 4)
    counts = sw_score.projection_counts(SENS, dirs, 3.0, 8)
    exact = sw_score.sliced_distance(SENS, SYN, dirs, 3.0, 8)
    tiny = sw_score.mechanism(8, 1e-7, privacy.Neighboring.ADD_OR_REMOVE_ONE)
    key = jax.random.key(1)
    got = sw_score.dp_score(counts, len(SENS), SYN, dirs, 3.0, tiny, key)
    assert got == pytest.approx(-exact, abs=1e-5)
    mech = sw_score.mechanism(8, 2.0, privacy.Neighboring.ADD_OR_REMOVE_ONE)
    draws = [
        sw_score.dp_score(counts, len(SENS), SYN, dirs, 3.0, mech, jax.random.key(s))
        for s in range(50)
    ]
    # Noise of std 2 sqrt(8) on counts of 30 rows: the score moves, deterministically.
    assert np.std(draws) > 0.05
    assert draws[0] == sw_score.dp_score(
        counts, len(SENS), SYN, dirs, 3.0, mech, jax.random.key(0)
    )


def _sw_cfg(**over):
    return select.load(
        "select/privorl_n_test",
        [
            "score.kind=sliced_wasserstein",
            "score.l2_clip_norm=6.0",
            *[f"{k}={v}" for k, v in over.items()],
        ],
    )


def test_ledger_epsilon_is_dp_accountings_repeat_and_select(tmp_path):
    cfg = _sw_cfg(**{"score.num_projections": 8, "score.bins": 8})
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=30, sampling_rate=0.1, microbatch_size=3
        ),
        l2_clip_norm=1.0,
        steps=20,
        noise_multiplier=1.1,
    )
    scorer = select_privorl_n.make_scorer(cfg, plan, SENS)
    assert scorer.mechanism.l2_sensitivity == pytest.approx(math.sqrt(8))
    assert scorer.statistic(SYN) == pytest.approx(
        sw_score.sliced_distance(SENS, SYN, sw_score.directions(8, 4), 6.0, 8)
    )
    event = select_privorl_n.run_event(cfg, plan)
    assert event == dp_accounting.ComposedDpEvent(
        [plan.event(), dp_accounting.GaussianDpEvent(2.0)]
    )
    shifts = [0.0, 0.5, 1.0, 2.0]
    cands = [(lambda k, s=s: (s, scorer.dp_score(SYN + s, k))) for s in shifts]
    reps = select.repetitions(cfg)
    ledger = privacy.Ledger.open(
        tmp_path,
        dataset_id="sw",
        dataset_size=30,
        target_epsilon=100.0,
        target_delta=1e-4,
    )
    result = privacy.select(
        cands, [event] * 4, reps, key=jax.random.key(4), ledger=ledger, what="sw"
    )
    assert result.release in shifts
    want = (
        dp_accounting.rdp.RdpAccountant()
        .compose(dp_accounting.dp_event.RepeatAndSelectDpEvent(event, 2.0, 0.0))
        .get_epsilon(1e-4)
    )
    assert ledger.report()["rdp"]["epsilon"] == pytest.approx(want, rel=1e-9)


def test_expected_choice_matches_its_closed_form():
    # Two candidates, noiseless scores: the best is chosen iff one of the K runs drew
    # it, with probability 1 - E[2^-K].
    reps = privacy.Repetitions.logarithmic(2.0)
    k = np.arange(1, 400)
    p_best = 1.0 - float(np.sum(reps.pmf(k) * 0.5**k))
    true_sw = np.array([3.0, 4.0])
    want = 3.0 * p_best + 4.0 * (1 - p_best)
    got = select_privorl_n.expected_choice(
        true_sw, np.array([[1.0], [0.0]]), reps, np.random.default_rng(0)
    )
    # 20 000 draws: the estimate's sd is sqrt(p (1 - p) / 2e4) = 0.0035.
    assert got == pytest.approx(want, abs=6 * 0.0035)


def test_sliced_wasserstein_configs():
    cfg = _sw_cfg()
    assert (cfg.score.num_projections, cfg.score.bins) == (16, 16)
    with pytest.raises(ValueError, match="privorl_n coverage or sliced_wasserstein"):
        select.load("select/privorl_n_test", ["score.kind=td_error"])
    with pytest.raises(ValueError, match="candidates.runs_dir"):
        _sw_cfg(**{"candidates.runs_dir": "shared"})
    shared = _sw_cfg(**{"candidates.runs_dir": "shared", "privacy.noise_seed": 1})
    assert shared.candidates.runs_dir == "shared"
    with pytest.raises(ValueError, match="bins"):
        _sw_cfg(**{"score.bins": 1})
