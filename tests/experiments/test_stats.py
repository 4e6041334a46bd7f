"""experiments.stats against scipy and hand computations."""

import math

import numpy as np
import pytest
import scipy.stats

from privrl_jax.experiments import stats

A = [0.18, 0.21, 0.15, 0.30, 0.19, 0.22, 0.17]
B = [0.34, 0.52, 0.41, 0.29, 0.61, 0.38, 0.45]


def test_summary_is_the_sample_std_and_the_t_half_width():
    s = stats.summary([1.0, 2.0, 3.0])
    # std (ddof = 1) = 1; t(0.975, 2) = 4.302653 (tables): half-width 4.302653 / sqrt 3.
    assert (s["n"], s["mean"]) == (3, 2.0)
    assert s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert math.isnan(stats.summary([5.0])["std"])
    assert stats.summary([])["n"] == 0


def test_welch_matches_scipy():
    got = stats.welch(A, B)
    want = scipy.stats.ttest_ind(A, B, equal_var=False)
    assert got["t"] == pytest.approx(want.statistic, rel=1e-12)
    assert got["p"] == pytest.approx(want.pvalue, rel=1e-10)
    assert got["df"] == pytest.approx(want.df, rel=1e-12)
    assert got["diff"] == pytest.approx(np.mean(A) - np.mean(B))


def test_paired_matches_scipy():
    got = stats.paired(A, B)
    want = scipy.stats.ttest_rel(A, B)
    assert got["t"] == pytest.approx(want.statistic, rel=1e-12)
    assert got["p"] == pytest.approx(want.pvalue, rel=1e-10)
    assert got["df"] == len(A) - 1


def test_tests_refuse_too_few_values_and_handle_zero_variance():
    with pytest.raises(ValueError):
        stats.welch([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        stats.paired([1.0, 2.0], [1.0])
    const = stats.welch([1.0, 1.0], [2.0, 2.0])
    assert const["p"] == 0.0 and const["t"] == -math.inf


def test_holm_and_bonferroni_against_a_naive_reference():
    p = [0.01, 0.04, 0.03, 0.005, math.nan]
    # Holm: sort 0.005, 0.01, 0.03, 0.04 (m = 4) -> 0.02, 0.03, 0.06, max(0.06, 0.04).
    assert stats.correct(p, "holm")[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(stats.correct(p, "holm")[4])
    assert stats.correct(p, "bonferroni")[:4] == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert stats.correct([0.5, 0.9], "bonferroni") == [1.0, 1.0]
    assert stats.correct(p, "none")[:4] == p[:4]
    with pytest.raises(ValueError):
        stats.correct(p, "bh")


def test_differences_summarise_the_within_seed_differences_and_count_rises():
    d = [3.0, -1.0, 1.0]
    got = stats.differences(d)
    # mean 1, std (ddof = 1) 2, t(0.975, 2) = 4.302653: half-width 2 t / sqrt 3.
    assert (got["n"], got["mean"], got["rose"]) == (3, 1.0, 2)
    assert got["std"] == pytest.approx(2.0)
    assert got["ci95"] == pytest.approx(2 * 4.302653 / math.sqrt(3), rel=1e-6)
    assert stats.differences([0.0, 0.0])["rose"] == 0  # zero is not a rise
