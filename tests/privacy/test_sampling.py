"""The samplers' law is the one the accountant assumes
(docs/dp_pitfalls.md, items 3-5)."""

import numpy as np
import pytest
import scipy.stats

from privrl_jax.privacy import PoissonSampler, UniformOneSampler
from privrl_jax.privacy._accounting import Sampling

N, Q, STEPS = 500, 0.05, 4000


@pytest.fixture(scope="module")
def sizes_and_counts():
    s = PoissonSampler(dataset_size=N, sampling_rate=Q, microbatch_size=8)
    sizes = np.empty(STEPS, int)
    counts = np.zeros(N, int)
    for t, b in enumerate(s.batches(seed=0, steps=STEPS)):
        idx = b.indices[b.mask]
        assert len(np.unique(idx)) == idx.size  # no unit twice in one batch
        sizes[t] = idx.size
        counts[idx] += 1
    return sizes, counts


def test_batch_size_is_binomial(sizes_and_counts):
    sizes, _ = sizes_and_counts
    mean, var = N * Q, N * Q * (1 - Q)
    assert abs(sizes.mean() - mean) < 6 * np.sqrt(var / STEPS)
    # The sample variance of STEPS draws: relative sd ~ sqrt(2/STEPS) (+ small kurtosis
    # term).
    assert abs(sizes.var() / var - 1) < 6 * np.sqrt(2 / STEPS)
    # Chi-square goodness of fit to Binomial(N, q) on pooled bins.
    lo, hi = int(mean - 3 * np.sqrt(var)), int(mean + 3 * np.sqrt(var))
    edges = np.arange(lo, hi + 1)
    observed = np.array(
        [np.sum(sizes < lo)]
        + [np.sum(sizes == k) for k in edges]
        + [np.sum(sizes > hi)]
    )
    pmf = scipy.stats.binom(N, Q)
    expected = STEPS * np.array(
        [pmf.cdf(lo - 1)] + [pmf.pmf(k) for k in edges] + [pmf.sf(hi)]
    )
    assert scipy.stats.chisquare(observed, expected).pvalue > 1e-4


def test_sizes_uncorrelated_across_steps(sizes_and_counts):
    sizes, _ = sizes_and_counts
    r = np.corrcoef(sizes[:-1], sizes[1:])[0, 1]
    assert abs(r) < 6 / np.sqrt(STEPS)


def test_every_index_included_with_probability_q(sizes_and_counts):
    _, counts = sizes_and_counts
    assert counts.min() > 0  # every index can be drawn
    sd = np.sqrt(STEPS * Q * (1 - Q))
    assert np.all(np.abs(counts - STEPS * Q) < 6 * sd)


def test_empty_batches_still_give_a_step():
    s = PoissonSampler(dataset_size=100, sampling_rate=0.01, microbatch_size=4)
    batches = list(s.batches(seed=1, steps=500))
    empty = sum(b.size == 0 for b in batches)
    assert len(batches) == 500
    assert all(b.indices.shape[0] >= 1 and b.indices.shape[1] == 4 for b in batches)
    # P(empty) = 0.99^100 = 0.366
    assert abs(empty / 500 - 0.99**100) < 6 * np.sqrt(0.366 * 0.634 / 500)


def test_large_batches_get_more_microbatches_not_cut():
    s = PoissonSampler(dataset_size=1000, sampling_rate=0.5, microbatch_size=16)
    b = s.sample(3)
    assert b.size > 16 and b.indices.shape == (-(-b.size // 16), 16)
    assert s.sampling == Sampling.POISSON


def test_truncated_poisson_caps_at_capacity_and_reports_its_scheme():
    s = PoissonSampler(
        dataset_size=1000, sampling_rate=0.5, microbatch_size=16, capacity=100
    )
    b = s.sample(3)
    assert b.size == 100
    assert s.sampling == Sampling.TRUNCATED_POISSON


def test_resumed_stream_equals_uninterrupted():
    s = PoissonSampler(dataset_size=200, sampling_rate=0.1, microbatch_size=8)
    full = list(s.batches(seed=7, steps=10))
    tail = list(s.batches(seed=7, steps=10, start=6))
    for a, b in zip(full[6:], tail):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.mask, b.mask)


def test_expected_batch_size_is_public():
    s = PoissonSampler(dataset_size=200, sampling_rate=0.1, microbatch_size=8)
    assert s.expected_batch_size == pytest.approx(20.0)


def test_uniform_one_is_uniform():
    idx = UniformOneSampler(dataset_size=20).sample_many(0, 20_000)
    counts = np.bincount(idx, minlength=20)
    assert scipy.stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dataset_size": 0}, "dataset_size"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"sampling_rate": 2.0}, "sampling_rate"),
        ({"microbatch_size": 0}, "microbatch_size"),
        ({"capacity": 0}, "capacity"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = dict(dataset_size=10, sampling_rate=0.1, microbatch_size=2)
    with pytest.raises(ValueError, match=match):
        PoissonSampler(**{**args, **kwargs})


def test_seed_is_required():
    with pytest.raises(ValueError, match="seed"):
        PoissonSampler(dataset_size=10, sampling_rate=0.1, microbatch_size=2).sample(
            None
        )
