"""Additive zones (planning/_additive.py): exactness, sensitivity, estimator, separable
max."""

import math

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
from privrl_jax.planning._additive import (
    additive_cells,
    additive_value,
    anchored_tables,
)
from privrl_jax.planning._pool import (
    data_cells,
    exact_statistics,
    state_values,
    statistics_sensitivity,
)
from privrl_jax.planning._zones import cell_index

H = 3


def _geom(w, m=6, limiter=False, lam=0.9, horizon=H):
    return planning.make_additive_geometry(
        np.full((horizon, 2 * w), lam), m, state_dim=w, limiter=limiter
    )


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_groups_cells_and_weight():
    g = _geom(3)
    assert g.groups == ((0, 3), (1, 4), (2, 5))
    assert (
        g.separable and g.action_of_group == (0, 1, 2) and g.slot_of_group == (1, 1, 1)
    )
    assert g.num_cells == 3 * 6 * 3 and g.weight == pytest.approx(1 / math.sqrt(3))
    # One pair lands in one cell of every part: cell c of part p is p * M (g + 1) + c.
    b = jnp.array([0.1, 0.5, 0.8, 0.3, 0.2, 0.0])
    cells = np.asarray(additive_cells(g, 1, b))
    for p, grp in enumerate(g.groups):
        part = jax.tree.map(lambda x, p=p: x[p], g.parts)
        own = int(cell_index(part, 1, b[jnp.array(grp)]))
        assert cells[p] == p * g.cells_per_part + own
    with pytest.raises(ValueError, match="partition"):
        planning.make_additive_geometry(
            np.full((H, 4), 0.9), 4, state_dim=2, groups=((0, 1, 2), (3,))
        )


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize("w", [2, 3])
@pytest.mark.parametrize("jit", [False, True])
def test_affine_q_is_reproduced_exactly(w, jit):
    g = _geom(w)
    grad = jnp.linspace(-1.0, 1.5, 2 * w)
    q_fn = lambda h, b: b @ grad + 0.3 * h + 0.6  # noqa: E731
    tables = anchored_tables(g, q_fn)
    b = 0.9 * jax.random.uniform(jax.random.key(4), (2000, 2 * w))
    f = lambda t, x: additive_value(g, 2, t, x)  # noqa: E731
    f = jax.jit(f) if jit else f
    vals = jax.vmap(f, (None, 0))(tables[2], b)
    np.testing.assert_allclose(vals, q_fn(2, b), atol=2e-5)


def test_any_additive_q_is_exact_on_the_tensor_nodes():
    # A non-linear additive Q: its anchored part tables sum to Q(b) exactly wherever
    # every group sits on one of its basis points (the interpolation nodes).
    w = 2
    g = _geom(w, limiter=True)

    def q_fn(h, b):
        s, a = b[..., :w], b[..., w:]
        return jnp.sum(jnp.sin(3 * s + h) * jnp.cos(2 * a) + (s + a) ** 2, -1)

    tables = anchored_tables(g, q_fn)
    pts = np.asarray(g.parts.points[:, 1]).reshape(2, -1, 2)  # [P, M (g + 1), 2]
    rng = np.random.default_rng(0)
    i, j = rng.integers(pts.shape[1], size=(2, 300))
    b = np.zeros((300, 4), np.float32)
    b[:, [0, 2]], b[:, [1, 3]] = pts[0, i], pts[1, j]
    vals = jax.vmap(lambda x: additive_value(g, 1, tables[1], x))(jnp.asarray(b))
    np.testing.assert_allclose(vals, q_fn(1, jnp.asarray(b)), atol=2e-5)


def _one_product():
    params = make_inventory_params(1, H, boundary=0.9)
    data = collect_inventory_data(
        jax.random.key(0), params, base_stock_policy(jnp.array([0.5]), 0.3), 100
    )
    radius = 0.9 * math.sqrt(2)
    paper = planning.make_zone_geometry(params.boundary, 4, radius=radius)
    add = planning.make_additive_geometry(
        params.boundary, 4, state_dim=1, radius=radius
    )
    return data, paper, add, planning.action_grid(1, 11)


def test_one_product_plans_bit_for_bit_like_the_paper_zones():
    # Same bases (same seed), weight 1, no centring; the targets' V_{h+1} goes through
    # the separable max for one and the candidate max for the other, so equal tables at
    # every stage also check that the two maxima agree.
    data, paper, add, acts = _one_product()
    np.testing.assert_array_equal(add.parts.points[0], paper.points)
    mech = planning.pool_mechanism(1.0, H)
    r_paper = planning.pool_plan(jax.random.key(3), data, paper, acts, mech)
    r_add = planning.pool_plan(jax.random.key(3), data, add, acts, mech)
    np.testing.assert_array_equal(r_add.q_tables, r_paper.q_tables)
    np.testing.assert_array_equal(r_add.counts, r_paper.counts)


@pytest.mark.slow
def test_one_product_greedy_orders_equal_the_paper_zones():
    data, paper, add, acts = _one_product()
    res = planning.pool_plan(jax.random.key(3), data, paper, acts, None)
    states = jnp.linspace(0.0, 1.0, 21)[:, None]

    @jax.jit
    def orders(g, q):
        pol = planning.greedy_policy(g, q, acts)
        return jax.vmap(lambda h: jax.vmap(lambda s: pol(None, h, s))(states))(
            jnp.arange(H)
        )

    np.testing.assert_array_equal(
        orders(add, res.q_tables), orders(paper, res.q_tables)
    )


@pytest.fixture(scope="module")
def two_products():
    params = make_inventory_params(2, H, boundary=0.9)
    data = collect_inventory_data(
        jax.random.key(1), params, base_stock_policy(jnp.array([0.5, 0.5]), 0.3), 200
    )
    return (
        params,
        data,
        planning.make_additive_geometry(params.boundary, 5, state_dim=2),
    )


def _append(data, ep):
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), data, ep)


def test_one_episode_moves_the_weighted_statistics_by_at_most_sqrt_3h(two_products):
    _, data, geom = two_products
    acts = planning.action_grid(2, 5)
    delta = statistics_sensitivity(H)
    # Fixed past releases large enough that V_{h+1} hits its cap: y = 1 at every stage.
    q = jnp.full((H, geom.num_cells), 1e3)
    base = exact_statistics(geom, data, acts, q)
    worst = InventoryData(
        observations=jnp.full((H, 2), 0.3),
        actions=jnp.full((H, 2), 0.2),
        rewards=jnp.ones(H),
        next_observations=jnp.full((H, 2), 0.1),
        sales=jnp.zeros((H, 2)),
        feedback=jnp.ones(H, bool),
    )
    diff = exact_statistics(geom, _append(data, worst), acts, q) - base
    # Attained: P = 2 cells per stage and statistic, each moved by 1 / sqrt(2).
    assert float(jnp.linalg.norm(diff)) == pytest.approx(delta, rel=1e-6)
    assert int(jnp.sum(diff[0] != 0)) == 2 * H
    # Pairs at zone boundaries and random episodes never exceed it.
    edge = geom.parts.width * 2.0 / math.sqrt(2)
    for i in range(4):
        k = jax.random.split(jax.random.key(20 + i), 3)
        obs = jax.random.uniform(k[0], (H, 2)) if i else jnp.full((H, 2), edge)
        ep = InventoryData(
            observations=obs,
            actions=jax.random.uniform(k[1], (H, 2)) if i else obs,
            rewards=jax.random.uniform(k[2], (H,)),
            next_observations=obs,
            sales=jnp.zeros((H, 2)),
            feedback=jnp.array([True, i != 2, True]),
        )
        d = exact_statistics(geom, _append(data, ep), acts, q) - base
        assert float(jnp.linalg.norm(d)) <= delta * (1 + 1e-6)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_last_stage_tables_are_the_marginal_mean_estimator(two_products):
    # Non-private, no bonus: at the last stage the target is r, and the additive
    # Q_bar at (c1, c2) is v_max (mean_1(c1) + mean_2(c2) - mu), a closed form
    # recomputed here with NumPy from the cells.
    _, data, geom = two_products
    res = planning.pool_plan(
        jax.random.key(0),
        data,
        geom,
        planning.action_grid(2, 5),
        None,
        planning.PoolConfig(bonus_scale=0.0),
    )
    cells = np.asarray(data_cells(geom, data))[:, H - 1]  # [N, 2]
    r = np.asarray(data.rewards[:, H - 1], np.float64)
    fb = cells[:, 0] >= 0
    mu = r[fb].mean()
    t = np.asarray(res.q_tables[H - 1], np.float64)
    for p in range(2):
        for c in np.unique(cells[fb, p]):
            mean = r[fb & (cells[:, p] == c)].mean()
            assert t[c] == pytest.approx(
                mean - mu / 2, abs=3e-5
            )  # v_max = 1 at h = H - 1


def test_separable_max_equals_the_brute_force_max(two_products):
    _, data, geom = two_products
    acts = planning.action_grid(2, 11)  # the product grid of geom.levels
    res = planning.pool_plan(
        jax.random.key(0), data, geom, acts, None, planning.PoolConfig(bonus_scale=0.01)
    )
    states = jax.random.uniform(jax.random.key(5), (50, 2))

    @jax.jit
    def both(q, h):
        fast = state_values(geom, h, q, states, acts)
        brute = jax.vmap(
            lambda s: jnp.max(
                jnp.clip(
                    jax.vmap(
                        lambda a: additive_value(geom, h, q, jnp.concatenate([s, a]))
                    )(acts),
                    0.0,
                    H - h,
                )
            )
        )(states)
        pol = planning.greedy_policy(geom, q[None].repeat(H, 0), acts)
        chosen = jax.vmap(
            lambda s: jnp.clip(
                additive_value(geom, h, q, jnp.concatenate([s, pol(None, h, s)])),
                0.0,
                H - h,
            )
        )(states)
        return fast, brute, chosen

    for h in (0, H - 1):
        fast, brute, chosen = both(res.q_tables[h], h)
        np.testing.assert_allclose(fast, brute, atol=1e-6)
        np.testing.assert_allclose(
            chosen, fast, atol=1e-6
        )  # the greedy order attains it


def test_private_release_uses_pools_mechanism_and_stays_finite(two_products):
    _, data, geom = two_products
    mech = planning.pool_mechanism(10.0, H)
    priv = planning.pool_plan(
        jax.random.key(7), data, geom, planning.action_grid(2, 5), mech
    )
    # Exact weighted counts by NumPy: each pair adds 1 / sqrt(P) to one cell per part,
    # so each part's counts sum to (pairs with feedback) / sqrt(P).
    cells = np.asarray(data_cells(geom, data))  # [N, H, P]
    exact = np.zeros((H, geom.num_cells))
    for h in range(H):
        c = cells[:, h].ravel()
        np.add.at(exact[h], c[c >= 0], 1 / math.sqrt(2))
    n_fb = np.asarray(data.feedback).sum(0)
    np.testing.assert_allclose(
        exact.reshape(H, 2, -1).sum(-1),
        np.stack([n_fb, n_fb], 1) / math.sqrt(2),
        rtol=1e-9,
    )
    noise = (np.asarray(priv.counts, np.float64) - exact).ravel()
    assert abs(noise.std() / mech.noise_std - 1) < 6 / math.sqrt(2 * noise.size)
    assert abs(noise.mean()) < 6 * mech.noise_std / math.sqrt(noise.size)
    assert np.all(np.isfinite(np.asarray(priv.q_tables)))
