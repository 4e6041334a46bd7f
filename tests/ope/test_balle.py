"""DP-LSW / DP-LSL (privrl_jax.ope._balle): hand-computed noise scales, naive least
squares,
first-visit returns by hand, and the local-sensitivity bounds against moved
trajectories."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import ope
from privrl_jax.ope._balle import (
    FirstVisits,
    clip_first_visits,
    first_visits,
    lsl_local_sensitivity,
    lsl_smooth_sensitivity,
    lsl_solution,
    lsw_local_sensitivity,
    lsw_smooth_sensitivity,
    lsw_solution,
    monte_carlo_stats,
    smooth_params,
    trajectory_first_visits,
)

EPS, DELTA = 1.0, 1e-5


def test_smooth_params_are_nrs07_lemma_2_10():
    log_term = math.log(2 / DELTA)  # 12.206...
    p = smooth_params(EPS, DELTA, dim=2)
    assert p.alpha == pytest.approx(
        1.0 / (5 * math.sqrt(2 * 12.206072645530174)), rel=1e-12
    )
    assert p.beta == pytest.approx(1.0 / (4 * (2 + log_term)), rel=1e-12)
    assert p.alpha == pytest.approx(0.040480, rel=1e-4)
    assert p.beta == pytest.approx(0.017598, rel=1e-4)


@pytest.mark.parametrize("bad", [(0.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (math.inf, 1e-5)])
def test_smooth_params_reject_bad_input(bad):
    with pytest.raises(ValueError):
        smooth_params(bad[0], bad[1], dim=2)


def test_trajectory_first_visits_by_hand():
    # states 0, 1, 0, (2 padded); returns-to-go with gamma 0.5: t2 = 3, t1 = 2 + 1.5 =
    # 3.5, t0 = 1 + 1.75 = 2.75. State 0's first visit is t0; state 2 only appears on
    # padding.
    visited, returns = trajectory_first_visits(
        jnp.array([0, 1, 0, 2]),
        jnp.array([1.0, 2.0, 3.0, 4.0]),
        jnp.array([True, True, True, False]),
        0.5,
        3,
    )
    np.testing.assert_array_equal(visited, [True, True, False])
    np.testing.assert_allclose(returns, [2.75, 3.5, 0.0], rtol=1e-6)


def _hand_stats():
    # Two tabular states, rho = (1/2, 1/2), n = (3, 1), returns in [0, 1] (W = B = 1), m
    # = 4: trajectories 0-2 visit state 0 with return 1/2, trajectory 3 visits state 1
    # with return 1.
    visits = FirstVisits(
        jnp.array([[True, False]] * 3 + [[False, True]]),
        jnp.array([[0.5, 0.0]] * 3 + [[0.0, 1.0]]),
    )
    stats = monte_carlo_stats(visits)
    np.testing.assert_array_equal(stats.counts, [3.0, 1.0])
    np.testing.assert_array_equal(stats.sums, [1.5, 1.0])
    return visits, stats, jnp.eye(2), jnp.array([0.5, 0.5])


def test_dp_lsw_noise_std_equals_the_formula_by_hand():
    visits, stats, phi, rho = _hand_stats()
    p = smooth_params(EPS, DELTA, dim=2)
    # ||(Gamma^1/2 Phi)^+||_2 = 1 / sqrt(1/2) = sqrt 2,
    # so U_w(k)^2 = 2 * sum_s 0.5 / max(n_s - k, 1)^2:
    # k = 0: 1/9 + 1 = 10/9; k = 1: 1/4 + 1 = 5/4; k >= 2: 2.
    psi = max(10 / 9, 1.25 * math.exp(-p.beta), 2 * math.exp(-2 * p.beta))
    release = ope.dp_lsw(
        jax.random.key(0),
        visits,
        phi,
        rho,
        epsilon=EPS,
        delta=DELTA,
        return_bounds=(0.0, 1.0),
        num_trajectories=4,
    )
    assert float(release.smooth_sensitivity) == pytest.approx(math.sqrt(psi), rel=1e-5)
    assert float(release.noise_std) == pytest.approx(math.sqrt(psi) / p.alpha, rel=1e-5)
    assert float(
        lsw_local_sensitivity(stats.counts, phi, rho, return_bounds=(0.0, 1.0))
    ) == pytest.approx(math.sqrt(10 / 9), rel=1e-5)


def test_dp_lsl_noise_std_equals_the_formula_by_hand():
    visits, stats, phi, rho = _hand_stats()
    p = smooth_params(EPS, DELTA, dim=2)
    # lambda = 2, ||Phi|| = 1, ||rho||_2 = sqrt(1/2), ||rho||_inf = 1/2: U_l(k) =
    # sqrt(1/2) + 0.5 sqrt(N_k), N_k = 0.5 min(3 + k, 4) + 0.5 min(1 + k, 4) = 2, 3,
    # 3.5, 4.
    u = [math.sqrt(0.5) + 0.5 * math.sqrt(n) for n in (2.0, 3.0, 3.5, 4.0, 4.0)]
    psi = max(math.exp(-k * p.beta) * x**2 for k, x in enumerate(u))
    release = ope.dp_lsl(
        jax.random.key(0),
        visits,
        phi,
        rho,
        epsilon=EPS,
        delta=DELTA,
        return_bounds=(0.0, 1.0),
        num_trajectories=4,
        ridge=2.0,
    )
    assert float(release.smooth_sensitivity) == pytest.approx(math.sqrt(psi), rel=1e-5)
    assert float(release.noise_std) == pytest.approx(math.sqrt(psi) / p.alpha, rel=1e-5)


def test_release_noise_has_the_stated_std_and_mean_theta():
    visits, stats, phi, rho = _hand_stats()
    run = jax.jit(
        jax.vmap(
            lambda k: (
                ope.dp_lsw(
                    k,
                    visits,
                    phi,
                    rho,
                    epsilon=EPS,
                    delta=DELTA,
                    return_bounds=(0.0, 1.0),
                    num_trajectories=4,
                ).theta
            )
        )
    )
    draws = np.asarray(run(jax.random.split(jax.random.key(1), 20000)))  # [20000, 2]
    std = float(
        ope.dp_lsw(
            jax.random.key(0),
            visits,
            phi,
            rho,
            epsilon=EPS,
            delta=DELTA,
            return_bounds=(0.0, 1.0),
            num_trajectories=4,
        ).noise_std
    )
    theta = np.asarray(lsw_solution(stats, phi, rho))
    np.testing.assert_allclose(theta, [0.5, 1.0], rtol=1e-6)  # the mean returns
    # 6-sigma tolerances: the std of a sample std over n draws is ~ std / sqrt(2n).
    np.testing.assert_allclose(draws.std(axis=0), std, rtol=6 / math.sqrt(2 * 20000))
    np.testing.assert_allclose(
        draws.mean(axis=0), theta, atol=6 * std / math.sqrt(20000)
    )


def _random_visits(rng, m, s, lo, hi, p_visit=0.5):
    visited = rng.random((m, s)) < p_visit
    returns = np.where(visited, rng.uniform(lo, hi, (m, s)), 0.0)
    return visited, returns


def _stats(visited, returns):
    return monte_carlo_stats(
        FirstVisits(jnp.asarray(visited), jnp.asarray(returns, jnp.float32))
    )


def test_solutions_equal_naive_numpy_least_squares():
    rng = np.random.default_rng(0)
    m, s, d = 30, 4, 3
    phi = rng.normal(size=(s, d))
    rho = np.array([0.1, 0.2, 0.3, 0.4])
    visited, returns = _random_visits(rng, m, s, -1.0, 2.0)
    stats = _stats(visited, returns)

    # LSL: every (trajectory, visited state) is a row sqrt(rho_s) phi_s -> sqrt(rho_s)
    # F_{i,s}; the ridge lambda/2 ||theta||^2 is d more rows sqrt(lambda/2) I -> 0.
    lam = 3.0
    rows = [
        np.sqrt(rho[j]) * phi[j] for i in range(m) for j in range(s) if visited[i, j]
    ]
    ys = [
        np.sqrt(rho[j]) * returns[i, j]
        for i in range(m)
        for j in range(s)
        if visited[i, j]
    ]
    a = np.vstack(rows + list(np.sqrt(lam / 2) * np.eye(d)))
    y = np.concatenate([ys, np.zeros(d)])
    naive_lsl = np.linalg.lstsq(a, y, rcond=None)[0]
    np.testing.assert_allclose(
        lsl_solution(
            stats, jnp.asarray(phi, jnp.float32), jnp.asarray(rho, jnp.float32), lam
        ),
        naive_lsl,
        rtol=1e-4,
        atol=1e-5,
    )

    # LSW: one row per state on the mean return (0 when unvisited), plus sqrt(ridge) I.
    for ridge in (0.0, 0.5):
        counts = visited.sum(0)
        mean = np.where(counts > 0, returns.sum(0) / np.maximum(counts, 1), 0.0)
        a = np.vstack([np.sqrt(rho)[:, None] * phi, np.sqrt(ridge) * np.eye(d)])
        y = np.concatenate([np.sqrt(rho) * mean, np.zeros(d)])
        naive_lsw = np.linalg.lstsq(a, y, rcond=None)[0]
        np.testing.assert_allclose(
            lsw_solution(
                stats,
                jnp.asarray(phi, jnp.float32),
                jnp.asarray(rho, jnp.float32),
                ridge,
            ),
            naive_lsw,
            rtol=1e-4,
            atol=1e-5,
        )


def test_first_visits_match_a_python_loop():
    rng = np.random.default_rng(1)
    m, t, s, gamma = 6, 7, 3, 0.8
    states = rng.integers(0, s, (m, t))
    rewards = rng.normal(size=(m, t)).astype(np.float32)
    lengths = rng.integers(0, t + 1, m)
    mask = np.arange(t)[None, :] < lengths[:, None]
    fv = first_visits(
        jnp.asarray(states), jnp.asarray(rewards), jnp.asarray(mask), gamma, s
    )
    for i in range(m):
        for j in range(s):
            steps = [u for u in range(lengths[i]) if states[i, u] == j]
            assert bool(fv.visited[i, j]) == bool(steps)
            if steps:
                g = sum(
                    gamma ** (u - steps[0]) * rewards[i, u]
                    for u in range(steps[0], lengths[i])
                )
                assert float(fv.returns[i, j]) == pytest.approx(g, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("method", ["lsw", "lsl"])
def test_one_trajectory_moves_theta_by_at_most_the_local_sensitivity(method):
    rng = np.random.default_rng(2)
    m, s, d, lo, hi, lam = 12, 5, 3, -1.0, 2.0, 4.0
    phi = jnp.asarray(rng.normal(size=(s, d)), jnp.float32)
    rho = jnp.asarray(rng.dirichlet(np.ones(s)), jnp.float32)
    beta = smooth_params(EPS, DELTA, d).beta
    kw = {"return_bounds": (lo, hi)}
    if method == "lsw":
        solve = lambda st: lsw_solution(st, phi, rho)
        local = lambda st: lsw_local_sensitivity(st.counts, phi, rho, **kw)
        smooth = lambda st: lsw_smooth_sensitivity(
            st.counts, phi, rho, beta=beta, num_trajectories=m, **kw
        )
    else:
        solve = lambda st: lsl_solution(st, phi, rho, lam)
        local = lambda st: lsl_local_sensitivity(
            st.counts, phi, rho, ridge=lam, num_trajectories=m, **kw
        )
        smooth = lambda st: lsl_smooth_sensitivity(
            st.counts, phi, rho, beta=beta, num_trajectories=m, ridge=lam, **kw
        )
    solve, local, smooth = jax.jit(solve), jax.jit(local), jax.jit(smooth)
    worst = 0.0
    for trial in range(60):
        visited, returns = _random_visits(
            rng, m, s, lo, hi, p_visit=rng.uniform(0.1, 0.9)
        )
        # The replacement: random, or extreme (every state, all returns at one end), or
        # empty.
        kind = trial % 3
        new_v = rng.random(s) < 0.5 if kind == 0 else np.full(s, kind == 1)
        new_r = np.where(new_v, rng.choice([lo, hi]), 0.0)
        i = rng.integers(m)
        v2, r2 = visited.copy(), returns.copy()
        v2[i], r2[i] = new_v, new_r
        x, x2 = _stats(visited, returns), _stats(v2, r2)
        moved = float(jnp.linalg.norm(solve(x) - solve(x2)))
        bound = float(local(x))
        assert moved <= bound * (1 + 1e-4) + 1e-6
        worst = max(worst, moved / bound)
        # beta-smoothness of the smooth bound, both ways.
        s1, s2 = float(smooth(x)), float(smooth(x2))
        assert s1 >= bound * (1 - 1e-6)
        assert s1 <= math.exp(beta) * s2 * (1 + 1e-5) and s2 <= math.exp(beta) * s1 * (
            1 + 1e-5
        )
    assert worst > 0.02  # the test moved theta by a visible fraction of the bound


@pytest.mark.slow
def test_lsw_recovers_the_chain_values_on_policy():
    # First-visit MC is unbiased on-policy (up to the time-limit cut, gamma^50 ~ 5e-3
    # here).
    mdp = ope.medical_chain(5)
    pi = ope.treatment_policy([0.9, 0.8, 0.6, 0.4, 0.2])
    phi = ope.one_hot_features(5)
    col = ope.collect(
        jax.random.key(3), mdp, pi, pi, phi, num_trajectories=3000, max_length=50
    )
    fv = first_visits(col.states, col.data.transitions.r_t, col.data.mask, 0.9, 5)
    theta = lsw_solution(monte_carlo_stats(fv), phi, jnp.full(5, 0.2))
    np.testing.assert_allclose(theta, ope.exact_values(mdp, pi), atol=0.03)


def test_bad_bounds_and_ridge_are_refused():
    visits, stats, phi, rho = _hand_stats()
    with pytest.raises(ValueError, match="lo <= 0 <= hi"):
        lsw_local_sensitivity(stats.counts, phi, rho, return_bounds=(0.5, 1.0))
    with pytest.raises(ValueError, match="ridge"):
        lsl_local_sensitivity(
            stats.counts,
            phi,
            rho,
            return_bounds=(0.0, 1.0),
            ridge=0.0,
            num_trajectories=4,
        )


def _one_wild_neighbour(wild: float):
    """12 trajectories with returns in [0, 1]; the neighbour replaces trajectory 0's
    returns
    by ``wild`` (a reward of 1e6, or NaN, as a user's data may hold)."""
    rng = np.random.default_rng(3)
    visited, returns = _random_visits(rng, 12, 3, 0.0, 1.0, p_visit=0.7)
    visited[0] = True
    wild_returns = returns.copy()
    wild_returns[0] = wild
    as_visits = lambda r: FirstVisits(jnp.asarray(visited), jnp.asarray(r, jnp.float32))  # noqa: E731
    return (
        as_visits(returns),
        as_visits(wild_returns),
        visited.sum(0).astype(np.float32),
    )


@pytest.mark.parametrize("wild", [1e6, -1e6, np.inf, np.nan])
@pytest.mark.parametrize("which", ["lsw", "lsl"])
def test_one_trajectory_outside_the_bounds_moves_the_release_by_at_most_its_sensitivity(
    wild, which
):
    """The smooth sensitivity assumes returns in [lo, hi]; a trajectory that leaves them
    (or is
    NaN) must move theta by at most the local sensitivity, and the released noise std
    must be the same data-independent-of-its-returns value (it depends on the visit
    counts only)."""
    x, x_wild, counts = _one_wild_neighbour(wild)
    phi = jnp.asarray(np.random.default_rng(4).normal(size=(3, 2)), jnp.float32)
    rho = jnp.array([0.2, 0.3, 0.5])
    bounds, ridge = (0.0, 1.0), 2.0
    kw = dict(epsilon=EPS, delta=DELTA, return_bounds=bounds)
    if which == "lsw":
        release = lambda v: ope.dp_lsw(jax.random.key(7), v, phi, rho, **kw)  # noqa: E731
        local = lsw_local_sensitivity(
            jnp.asarray(counts), phi, rho, return_bounds=bounds
        )
    else:
        release = lambda v: ope.dp_lsl(
            jax.random.key(7), v, phi, rho, ridge=ridge, **kw
        )  # noqa: E731
        local = lsl_local_sensitivity(
            jnp.asarray(counts),
            phi,
            rho,
            return_bounds=bounds,
            ridge=ridge,
            num_trajectories=12,
        )
    a, b = release(x), release(x_wild)
    assert np.all(np.isfinite(b.theta)) and float(b.noise_std) == float(a.noise_std)
    # Same key and same std: the noise cancels, what is left is the move of theta
    # itself.
    assert float(jnp.linalg.norm(a.theta - b.theta)) <= float(local) * (1 + 1e-5)


def test_clip_first_visits_maps_non_finite_returns_into_the_bounds():
    v = FirstVisits(
        jnp.array([[True, True, True, True, False]]),
        jnp.array([[np.nan, np.inf, -np.inf, 7.0, 0.0]], jnp.float32),
    )
    np.testing.assert_array_equal(
        clip_first_visits(v, (-1.0, 2.0)).returns, [[0.0, 2.0, -1.0, 2.0, 0.0]]
    )


def test_num_trajectories_that_disagree_with_the_visits_is_refused():
    visits, _, phi, rho = _hand_stats()
    with pytest.raises(ValueError, match="num_trajectories=5 but the visits hold 4"):
        ope.dp_lsw(
            jax.random.key(0),
            visits,
            phi,
            rho,
            epsilon=EPS,
            delta=DELTA,
            return_bounds=(0.0, 1.0),
            num_trajectories=5,
        )
