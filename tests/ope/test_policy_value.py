"""DP policy scoring: LSTDQ on state-action features recovers a deterministic policy's
exact value on a small MDP; GPOPE without noise converges to it; RBF features are unit
norm and built from public data only."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import ope, privacy
from privrl_jax.ope._policy_value import (
    StateActionFeatures,
    lstd_policy_value,
    policy_evaluation_data,
    start_features,
)

S, A, GAMMA, M, T = 3, 2, 0.8, 400, 30
RNG = np.random.default_rng(0)
P = RNG.dirichlet(np.ones(S), size=(S, A))  # [s, a, s']
R = RNG.uniform(0, 1, size=(S, A))
PI = np.array([1, 0, 1])  # the deterministic candidate


def _exact_value(pi=PI) -> float:
    # Q = R + gamma P Q(., pi(.)), solved as one linear system over (s, a).
    select = np.zeros((S, S * A))
    select[np.arange(S), np.arange(S) * A + pi] = 1.0
    trans = P.reshape(S * A, S) @ select
    q = np.linalg.solve(np.eye(S * A) - GAMMA * trans, R.reshape(-1))
    return float(np.mean(q.reshape(S, A)[np.arange(S), pi]))  # uniform starts


def _logged():
    # A uniform behaviour policy, one-hot observations and actions.
    s = np.zeros((M, T + 1), int)
    s[:, 0] = RNG.integers(0, S, M)
    a = RNG.integers(0, A, (M, T))
    for t in range(T):
        for i in range(M):
            s[i, t + 1] = RNG.choice(S, p=P[s[i, t], a[i, t]])
    eye_s, eye_a = np.eye(S, dtype=np.float32), np.eye(A, dtype=np.float32)
    rewards = R[s[:, :-1], a].astype(np.float32)
    return eye_s[s[:, :-1]], eye_a[a], rewards, eye_s[s[:, 1:]]


def _policy(obs):
    return jax.nn.one_hot(jnp.asarray(PI)[jnp.argmax(obs)], A)


def _features(obs, action):
    return jnp.outer(obs, action).reshape(-1)


@pytest.fixture(scope="module")
def data():
    obs, act, rew, nobs = _logged()
    mask = jnp.ones(rew.shape, bool)
    return policy_evaluation_data(obs, act, rew, nobs, mask, _policy, _features, GAMMA)


def _start_phi():
    return start_features(jnp.eye(S), _policy, _features)


def test_lstdq_recovers_the_exact_value(data):
    exact = _exact_value()
    got = float(lstd_policy_value(data, _start_phi()))
    # 12,000 transitions, tabular features: only the sampling error remains.
    assert got == pytest.approx(exact, rel=0.03)
    # The candidate's own value, not the other deterministic policy's.
    assert abs(exact - _exact_value(1 - PI)) > 0.1 * exact


def test_gpope_without_noise_converges_to_lstdq(data):
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=M, sampling_rate=0.1, microbatch_size=8
        ),
        l2_clip_norm=100.0,
        steps=3000,
        noise_multiplier=0.0,
    )
    got = ope.gpope_policy_value(
        plan,
        data,
        _start_phi(),
        seed=1,
        key=jax.random.key(2),
        step_size=ope.StepSize(1.0),
    )
    want = float(lstd_policy_value(data, _start_phi()))
    assert float(got) == pytest.approx(want, rel=0.05)


def test_rbf_features_are_unit_norm_and_public():
    public = np.random.default_rng(1).normal(size=(500, 4)) * [1, 2, 0.1, 0.1]
    rbf = ope.RBFFeatures.from_public(public, 8)
    assert rbf.centers.shape == (8, 4) and rbf.num_features == 9
    np.testing.assert_allclose(rbf.scales, public.std(axis=0), rtol=1e-9)
    f = StateActionFeatures(rbf, 2)
    phi = jax.vmap(f)(
        jnp.asarray(public[:5], jnp.float32), jnp.ones((5, 2)) * jnp.arange(5)[:, None]
    )
    assert phi.shape == (5, 27)
    np.testing.assert_allclose(jnp.linalg.norm(phi, axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError):
        ope.RBFFeatures.from_public(public[:4], 8)


def test_lstd_value_is_dataset_stats_lstd(data):
    # The two-contraction LSTDQ equals the per-trajectory statistics' solution.
    theta, _ = ope.lstd_solution(ope.dataset_stats(data))
    want = float(jnp.dot(_start_phi(), theta))
    got = float(lstd_policy_value(data, _start_phi()))
    assert got == pytest.approx(want, rel=1e-4)


def test_action_bins_put_psi_in_the_action_cell():
    public = np.random.default_rng(1).normal(size=(200, 4))
    rbf = ope.RBFFeatures.from_public(public, 8)
    f = StateActionFeatures(rbf, 2, action_bins=3)
    obs = jnp.asarray(public[0], jnp.float32)
    psi = rbf(obs)
    # Bins of [-1, 1]: (-1, -1) -> (0, 0); (0, 0.9) -> (1, 2); (1, 1) -> (2, 2).
    for action, cell in (((-1.0, -1.0), 0), ((0.0, 0.9), 1 + 2 * 3), ((1.0, 1.0), 8)):
        phi = f(obs, jnp.asarray(action)).reshape(9, 9)
        np.testing.assert_allclose(phi[:, cell], psi, rtol=1e-6)
        assert float(jnp.abs(phi).sum()) == pytest.approx(float(psi.sum()), rel=1e-5)
    assert f.num_features == 81
