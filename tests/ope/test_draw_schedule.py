"""ope.draw_schedule: batches drawn on the device have the plan's law (Poisson whole;
one-of-m uniform)."""

import jax
import numpy as np
import pytest
from scipy import stats

from privrl_jax import privacy
from privrl_jax.ope import _gpope
from privrl_jax.ope._gpope import draw_schedule

M, Q, STEPS, TRIALS = 200, 0.05, 400, 5


def _plan(q=Q, m=M, steps=STEPS, capacity=None):
    return privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=m, sampling_rate=q, microbatch_size=1, capacity=capacity
        ),
        l2_clip_norm=1.0,
        steps=steps,
        noise_multiplier=1.0,
    )


@pytest.fixture(scope="module")
def schedule():
    return draw_schedule(_plan(), jax.random.key(11), trials=TRIALS)


def test_batches_are_whole_sets_of_distinct_valid_indices(schedule):
    idx, mask = np.asarray(schedule.indices), np.asarray(schedule.mask)
    assert idx.shape[:2] == (TRIALS, STEPS) and idx.dtype == np.int32
    sizes = mask.sum(-1)
    assert idx.shape[-1] == sizes.max()  # padded to the largest batch, nothing cut
    # The mask is a prefix and the valid indices ascend strictly: distinct, in [0, m).
    assert np.all(mask == (np.arange(idx.shape[-1]) < sizes[..., None]))
    valid_next = mask[..., 1:]
    assert np.all(np.diff(idx, axis=-1)[valid_next] > 0)
    assert idx[mask].min() >= 0 and idx[mask].max() < M
    assert np.all(idx[~mask] == 0)


def test_batch_sizes_are_binomial_m_q(schedule):
    sizes = np.asarray(schedule.mask).sum(-1).ravel()  # 2000 batches
    n = sizes.size
    mean, var = M * Q, M * Q * (1 - Q)
    assert abs(sizes.mean() - mean) < 6 * np.sqrt(var / n)
    assert abs(sizes.var(ddof=1) / var - 1) < 6 * np.sqrt(2 / n)
    # Chi-square against Binomial(m, q), tails pooled to >= 5 expected per cell.
    lo, hi = int(stats.binom.ppf(0.005, M, Q)), int(stats.binom.isf(0.005, M, Q))
    observed = [np.sum(sizes <= lo)] + [np.sum(sizes == k) for k in range(lo + 1, hi)]
    observed += [np.sum(sizes >= hi)]
    expected = [stats.binom.cdf(lo, M, Q)] + [
        stats.binom.pmf(k, M, Q) for k in range(lo + 1, hi)
    ]
    expected += [stats.binom.sf(hi - 1, M, Q)]
    p = stats.chisquare(observed, np.asarray(expected) * n).pvalue
    assert p > 1e-4, p
    # Sizes are uncorrelated across steps.
    per_trial = np.asarray(schedule.mask).sum(-1)
    lag1 = np.mean([np.corrcoef(s[:-1], s[1:])[0, 1] for s in per_trial])
    assert abs(lag1) < 6 / np.sqrt(n)


def test_every_index_is_included_with_probability_q(schedule):
    idx, mask = np.asarray(schedule.indices), np.asarray(schedule.mask)
    counts = np.bincount(idx[mask], minlength=M)
    n = TRIALS * STEPS
    p = stats.chisquare(counts, np.full(M, n * Q) * counts.sum() / (n * Q * M)).pvalue
    assert p > 1e-4, p
    assert abs(counts.sum() / (n * M) - Q) < 6 * np.sqrt(Q * (1 - Q) / (n * M))


def test_a_wrong_rate_is_rejected_by_the_same_check():
    # The mean-size check above separates q from 1.2 q: a sampler off by 20% fails it.
    sizes = np.asarray(
        draw_schedule(_plan(q=1.2 * Q), jax.random.key(11), trials=TRIALS).mask
    )
    sizes = sizes.sum(-1).ravel()
    assert abs(sizes.mean() - M * Q) > 6 * np.sqrt(M * Q * (1 - Q) / sizes.size)


def test_more_gap_blocks_extend_the_stream_and_the_schedule_is_reproducible():
    key = jax.random.key(3)
    short = np.asarray(_gpope._poisson_positions(key, (2, 3), 1, Q, M)[0])
    long = np.asarray(_gpope._poisson_positions(key, (2, 3), 4, Q, M)[0])
    np.testing.assert_array_equal(long[:1], short)
    a = draw_schedule(_plan(), key)
    b = draw_schedule(_plan(), key)
    assert a.indices.shape[0] == STEPS
    np.testing.assert_array_equal(np.asarray(a.indices), np.asarray(b.indices))


def test_a_dense_rate_keeps_batches_whole():
    # q = 0.9 over m = 200: about 180 per batch, 12 blocks of gaps.
    sch = draw_schedule(_plan(q=0.9, steps=50), jax.random.key(4))
    sizes = np.asarray(sch.mask).sum(-1)
    assert abs(sizes.mean() - 180) < 6 * np.sqrt(200 * 0.9 * 0.1 / 50)


def test_truncated_samplers_are_refused():
    with pytest.raises(ValueError, match="without capacity"):
        draw_schedule(_plan(capacity=8), jax.random.key(0))


def _uniform_plan(steps):
    return privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=M),
        l2_clip_norm=1.0,
        steps=steps,
        noise_multiplier=1.0,
    )


def test_one_of_m_batches_are_one_uniform_index_per_step():
    sch = draw_schedule(_uniform_plan(STEPS), jax.random.key(5), trials=TRIALS)
    idx, mask = np.asarray(sch.indices), np.asarray(sch.mask)
    assert idx.shape == mask.shape == (TRIALS, STEPS, 1) and mask.all()
    assert idx.min() >= 0 and idx.max() < M
    # 2,000 draws over 200 cells: uniform counts (chi-square) and no lag-1 dependence.
    counts = np.bincount(idx.ravel(), minlength=M)
    assert stats.chisquare(counts).pvalue > 1e-4
    flat = idx[..., 0].astype(float)
    lag1 = np.mean([np.corrcoef(s[:-1], s[1:])[0, 1] for s in flat])
    assert abs(lag1) < 6 / np.sqrt(TRIALS * (STEPS - 1))
    one = draw_schedule(_uniform_plan(3), jax.random.key(5))
    assert np.asarray(one.indices).shape == (3, 1)


def test_under_jit_a_poisson_schedule_says_call_outside_jit_and_uniform_one_runs():
    plan = _plan(steps=3)
    with pytest.raises(ValueError, match=r"^draw_schedule: call outside jit") as err:
        jax.jit(lambda k: draw_schedule(plan, k).indices)(jax.random.key(0))
    assert "\n" not in str(err.value)
    one = privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=M),
        l2_clip_norm=1.0,
        steps=7,
        noise_multiplier=1.0,
    )
    jitted = jax.jit(lambda k: draw_schedule(one, k).indices)(jax.random.key(3))
    np.testing.assert_array_equal(jitted, draw_schedule(one, jax.random.key(3)).indices)
