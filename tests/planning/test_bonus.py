"""Gamma of Algorithm 1 (DP-APVI's Bernstein-plus-privacy bonus) on
hand-computed cells."""

import math

import jax.numpy as jnp
import pytest

from privrl_jax import planning
from privrl_jax.planning._pool import (
    bonus_iota,
    noise_bound,
    paper_constants_samples_needed,
    pessimistic_q,
)


def _q(counts, sums, squares, v_max, e_rho, iota, cfg):
    return float(
        pessimistic_q(
            jnp.array([counts]),
            jnp.array([sums]),
            jnp.array([squares]),
            jnp.float32(v_max),
            e_rho,
            iota,
            5,
            cfg,
        )[0]
    )


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_gamma_on_a_hand_cell(scale):
    # n~ = 50, S~ = 30, S2~ = 20: mean 0.6, Var(y) = 0.4 - 0.36 = 0.04, v_max = 3.
    cfg = planning.PoolConfig(bonus_scale=scale)
    e_rho, iota = 5.0, math.log(5 * 30 / 0.05)
    var = 9 * 0.04
    gamma = math.sqrt(2) * math.sqrt(var * iota / (50 - 5)) + 16 * 3 * 5 * iota / 50
    want = min(max(3 * 0.6 - scale * gamma, 0.0), 3.0)
    assert _q(50.0, 30.0, 20.0, 3.0, e_rho, iota, cfg) == pytest.approx(want, abs=2e-5)
    if scale == 1.0:
        assert want == 0.0  # the paper's constants zero this cell
    else:
        assert 0.0 < want < 1.8


def test_privacy_term_divides_by_the_noisy_count_and_uncovered_cells_get_ch():
    # Var = 0 isolates the privacy term C2 v_max E_rho iota / n~ (Alg. 1 line 5 of
    # Qiao & Wang 2023: over n~, not n~ - E_rho).
    cfg = planning.PoolConfig(bonus_scale=0.001)
    q = _q(20.0, 20.0, 20.0, 2.0, 4.0, 3.0, cfg)
    assert q == pytest.approx(2.0 - 0.001 * 16 * 2 * 4 * 3 / 20, abs=1e-5)
    # n~ <= E_rho: Gamma = C H, so Q = 0 whatever the scale and the mean.
    assert _q(4.0, 4.0, 4.0, 2.0, 4.0, 3.0, planning.PoolConfig(bonus_scale=0.0)) == 0.0


def test_noise_bound_and_the_samples_the_paper_constants_need():
    rho, horizon, k, delta = 1.0, 5, 30, 0.05
    mech = planning.pool_mechanism(rho, horizon)
    sigma = math.sqrt(3 * horizon / (2 * rho))
    assert mech.noise_std == pytest.approx(sigma, rel=1e-6)
    e_rho = noise_bound(mech, horizon, k, delta)
    assert e_rho == pytest.approx(
        sigma * math.sqrt(2 * math.log(6 * horizon * k / delta))
    )
    assert noise_bound(None, horizon, k, delta) == 0.0
    iota = bonus_iota(horizon, k, delta)
    assert iota == pytest.approx(math.log(horizon * k / delta))
    # At the returned n~, a noiseless-variance cell with mean 1 loses exactly alpha
    # v_max.
    n = paper_constants_samples_needed(rho, horizon, k, delta, alpha=0.1)
    assert n == pytest.approx(16 * e_rho * iota / 0.1)
    assert 1e4 < n < 2e4  # ~1.55e4 samples per cell: vacuous at 2000 episodes
    q = _q(n, n, n, 4.0, e_rho, iota, planning.PoolConfig(bonus_scale=1.0))
    assert q == pytest.approx(4.0 * 0.9, rel=1e-4)


def test_action_candidates_grid_then_a_fixed_public_set():
    g = planning.action_candidates(2, 11, 256)
    assert g.shape == (121, 2)  # 11^2 <= 256: the full grid
    import numpy as np

    np.testing.assert_allclose(g, planning.action_grid(2, 11))
    c = planning.action_candidates(3, 11, 256, seed=0)
    assert c.shape == (256, 3) and float(c.min()) >= 0 and float(c.max()) <= 1
    np.testing.assert_allclose(
        c[:11], np.repeat(np.linspace(0, 1, 11)[:, None], 3, 1), atol=1e-7
    )  # the diagonal orders come first
    np.testing.assert_array_equal(c, planning.action_candidates(3, 11, 256, seed=0))
    assert not np.array_equal(c, planning.action_candidates(3, 11, 256, seed=1))
    with pytest.raises(ValueError, match="max_candidates >= levels"):
        planning.action_candidates(3, 11, 5)
