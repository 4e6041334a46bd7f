"""Off-policy data from continuous envs and Monte Carlo true values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.envs import _hiv, _mountain_car
from privrl_jax.ope import _features as F
from privrl_jax.ope import _gtd2
from privrl_jax.ope import _montecarlo as mc

ENV, PARAMS = _mountain_car.mountain_car(200)
BEHAVIOUR = F.EpsilonSoft(_mountain_car.energy_pumping_action, 0.5, 3)
TARGET = F.EpsilonSoft(_mountain_car.energy_pumping_action, 0.1, 3)
FEATURES = F.FeatureMap(
    (F.TileCoder(_mountain_car.OBS_LOW, _mountain_car.OBS_HIGH, 4, 2),), bias=True
)


@pytest.fixture(scope="module")
def collected():
    return mc.collect_offpolicy(
        jax.random.key(0),
        ENV,
        PARAMS,
        BEHAVIOUR,
        TARGET,
        FEATURES,
        gamma=0.9,
        reward_scale=0.1,
        num_trajectories=24,
        max_length=200,
    )


def test_importance_ratio_by_hand():
    # behaviour eps 0.5 over 3 actions: greedy 1/6 + 1/2 = 2/3, others 1/6;
    # target eps 0.1: greedy 0.9 + 0.1/3, others 0.1/3.
    b = BEHAVIOUR(jnp.array([-0.5, 0.01]))
    t = TARGET(jnp.array([-0.5, 0.01]))
    np.testing.assert_allclose(
        mc.importance_ratio(t, b, 2), (0.9 + 0.1 / 3) / (2 / 3), rtol=1e-6
    )
    np.testing.assert_allclose(
        mc.importance_ratio(t, b, 0), (0.1 / 3) / (1 / 6), rtol=1e-6
    )


def test_collected_rho_matches_the_stochastic_policies(collected):
    greedy = jax.vmap(jax.vmap(_mountain_car.energy_pumping_action))(
        collected.observations
    )
    expected = np.where(np.asarray(collected.actions) == np.asarray(greedy), 1.4, 0.2)
    np.testing.assert_allclose(collected.data.transitions.rho_tm1, expected, rtol=1e-5)
    # The behaviour really is stochastic: both kinds of action occur, about 2/3 greedy.
    frac = float(np.mean(expected[np.asarray(collected.data.mask)] == 1.4))
    assert 0.55 < frac < 0.8


def test_layout_masks_discounts_and_features(collected):
    d = collected.data
    tr, mask = d.transitions, np.asarray(d.mask)
    lengths = mask.sum(1)
    # Masks are prefixes.
    for row, n in zip(mask, lengths):
        assert row[:n].all() and not row[n:].any()
    disc = np.asarray(tr.discount_t)
    for i, n in enumerate(lengths):
        terminal = disc[i, n - 1] == 0.0
        # A row shorter than T ended by termination; every other real row bootstraps
        # with gamma (a cut at T included); a terminal row has phi_t = 0.
        assert terminal or n == 200
        np.testing.assert_allclose(disc[i, : n - 1], 0.9, rtol=1e-6)
        if terminal:
            assert np.all(np.asarray(tr.phi_t[i, n - 1]) == 0)
        else:
            np.testing.assert_allclose(disc[i, n - 1], 0.9, rtol=1e-6)
    assert (lengths < 200).any() and (lengths == 200).any()
    # Consecutive rows chain: phi_t of row t is phi_tm1 of row t + 1.
    np.testing.assert_allclose(
        tr.phi_t[:, :-1][mask[:, 1:]], tr.phi_tm1[:, 1:][mask[:, 1:]]
    )
    np.testing.assert_allclose(np.asarray(tr.r_t)[mask], -0.1)
    np.testing.assert_allclose(np.linalg.norm(tr.phi_tm1, axis=-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("normalization", ["horizon", "mean"])
def test_pooled_stats_equal_dataset_stats(collected, normalization):
    a = mc.pooled_stats(collected.data, normalization)
    b = _gtd2.dataset_stats(collected.data, normalization)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-4)


def test_mc_values_closed_form_for_a_deterministic_policy():
    # The deterministic energy-pumping controller: return = -s (1 - g^L) / (1 - g), L
    # the steps to the goal, counted by a plain Python loop over the same env.
    obs, states = mc.evaluation_states(jax.random.key(3), ENV, PARAMS, num_states=3)
    greedy = F.EpsilonSoft(_mountain_car.energy_pumping_action, 0.0, 3)
    v = mc.mc_values(
        jax.random.key(4),
        ENV,
        PARAMS,
        greedy,
        obs,
        states,
        gamma=0.97,
        reward_scale=0.5,
        horizon=300,
        num_rollouts=2,
    )
    step = jax.jit(
        lambda o, s: ENV.step_env(
            jax.random.key(0), s, _mountain_car.energy_pumping_action(o), PARAMS
        )
    )
    for k in range(3):
        o, s = obs[k], jax.tree_util.tree_map(lambda x, k=k: x[k], states)
        steps = 0
        while True:
            o, s, _, done, _ = step(o, s)
            steps += 1
            if bool(done):
                break
        np.testing.assert_allclose(
            v.values[k], -0.5 * (1 - 0.97**steps) / 0.03, rtol=1e-5
        )
    np.testing.assert_allclose(v.stderr, 0.0, atol=1e-7)


def test_mc_values_of_a_random_policy_before_any_termination():
    # No policy reaches the goal from x in [-0.6, -0.4] within 20 steps (speed <= 0.07
    # and it starts at rest): every return is the full 20-step sum, whatever the
    # actions.
    obs, states = mc.evaluation_states(jax.random.key(5), ENV, PARAMS, num_states=4)
    uniform = F.EpsilonSoft(_mountain_car.energy_pumping_action, 1.0, 3)
    v = mc.mc_values(
        jax.random.key(6),
        ENV,
        PARAMS,
        uniform,
        obs,
        states,
        gamma=0.9,
        reward_scale=1.0,
        horizon=20,
        num_rollouts=8,
    )
    np.testing.assert_allclose(v.values, -(1 - 0.9**20) / 0.1, rtol=1e-5)


def test_evaluation_states_visit_the_policy_states():
    obs0, _ = mc.evaluation_states(jax.random.key(7), ENV, PARAMS, num_states=32)
    assert np.all(np.asarray(obs0[:, 1]) == 0.0)  # resets are at rest
    obs, _ = mc.evaluation_states(
        jax.random.key(7), ENV, PARAMS, num_states=32, policy=TARGET, max_steps=60
    )
    assert np.mean(np.asarray(obs[:, 1]) != 0.0) > 0.8
    assert np.all(np.asarray(obs[:, 0]) < 0.5)  # frozen before termination


@pytest.mark.slow  # compiles the adaptive ODE solver (~10 s)
def test_hiv_collection_has_no_termination_and_the_right_ratios():
    env = _hiv.HIVTreatment()
    params = env.default_params.replace(init_log10_spread=0.1, reward_scale=1e-6)
    rule = _hiv.ViralLoadRule(4.0)
    beh, tgt = F.EpsilonSoft(rule, 1.0, 4), F.EpsilonSoft(rule, 0.2, 4)
    feats = F.FeatureMap(
        tuple(F.TileCoder((0.0,), (7.0,), 4, 2, dims=(i,)) for i in range(6)), bias=True
    )
    col = mc.collect_offpolicy(
        jax.random.key(8),
        env,
        params,
        beh,
        tgt,
        feats,
        gamma=0.95,
        num_trajectories=4,
        max_length=3,
    )
    assert np.asarray(col.data.mask).all()
    np.testing.assert_allclose(col.data.transitions.discount_t, 0.95, rtol=1e-6)
    greedy = jax.vmap(jax.vmap(rule))(col.observations)
    # uniform behaviour 1/4; target 0.8 + 0.05 on the rule's action, 0.05 elsewhere.
    expected = np.where(
        np.asarray(col.actions) == np.asarray(greedy), 0.85 / 0.25, 0.05 / 0.25
    )
    np.testing.assert_allclose(col.data.transitions.rho_tm1, expected, rtol=1e-5)
