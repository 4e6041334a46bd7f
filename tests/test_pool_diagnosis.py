"""benchmarks/pool_wd_diagnosis.py and pool_additive_compare.py: the factorial's
backward pass is POOL's where it should be, and the tests' p-values are scipy's."""

import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from pool_additive_compare import vs_constant, welch  # noqa: E402
from pool_wd_diagnosis import backward_pass  # noqa: E402

from privrl_jax import planning  # noqa: E402
from privrl_jax.envs import (  # noqa: E402
    base_stock_policy,
    collect_inventory_data,
    make_inventory_params,
)
from privrl_jax.planning._pool import noise_bound

H = 2


@pytest.fixture(scope="module")
def setup():
    # Small enough that compiling pool_plan and the factorial's pass takes ~1 s each.
    params = make_inventory_params(1, H, boundary=0.9)
    data = collect_inventory_data(
        jax.random.key(0), params, base_stock_policy(jnp.array([0.5]), 0.3), 200
    )
    geom = planning.make_zone_geometry(params.boundary, 4, radius=0.9 * math.sqrt(2))
    return data, geom, planning.action_grid(1, 3)


# Two compilations each (pool_plan and the factorial's pass): 4-12 s on the shared
# 2-core CPU, so slow; every diagnosis run also records the same check in its table.
@pytest.mark.slow
def test_noise_and_e_rho_together_are_pool_plan(setup):
    # Same noise keys and the mechanism's E_rho: the released Q of POOL itself.
    data, geom, acts = setup
    pc = planning.PoolConfig(bonus_scale=0.01)
    mech = planning.pool_mechanism(2.0, H)
    e_rho = noise_bound(mech, H, geom.num_cells, pc.failure_prob)
    key = jax.random.key(3)
    ref = planning.pool_plan(key, data, geom, acts, mech, pc)
    q, counts, sums = backward_pass(data, geom, acts, mech.noise_std, e_rho, pc, key)
    np.testing.assert_allclose(counts, ref.counts, atol=1e-5)
    np.testing.assert_allclose(sums[:, 0], ref.sums, atol=1e-4)
    np.testing.assert_allclose(q, ref.q_tables, atol=1e-4)


@pytest.mark.slow
def test_no_noise_and_no_e_rho_is_the_non_private_plan(setup):
    data, geom, acts = setup
    pc = planning.PoolConfig(bonus_scale=0.01)
    ref = planning.pool_plan(jax.random.key(0), data, geom, acts, None, pc)
    q, counts, _ = backward_pass(data, geom, acts, 0.0, 0.0, pc, jax.random.key(9))
    np.testing.assert_allclose(counts, ref.counts, atol=0)
    np.testing.assert_allclose(q, ref.q_tables, atol=1e-5)


def test_e_rho_without_noise_zeroes_exactly_the_cells_with_n_at_most_e_rho(setup):
    # bonus_scale 0: Gamma is C H on n <= E_rho and 0 elsewhere, so Q = v_max * mean
    # of the exact statistics on the other cells.
    data, geom, acts = setup
    pc = planning.PoolConfig(bonus_scale=0.0)
    e = 20.0
    q, counts, sums = backward_pass(data, geom, acts, 0.0, e, pc, jax.random.key(0))
    h = 0
    vmax = H - h
    n = np.asarray(counts[h])
    want = np.where(
        n > e, vmax * np.clip(np.asarray(sums[h, 0]) / np.maximum(n, 1), 0, 1), 0.0
    )
    np.testing.assert_allclose(q[h], want, atol=1e-5)
    assert (n <= e).any() and (n > e).any()  # both branches exercised


def test_welch_and_one_sample_p_are_scipys():
    a = np.array([0.1, 0.3, 0.2, 0.5, 0.4])
    b = np.array([0.6, 0.4, 0.9, 0.7])
    sa = (a.mean(), a.std(ddof=1), a.size)
    sb = (b.mean(), b.std(ddof=1), b.size)
    assert welch(sa, sb) == pytest.approx(
        stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9
    )
    assert vs_constant(sa, 0.4) == pytest.approx(
        stats.ttest_1samp(a, 0.4).pvalue, rel=1e-9
    )
