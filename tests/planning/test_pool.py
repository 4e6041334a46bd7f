"""POOL's private statistics and pessimistic backward induction (Alg. 1)."""

import math
from pathlib import Path

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import planning
from privrl_jax.envs import (
    InventoryData,
    base_stock_policy,
    collect_inventory_data,
    make_inventory_params,
)
from privrl_jax.planning._pool import (
    exact_statistics,
    pessimistic_q,
    state_values,
    statistics_sensitivity,
)

H = 3


@pytest.fixture(scope="module")
def setup():
    params = make_inventory_params(1, H, boundary=0.9)
    data = collect_inventory_data(
        jax.random.key(0), params, base_stock_policy(jnp.array([0.5]), 0.3), 400
    )
    geom = planning.make_zone_geometry(params.boundary, 100, radius=0.9 * math.sqrt(2))
    return data, geom, planning.action_grid(1, 5)


def _append(data, ep):
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), data, ep)


def test_one_episode_moves_the_statistics_by_at_most_sqrt_3h(setup):
    data, geom, acts = setup
    delta = statistics_sensitivity(H)
    assert delta == pytest.approx(math.sqrt(3 * H))
    # Fixed value tables (the past releases), huge so V_{h+1} = its cap v_max.
    q = jnp.full((H, geom.num_cells), 1e3)
    base = exact_statistics(geom, data, acts, q)
    # Worst case: feedback at every stage, reward 1, next value at its cap: y = 1.
    worst = InventoryData(
        observations=jnp.full((H, 1), 0.3),
        actions=jnp.full((H, 1), 0.2),
        rewards=jnp.ones(H),
        next_observations=jnp.full((H, 1), 0.1),
        sales=jnp.zeros((H, 1)),
        feedback=jnp.ones(H, bool),
    )
    v = state_values(geom, 1, q[1], jnp.array([[0.1]]), acts)
    assert float(v[0]) == H - 1
    diff = exact_statistics(geom, _append(data, worst), acts, q) - base
    assert float(jnp.linalg.norm(diff)) == pytest.approx(delta, rel=1e-6)
    # Random adversarial episodes stay within Delta; no feedback at a stage cuts it.
    for i in range(3):
        k = jax.random.split(jax.random.key(10 + i), 3)
        ep = InventoryData(
            observations=jax.random.uniform(k[0], (H, 1)),
            actions=jax.random.uniform(k[1], (H, 1)),
            rewards=jax.random.uniform(k[2], (H,)),
            next_observations=jax.random.uniform(k[0], (H, 1)),
            sales=jnp.zeros((H, 1)),
            feedback=jnp.array([True, i != 1, True]),
        )
        d = exact_statistics(geom, _append(data, ep), acts, q) - base
        assert float(jnp.linalg.norm(d)) <= delta + 1e-5
    cut = worst._replace(feedback=jnp.array([False, True, True]))
    d = exact_statistics(geom, _append(data, cut), acts, q) - base
    assert float(jnp.linalg.norm(d)) == pytest.approx(math.sqrt(3 * (H - 1)), rel=1e-6)


@pytest.mark.parametrize("reward", [np.nan, np.inf, -np.inf, 1e30])
def test_an_episode_with_a_non_finite_reward_moves_the_release_by_at_most_sqrt_3h(
    setup, reward
):
    """A missing (NaN) or wild reward enters the statistics inside [0, 1] like any
    other, so
    the pre-noise vector moves by at most Delta and the release and Q tables stay
    finite."""
    data, geom, acts = setup
    q = jnp.full((H, geom.num_cells), 1e3)
    base = exact_statistics(geom, data, acts, q)
    ep = InventoryData(
        observations=jnp.full((H, 1), 0.3),
        actions=jnp.full((H, 1), 0.2),
        rewards=jnp.full(H, reward, jnp.float32),
        next_observations=jnp.full((H, 1), 0.1),
        sales=jnp.zeros((H, 1)),
        feedback=jnp.ones(H, bool),
    )
    wild = _append(data, ep)
    diff = exact_statistics(geom, wild, acts, q) - base
    assert np.all(np.isfinite(diff))
    assert float(jnp.linalg.norm(diff)) <= statistics_sensitivity(H) * (1 + 1e-6)
    released = planning.pool_plan(
        jax.random.key(7), wild, geom, acts, planning.pool_mechanism(0.5, H)
    )
    for x in released[:4]:
        assert np.all(np.isfinite(np.asarray(x)))


def test_released_noise_has_the_mechanisms_std_and_rho_to_epsilon(setup):
    data, geom, acts = setup
    mech = planning.pool_mechanism(0.5, H)
    assert mech.rho == pytest.approx(0.5) and mech.noise_multiplier == pytest.approx(
        1.0
    )
    assert mech.noise_std == pytest.approx(math.sqrt(3 * H))
    priv = planning.pool_plan(jax.random.key(7), data, geom, acts, mech)
    exact = planning.pool_plan(jax.random.key(7), data, geom, acts, None)
    # Counts of every stage and the last stage's sums (V = 0 there) are exact
    # statistics plus noise: std = sigma sqrt(3H) within 6 standard errors.
    noise = jnp.concatenate(
        [
            (priv.counts - exact.counts).ravel(),
            priv.sums[-1] - exact.sums[-1],
            priv.squares[-1] - exact.squares[-1],
        ]
    )
    n = noise.size
    assert abs(float(jnp.std(noise)) / mech.noise_std - 1) < 6 / math.sqrt(2 * n)
    assert abs(float(jnp.mean(noise))) < 6 * mech.noise_std / math.sqrt(n)
    # Q stays in [0, H - h] (Alg. 1 line 10).
    for h in range(H):
        assert (
            float(priv.q_tables[h].min()) >= 0
            and float(priv.q_tables[h].max()) <= H - h
        )
    # The ledger's event reproduces epsilon through dp-accounting directly.
    event = mech.event()
    assert event == dp_accounting.GaussianDpEvent(pytest.approx(1.0))
    acc = dp_accounting.rdp.RdpAccountant()
    assert mech.epsilon(1e-5).epsilon == pytest.approx(
        acc.compose(dp_accounting.GaussianDpEvent(1.0)).get_epsilon(1e-5), rel=1e-9
    )
    # and it is within Bun & Steinke's rho-zCDP conversion rho + 2 sqrt(rho log
    # 1/delta).
    assert mech.epsilon(1e-5).epsilon <= 0.5 + 2 * math.sqrt(0.5 * math.log(1e5))


def test_infinite_rho_gives_the_non_private_statistics_and_q(setup):
    data, geom, acts = setup
    exact = planning.pool_plan(jax.random.key(7), data, geom, acts, None)
    # Noise std ~1e-10: the released statistics and Q equal the exact ones. (At a
    # noise std s, Q moves by O(sqrt(s)) where a cell's variance is 0: the
    # Bernstein term's sqrt(Var) is not Lipschitz there.)
    near = planning.pool_plan(
        jax.random.key(7), data, geom, acts, planning.pool_mechanism(1e20, H)
    )
    assert 0 < float(near.noise_bound) < 1e-8 and float(exact.noise_bound) == 0
    for a, b in zip(near[:4], exact[:4]):
        np.testing.assert_allclose(a, b, atol=5e-4)  # float32 rounding only
    assert float(exact.counts.sum()) == float(data.feedback.sum())


def test_backward_induction_equals_a_hand_computation():
    # w = d = 1, H = 2, one zone holding two basis points b1, b2; full feedback.
    geom = planning.make_zone_geometry(
        np.full((2, 2), 1.5), 1, radius=2.0, seed=1, affine=False, limiter=False
    )
    b1, b2 = np.asarray(geom.points[0, 0], np.float64)
    a_star = jnp.array([[0.5]])  # the only candidate action
    ep = lambda p0, r0, s1, p1, r1: InventoryData(
        observations=jnp.array([[p0[0]], [p1[0]]]),
        actions=jnp.array([[p0[1]], [p1[1]]]),
        rewards=jnp.array([r0, r1]),
        next_observations=jnp.array([[s1], [0.0]]),
        sales=jnp.zeros((2, 1)),
        feedback=jnp.ones(2, bool),
    )
    eps = [
        ep(b1, 0.4, 0.3, b1, 0.2),
        ep(b1, 0.8, 0.6, b1, 0.6),
        ep(b2, 1.0, 0.6, b2, 0.5),
    ]
    data = jax.tree.map(lambda *x: jnp.stack(x), *eps)
    cfg = planning.PoolConfig(bonus_scale=1.0)  # the paper's constants
    res = planning.pool_plan(jax.random.key(0), data, geom, a_star, None, cfg)
    iota = math.log(2 * 2 / cfg.failure_prob)
    # Stage 2 (v_max 1): b1 sees y = 0.2, 0.6 (mean 0.4, variance 0.04); b2 sees 0.5.
    q2 = np.array([0.4 - math.sqrt(2) * math.sqrt(0.04 * iota / 2), 0.5])
    q2 = np.clip(q2, 0, 1)
    np.testing.assert_allclose(res.q_tables[1], q2, atol=1e-5)
    # V_2(s) = clip(Q_bar_2(s, 0.5)): coefficients m solve [b1 b2] m = (s, 0.5).
    basis = np.stack([b1, b2], 1)
    v2 = lambda s: float(np.clip(np.linalg.solve(basis, [s, 0.5]) @ q2, 0, 1))
    y1 = np.array([0.4 + v2(0.3), 0.8 + v2(0.6)]) / 2  # stage 1 targets at b1
    y2 = min((1.0 + v2(0.6)) / 2, 1.0)
    var1 = 4 * (np.mean(y1**2) - np.mean(y1) ** 2)
    q1 = np.clip(
        [2 * np.mean(y1) - math.sqrt(2) * math.sqrt(var1 * iota / 2), 2 * y2], 0, 2
    )
    np.testing.assert_allclose(res.q_tables[0], q1, atol=1e-5)
    # Exact counts; a cell without data gets Q = 0 (Gamma = C H).
    np.testing.assert_array_equal(res.counts, [[2, 1], [2, 1]])
    assert (
        float(
            pessimistic_q(
                jnp.zeros(1),
                jnp.zeros(1),
                jnp.zeros(1),
                jnp.float32(2.0),
                0.0,
                iota,
                2,
                cfg,
            )[0]
        )
        == 0
    )


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_pool_plan_jitted_equals_pool_plan_run_op_by_op(setup):
    """POOL's private statistics and backward induction give the same numbers
    compiled and not (issue 22): the same noise, to float32 rounding."""
    data, _, acts = setup
    data = jax.tree.map(lambda x: x[:60], data)  # op by op is slow: fewer episodes
    boundary = make_inventory_params(1, H, boundary=0.9).boundary
    geom = planning.make_zone_geometry(boundary, 10, radius=0.9 * math.sqrt(2))
    mech = planning.pool_mechanism(0.5, H)
    jitted = planning.pool_plan(jax.random.key(7), data, geom, acts, mech)
    with jax.disable_jit():
        eager = planning.pool_plan(jax.random.key(7), data, geom, acts, mech)
    for name in ("counts", "sums", "squares", "q_tables", "noise_bound"):
        np.testing.assert_allclose(
            getattr(jitted, name), getattr(eager, name), rtol=1e-5, atol=1e-5
        )


def test_the_library_default_bonus_scale_is_the_shipped_configs():
    """planning.PoolConfig() is what `privrl pool run` ships (issue 47): at the paper's
    constants (bonus_scale 1) every Q of a realistic run is 0."""
    import yaml

    shipped = yaml.safe_load(
        (
            Path(planning.__file__).parents[1] / "configs" / "pool" / "default.yaml"
        ).read_text()
    )["pool"]["bonus_scale"]
    assert planning.PoolConfig().bonus_scale == shipped == 0.003
