"""PrivSyn (synth.fit_privsyn): its sensitivities, selection,
accounting and synthesis."""

from __future__ import annotations

import math

import dp_accounting
import jax
import numpy as np
import pytest
import scipy.stats

from privrl_jax import privacy, synth
from privrl_jax.synth._marginal import ColumnBins, marginal_counts
from privrl_jax.synth._privsyn import (
    INDIF_SENSITIVITY,
    PRIVSYN_SPLIT,
    dense_marg_select,
    gum,
    indif_scores,
    pair_rhos,
)


def _disc():
    cols = [ColumnBins(name=f"c{i}", low=0.0, high=1.0, num_bins=4) for i in range(4)]
    return synth.PublicDiscretisation(
        columns=(*cols, ColumnBins(name="t", values=(0.0, 1.0)))
    )


def _codes(rng, n):
    """c1 follows c0, t marks large c0; c2, c3 independent."""
    x = rng.random((n, 5))
    x[:, 1] = 0.9 * x[:, 0] + 0.1 * x[:, 1]
    x[:, 4] = x[:, 0] > 0.75
    return _disc().discretise(x)


def _pairs(disc):
    n = disc.names
    return [(a, b) for i, a in enumerate(n) for b in n[i + 1 :]]


def test_indif_is_zero_for_a_product_table_and_matches_a_hand_count():
    disc = _disc()
    # Every (c0, c2) cell exactly once: c0 and c2 are exactly independent, InDif 0.
    # c1 = c0 on 4 values, n = 16: each product cell is 4 * 4 / 16 = 1, so the four
    # diagonal cells give |4 - 1| and the twelve others |0 - 1|: 12 + 12.
    g = np.array([(a, b) for a in range(4) for b in range(4)])
    codes = np.zeros((16, 5), np.int32)
    codes[:, 0], codes[:, 2], codes[:, 1] = g[:, 0], g[:, 1], g[:, 0]
    scores = dict(zip(_pairs(disc), indif_scores(codes, disc, _pairs(disc))))
    assert scores[("c0", "c2")] == 0.0
    assert scores[("c0", "c1")] == pytest.approx(4 * 3 + 12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_row_moves_every_indif_score_by_less_than_four(seed):
    """The add/remove-one bound the selection's noise assumes (module docstring)."""
    rng = np.random.default_rng(seed)
    disc = _disc()
    pairs = _pairs(disc)
    codes = _codes(rng, int(rng.integers(5, 60)))
    base = indif_scores(codes, disc, pairs)
    worst = 0.0
    for _ in range(200):
        row = np.array([[rng.integers(0, s) for s in disc.sizes]], np.int32)
        moved = np.abs(indif_scores(np.vstack([codes, row]), disc, pairs) - base)
        worst = max(worst, moved.max())
        assert np.linalg.norm(moved) < INDIF_SENSITIVITY * math.sqrt(len(pairs))
    assert worst < INDIF_SENSITIVITY


def test_dense_marg_takes_what_lowers_the_expected_error():
    scores, cells = np.array([50.0, 0.0, 3.0]), [16, 16, 16]
    # No noise cost: every dependent pair, never an independent one.
    assert sorted(dense_marg_select(scores, cells, math.inf)) == [0, 2]
    # Measuring one 16-cell pair at rho costs 16 / sqrt(pi rho) in expected L1 noise:
    # at rho = 1, 9.03 < 50 (take it) but adding the second costs 2^1.5 * 9.03 - 9.03
    # = 16.5 more, above its InDif of 3.
    assert dense_marg_select(scores, cells, 1.0) == (0,)
    assert dense_marg_select(scores, cells, 1e-6) == ()


def test_pair_rhos_share_rho_by_cells_to_the_two_thirds():
    r = pair_rhos([8, 64], 3.0)
    assert sum(r) == pytest.approx(3.0)
    assert r[1] / r[0] == pytest.approx(4.0)  # (64 / 8)^(2/3)


@pytest.fixture(scope="module")
def private_fit():
    rng = np.random.default_rng(7)
    codes = _codes(rng, 3000)
    seen = []
    fit = synth.fit_privsyn(
        jax.random.key(3),
        codes,
        _disc(),
        noise_multiplier=0.4,
        num_rows=3000,
        update_iterations=30,
        on_release=lambda what, m: seen.append((what, m)),
    )
    return codes, fit, seen


def test_the_releases_compose_to_the_calibrated_gaussian(private_fit):
    _, fit, seen = private_fit
    assert [w for w, _ in seen] == [w for w, _ in fit.mechanisms]
    sigma = 0.4
    assert sum(m.rho for _, m in seen) == pytest.approx(1 / (2 * sigma**2), rel=1e-9)
    split = [seen[0][1].rho, seen[1][1].rho, sum(m.rho for _, m in seen[2:])]
    assert np.array(split) * 2 * sigma**2 == pytest.approx(PRIVSYN_SPLIT)
    composed = dp_accounting.ComposedDpEvent([m.event() for _, m in seen])
    one = privacy.compute_epsilon(dp_accounting.GaussianDpEvent(sigma), 1e-5)
    assert privacy.compute_epsilon(composed, 1e-5).epsilon == pytest.approx(
        one.epsilon, rel=1e-6
    )


def test_the_noise_has_the_std_the_records_assume(private_fit):
    codes, fit, _ = private_fit
    disc = _disc()
    z = []
    for m in fit.measurements:
        exact = marginal_counts(codes, disc, [m.clique])[0]
        z.append((m.noisy_counts - exact) / m.noise_std)
    z = np.concatenate(z)
    # Standard normal: its sum of squares is chi-square with z.size degrees (99.9%).
    lo, hi = scipy.stats.chi2.ppf([0.0005, 0.9995], z.size)
    assert lo < float(np.sum(z**2)) < hi
    assert abs(z.mean()) < 3.3 / math.sqrt(z.size)


def test_the_dependent_pair_is_selected_and_kept(private_fit):
    codes, fit, _ = private_fit
    assert ("c0", "c1") in fit.selected
    real = np.corrcoef(codes[:, 0], codes[:, 1])[0, 1]
    syn = np.corrcoef(fit.codes[:, 0], fit.codes[:, 1])[0, 1]
    # Independent rows (GUM's start) have correlation 0; the release keeps most of it.
    assert real > 0.9 and syn > real / 2


def test_releases_are_recorded_before_they_are_drawn(monkeypatch):
    order = []
    real_measure = synth._privsyn.measure
    monkeypatch.setattr(
        synth._privsyn,
        "measure",
        lambda *a, **k: order.append("draw") or real_measure(*a, **k),
    )
    monkeypatch.setattr(
        synth._privsyn, "gum", lambda rng, one, *a, **k: np.zeros((1, 5))
    )
    codes = _codes(np.random.default_rng(1), 200)
    synth.fit_privsyn(
        jax.random.key(0),
        codes,
        _disc(),
        noise_multiplier=0.0,
        num_rows=1,
        on_release=lambda what, m: order.append(("record", m)),
    )
    # Non-private (sigma = 0): every release is None (exact), recorded before its draw.
    assert order[0] == ("record", None)
    assert all(a == ("record", None) for a in order if a != "draw")
    draws = [i for i, a in enumerate(order) if a == "draw"]
    assert all(order[i - 1] != "draw" for i in draws)


def test_gum_moves_every_pair_towards_its_target():
    rng = np.random.default_rng(5)
    codes = _codes(rng, 4000)
    disc = _disc()
    one = [
        np.bincount(codes[:, j], minlength=s) / len(codes)
        for j, s in enumerate(disc.sizes)
    ]
    pairs = [(0, 1), (0, 4), (1, 4)]
    targets = [
        marginal_counts(codes, disc, [(disc.names[a], disc.names[b])])[0].reshape(
            disc.sizes[a], disc.sizes[b]
        )
        / len(codes)
        for a, b in pairs
    ]

    def l1(rows, k):
        a, b = pairs[k]
        got = np.zeros_like(targets[k])
        np.add.at(got, (rows[:, a], rows[:, b]), 1.0 / len(rows))
        return np.abs(got - targets[k]).sum()

    start = gum(
        np.random.default_rng(0), one, pairs, targets, num_rows=2000, iterations=0
    )
    end = gum(
        np.random.default_rng(0), one, pairs, targets, num_rows=2000, iterations=20
    )
    for k in range(len(pairs)):
        assert l1(end, k) < l1(start, k) / 2
