"""The chain policy scorer's noiseless fixed point is the exact value (issue 51).

``privrl select --config chain_policies`` scores stochastic treatment policies by
GPOPE's value at the start distribution: one-hot state features, importance ratios,
weights 1/T. In expectation over the behaviour's trajectories its statistics are

    A = D (I - gamma P_pi) / T,   b = D r_pi / T,

D = diag(expected visits to each level within T steps under the behaviour), because
sum_a mu(a|s) rho(s, a) P(.|s, a) = P_pi(.|s). So A^-1 b = (I - gamma P_pi)^-1 r_pi =
V^pi exactly, for any target the behaviour covers: the scorer's bias can only come
from the finite run (steps, clip, noise), not from its fixed point. Checked here in
closed form and against the statistics of collected data.
"""

import jax
import numpy as np
import pytest

from privrl_jax import ope

S, T, M = 5, 20, 4000
BEHAVIOUR = ope.treatment_policy([0.3] * S)
# A stochastic target far from the behaviour (ratios from 1/7 to 3), one of
# configs/select/chain_policies.yaml's candidates.
TARGET = ope.treatment_policy([0.9, 0.1, 0.9, 0.1, 0.9])


def _population_stats(mdp: ope.ChainMDP, behaviour, target):
    """Closed-form E[A], E[b] of the scorer's data, from the chain's matrices."""
    trans = np.asarray(mdp.transition, np.float64)[:, :, :S]  # transient outcomes
    reward = np.asarray(mdp.reward, np.float64)
    full = np.asarray(mdp.transition, np.float64)
    mu, pi = np.asarray(behaviour, np.float64), np.asarray(target, np.float64)
    p_mu = np.einsum("sa,sat->st", mu, trans)
    visits = np.zeros(S)
    dist = np.asarray(mdp.initial, np.float64)
    for _ in range(T):  # expected visits within the padded length T
        visits += dist
        dist = dist @ p_mu
    gamma = float(mdp.gamma)
    # Importance-weighted sums over actions, written out (not simplified to P_pi), so
    # the identity sum_a mu rho P = P_pi is what the test relies on.
    rho = np.where(mu > 0, pi / np.where(mu > 0, mu, 1.0), 0.0)
    next_pi = np.einsum("sa,sa,sat->st", mu, rho, trans)
    r_pi = np.einsum("sa,sa,sat,sat->s", mu, rho, full, reward)
    d = np.diag(visits)
    return d @ (np.eye(S) - gamma * next_pi) / T, d @ r_pi / T


def test_population_fixed_point_is_the_exact_value():
    mdp = ope.medical_chain(S)
    a, b = _population_stats(mdp, BEHAVIOUR, TARGET)
    exact = np.asarray(ope.exact_values(mdp, TARGET), np.float64)
    np.testing.assert_allclose(np.linalg.solve(a, b), exact, rtol=1e-5, atol=1e-6)
    # Not the behaviour's value: the ratios do move the fixed point.
    behaviour_value = np.asarray(ope.exact_values(mdp, BEHAVIOUR))
    assert np.max(np.abs(exact - behaviour_value)) > 0.05


def test_collected_statistics_match_the_closed_form_and_recover_the_value():
    mdp = ope.medical_chain(S)
    col = ope.collect(
        jax.random.key(3),
        mdp,
        BEHAVIOUR,
        TARGET,
        ope.one_hot_features(S),
        num_trajectories=M,
        max_length=T,
    )
    stats = ope.dataset_stats(col.data, "horizon")
    a, b = _population_stats(mdp, BEHAVIOUR, TARGET)
    # 4000 trajectories, ~35k transitions: entries of A are O(0.1), sampling error a
    # few 1e-3.
    np.testing.assert_allclose(stats.a, a, atol=6e-3)
    np.testing.assert_allclose(stats.b, b, atol=4e-3)
    theta, _ = ope.lstd_solution(stats)
    exact = np.asarray(ope.exact_values(mdp, TARGET))
    start = np.asarray(mdp.initial)
    # The start value, which the selection compares across candidates.
    assert float(start @ np.asarray(theta)) == pytest.approx(
        float(start @ exact), abs=0.02
    )
