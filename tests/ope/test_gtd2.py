"""GTD2's per-trajectory statistics and directions, LSTD, and the medical chain MDP."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import ope
from privrl_jax.ope._gpope import gtd2_expected
from privrl_jax.ope._gtd2 import (
    trajectory_direction,
    trajectory_stats,
    transition_stats,
)

GAMMA = 0.5


def _three_state_trajectory():
    """s0 -> s1 -> s2 -> terminal, one-hot features,
    then one padded row holding NaNs."""
    e = np.eye(3, dtype=np.float32)
    nan = np.full(3, np.nan, np.float32)
    tr = ope.Transitions(
        phi_tm1=jnp.asarray(np.stack([e[0], e[1], e[2], nan])),
        r_t=jnp.asarray([1.0, 0.0, -1.0, np.nan]),
        discount_t=jnp.asarray([GAMMA, GAMMA, 0.0, np.nan]),
        phi_t=jnp.asarray(np.stack([e[1], e[2], np.zeros(3), nan])),
        rho_tm1=jnp.asarray([2.0, 0.5, 1.0, np.nan]),
    )
    return tr, jnp.asarray([True, True, True, False])


# By hand: A_t = rho phi_tm1 (phi_tm1 - gamma phi_t)^T, b_t = rho r phi_tm1, C_t = phi
# phi^T.
#   t1: rho 2,   e0 (e0 - .5 e1)^T -> row 0 = [2, -1, 0];   b = [2, 0, 0]
#   t2: rho .5,  e1 (e1 - .5 e2)^T -> row 1 = [0, .5, -.25]; b = 0 (r = 0)
#   t3: rho 1,   e2 e2^T (terminal) -> row 2 = [0, 0, 1];    b = [0, 0, -1]
A_SUM = np.array([[2.0, -1.0, 0.0], [0.0, 0.5, -0.25], [0.0, 0.0, 1.0]])
B_SUM = np.array([2.0, 0.0, -1.0])
C_SUM = np.eye(3)


@pytest.mark.parametrize("normalization, divisor", [("mean", 3.0), ("horizon", 4.0)])
def test_hand_built_trajectory_stats(normalization, divisor):
    tr, mask = _three_state_trajectory()
    stats = trajectory_stats(tr, mask, normalization)
    np.testing.assert_allclose(stats.a, A_SUM / divisor, atol=1e-7)
    np.testing.assert_allclose(stats.b, B_SUM / divisor, atol=1e-7)
    np.testing.assert_allclose(stats.c, C_SUM / divisor, atol=1e-7)
    # The matrix-free direction equals B = (-A^T w, A theta - b + C w) from these
    # matrices.
    theta, w = jnp.asarray([0.3, -1.2, 2.0]), jnp.asarray([-0.7, 0.4, 1.5])
    got = trajectory_direction((theta, w), tr, mask, normalization)
    a, b, c = A_SUM / divisor, B_SUM / divisor, C_SUM / divisor
    np.testing.assert_allclose(got[0], -a.T @ np.asarray(w), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        got[1], a @ np.asarray(theta) - b + c @ np.asarray(w), rtol=1e-6, atol=1e-7
    )


def test_unbatched_transition_stats_non_one_hot():
    phi_tm1, phi_t = jnp.asarray([1.0, 2.0]), jnp.asarray([3.0, -1.0])
    s = transition_stats(
        phi_tm1, jnp.asarray(0.5), jnp.asarray(0.9), phi_t, jnp.asarray(2.0)
    )
    # phi_tm1 - 0.9 phi_t = [-1.7, 2.9]; A = 2 * [[1], [2]] [-1.7, 2.9].
    np.testing.assert_allclose(s.a, [[-3.4, 5.8], [-6.8, 11.6]], rtol=1e-6)
    np.testing.assert_allclose(s.b, [1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(s.c, [[1.0, 2.0], [2.0, 4.0]], rtol=1e-6)


S = 5
TARGET = ope.treatment_policy([0.9, 0.8, 0.6, 0.4, 0.2])
BEHAVIOUR = ope.treatment_policy([0.3] * S)


@pytest.fixture(scope="module")
def chain():
    mdp = ope.medical_chain(S)
    col = ope.collect(
        jax.random.key(0),
        mdp,
        BEHAVIOUR,
        TARGET,
        ope.one_hot_features(S),
        num_trajectories=4000,
        max_length=30,
    )
    return mdp, col


def test_exact_values_satisfy_bellman_and_lengths_vary(chain):
    mdp, col = chain
    v = np.asarray(ope.exact_values(mdp, TARGET), np.float64)
    p = np.asarray(mdp.transition, np.float64)
    r = np.asarray(mdp.reward, np.float64)
    pi = np.asarray(TARGET, np.float64)
    v_ext = np.concatenate(
        [v, [0.0, 0.0]]
    )  # death and discharge are absorbing, value 0
    bellman = np.einsum("sa,sat,sat->s", pi, p, r + 0.9 * v_ext)
    np.testing.assert_allclose(v, bellman, atol=1e-5)
    assert v[0] < v[-1]  # critical patients are worth less than nearly well ones
    lengths = np.asarray(col.data.mask.sum(1))
    assert lengths.min() == 1 and lengths.max() == 30 and 5 < lengths.mean() < 20


def test_rho_is_pi_over_pi_b_and_one_on_policy(chain):
    mdp, col = chain
    mask = np.asarray(col.data.mask)
    s, a = np.asarray(col.states)[mask], np.asarray(col.actions)[mask]
    rho = np.asarray(col.data.transitions.rho_tm1)[mask]
    np.testing.assert_allclose(
        rho, np.asarray(TARGET)[s, a] / np.asarray(BEHAVIOUR)[s, a]
    )
    # Wait (pi_b = 0.7) and treat (pi_b = 0.3) in each of the 5 levels: 10 distinct
    # ratios.
    expected = sorted(
        [
            0.1 / 0.7,
            0.2 / 0.7,
            0.4 / 0.7,
            0.6 / 0.7,
            0.8 / 0.7,
            0.2 / 0.3,
            0.4 / 0.3,
            0.6 / 0.3,
            0.8 / 0.3,
            0.9 / 0.3,
        ]
    )
    np.testing.assert_allclose(np.unique(rho.round(5)), expected, rtol=1e-4)
    # E_b[rho | s] = 1 in every level, within 6 standard errors.
    for level in range(S):
        x = rho[s == level]
        assert abs(x.mean() - 1.0) < 6 * x.std() / np.sqrt(x.size)
    on = ope.collect(
        jax.random.key(1),
        mdp,
        TARGET,
        TARGET,
        ope.one_hot_features(S),
        num_trajectories=4000,
        max_length=30,  # the fixture's shapes: no new compile
    )
    assert np.all(np.asarray(on.data.transitions.rho_tm1) == 1.0)


def test_lstd_recovers_v_pi_and_the_mean_normalization_is_biased(chain):
    mdp, col = chain
    v = np.asarray(ope.exact_values(mdp, TARGET))
    theta, w = ope.lstd_solution(ope.dataset_stats(col.data, "horizon"))
    np.testing.assert_array_equal(w, 0.0)
    # Tabular off-policy LSTD(0) is consistent for V^pi; 4000 trajectories, ~40k
    # transitions: sampling error of a few 1e-2 at most.
    np.testing.assert_allclose(theta, v, atol=0.06)
    # The paper's 1/tau_i weighting over-weights transitions of trajectories that end
    # early (death ends them): a bias far beyond the sampling error at the critical
    # level.
    theta_mean, _ = ope.lstd_solution(ope.dataset_stats(col.data, "mean"))
    assert theta_mean[0] < v[0] - 0.15


def test_noise_free_gtd2_converges_to_lstd(chain):
    _, col = chain
    stats = ope.dataset_stats(col.data)
    theta_star, _ = ope.lstd_solution(stats)
    beta, steps = 1.0, 20_000
    # GTD2's mean update is x <- (I - beta M) x + beta (0, b), M = [[0, -A^T], [A, C]]:
    # the error contracts by the spectral radius r of I - beta M per step.
    a, c = np.asarray(stats.a, np.float64), np.asarray(stats.c, np.float64)
    m = np.block([[np.zeros_like(a), -a.T], [a, c]])
    r = np.max(np.abs(np.linalg.eigvals(np.eye(2 * S) - beta * m)))
    assert r < 1 and r**steps * 10 * np.linalg.norm(theta_star) < 1e-6
    theta, w = gtd2_expected(stats, steps=steps, step_size=ope.StepSize(beta))
    # What is left is float32 rounding of a fixed point with cond(A) ~ 10: 1e-4 is
    # generous.
    np.testing.assert_allclose(theta, theta_star, atol=1e-4)
    np.testing.assert_allclose(w, 0.0, atol=1e-4)
