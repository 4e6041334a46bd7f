"""The HIV simulator against Adams et al. (2004)'s published steady states and SciPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import fsolve

from privrl_jax.envs import _hiv

P = _hiv.HIVParams()
UNHEALTHY = np.array(_hiv.UNHEALTHY_STEADY_STATE)
# Adams et al. 2004's "early infection" start: the uninfected state plus one virion/ml
# and a few infected cells.
EARLY_INFECTION = np.array([1e6, 3198.0, 1e-4, 1e-4, 1.0, 10.0])


def rhs_numpy(t, x, eps1, eps2):
    """A second, independent transcription of Adams et al.'s eq. 2.1 (float64)."""
    t1, t2, t1s, t2s, v, e = x
    i1 = (1 - eps1) * 8e-7 * v * t1
    i2 = (1 - 0.34 * eps1) * 1e-4 * v * t2
    inf = t1s + t2s
    return [
        1e4 - 0.01 * t1 - i1,
        31.98 - 0.01 * t2 - i2,
        i1 - 0.7 * t1s - 1e-5 * e * t1s,
        i2 - 0.7 * t2s - 1e-5 * e * t2s,
        (1 - eps2) * 100 * 0.7 * inf
        - 13 * v
        - ((1 - eps1) * 8e-7 * t1 + (1 - 0.34 * eps1) * 1e-4 * t2) * v,
        1 + 0.3 * inf / (inf + 100) * e - 0.25 * inf / (inf + 500) * e - 0.1 * e,
    ]


def within_rounding(x, published, rel=2e-3):
    # The published values are rounded to integers.
    return np.abs(np.asarray(x) - published) <= 0.5 + rel * published


def test_uninfected_steady_state_is_an_equilibrium():
    # T1 = lambda1/d1, T2 = lambda2/d2, no infection, E = lambda_E/delta_E.
    x = jnp.array([1e4 / 0.01, 31.98 / 0.01, 0.0, 0.0, 0.0, 1.0 / 0.1])
    np.testing.assert_allclose(np.asarray(x[:2]), [1e6, 3198.0])
    np.testing.assert_allclose(_hiv.derivatives(x, 0.0, 0.0, P), np.zeros(6), atol=1e-6)


@pytest.mark.parametrize(
    "published", [_hiv.UNHEALTHY_STEADY_STATE, _hiv.HEALTHY_STEADY_STATE]
)
def test_published_steady_states_round_the_model_equilibria(published):
    # Adams et al. 2004, Table 2 (and Ernst et al. 2006) print the equilibria rounded to
    # integers: the exact equilibrium near each must round to the printed numbers.
    published = np.array(published)
    eq = fsolve(lambda x: rhs_numpy(0, x, 0, 0), published, xtol=1e-12)
    assert np.all(np.abs(eq - published) <= 0.5), eq
    # ... and the JAX right-hand side vanishes there too (float32: relative 1e-4 / day).
    rate = np.asarray(_hiv.derivatives(jnp.asarray(eq, jnp.float32), 0.0, 0.0, P)) / eq
    assert np.all(np.abs(rate) < 1e-4), rate


def test_untreated_system_stays_at_the_unhealthy_steady_state():
    x = jnp.asarray(UNHEALTHY)
    x = _hiv.integrate(x, 0.0, 0.0, P, days=1000.0)
    assert np.all(within_rounding(x, UNHEALTHY)), np.asarray(x)


def test_early_infection_converges_to_the_published_unhealthy_state():
    # Adams et al. 2004 (Fig. 2): untreated, the early infection settles at the
    # unhealthy equilibrium of Table 2, through an acute phase with V ~ 2.5e6 (stiff: k2
    # V ~ 250/day).
    x = _hiv.integrate(jnp.asarray(EARLY_INFECTION), 0.0, 0.0, P, days=800.0)
    assert np.all(within_rounding(x, UNHEALTHY)), np.asarray(x)


def test_integrator_matches_scipy_lsoda_over_a_switching_schedule():
    # The convergence check behind the default tolerances (docs/gpope_envs.md).
    actions = np.random.default_rng(0).integers(0, 4, 30)
    x_ref = UNHEALTHY.copy()
    x = jnp.asarray(UNHEALTHY, jnp.float32)
    worst = 0.0
    step = jax.jit(lambda x, e1, e2: _hiv.integrate(x, e1, e2, P, days=5.0))
    for a in actions:
        e1, e2 = _hiv.ACTIONS[a][0] * 0.7, _hiv.ACTIONS[a][1] * 0.3
        x_ref = solve_ivp(
            rhs_numpy,
            (0, 5),
            x_ref,
            args=(e1, e2),
            method="LSODA",
            rtol=1e-10,
            atol=1e-10,
        ).y[:, -1]
        x = step(x, *_hiv.drug_efficacies(a, P))
        worst = max(worst, float(np.max(np.abs(np.asarray(x) / x_ref - 1))))
    assert worst < 2e-3, worst


def test_env_reset_step_and_reward_by_hand():
    env = _hiv.HIVTreatment()
    params = env.default_params
    obs, state = env.reset(jax.random.key(0), params)
    np.testing.assert_allclose(obs, np.log10(UNHEALTHY), rtol=1e-6)
    obs, state2, reward, done, _ = env.step(jax.random.key(1), state, 3, params)
    x = np.asarray(state2.cells, np.float64)
    expected = -(0.1 * x[4] + 2e4 * 0.7**2 + 2e3 * 0.3**2 - 1e3 * x[5])
    np.testing.assert_allclose(float(reward), expected, rtol=1e-5)
    np.testing.assert_allclose(obs, np.log10(x), rtol=1e-5)
    assert not bool(done) and int(state2.time) == 1
    # Both drugs for 5 days cut the viral load (Adams et al.: V falls within days).
    assert x[4] < 0.5 * UNHEALTHY[4]


def test_reset_spread_is_multiplicative_and_bounded():
    env = _hiv.HIVTreatment()
    params = env.default_params.replace(init_log10_spread=0.2)
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.key(0), 64), params
    )
    dev = np.asarray(obs) - np.log10(UNHEALTHY)
    assert np.all(np.abs(dev) <= 0.2 + 1e-5) and np.std(dev) > 0.05
