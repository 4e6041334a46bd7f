"""Affine zones + limiter, grid cells, IP/OP sensitivities, SAA vs the newsvendor
fractile."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import planning
from privrl_jax.envs import InventoryData, make_inventory_params
from privrl_jax.planning._baselines import input_sensitivity, output_sensitivity
from privrl_jax.planning._grid import grid_cell, grid_value
from privrl_jax.planning._zones import zone_index, zone_value

N = 4


@pytest.fixture(scope="module")
def affine_geom():
    return planning.make_zone_geometry(np.full((1, N), 0.8), 5, radius=1.6, seed=2)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_affine_zones_reproduce_affine_functions_and_the_limiter_bounds(affine_geom):
    geom = affine_geom
    assert geom.points_per_zone == N + 1 and bool(geom.valid.all())
    g, c = jnp.array([0.7, -1.3, 2.0, 0.4]), 1.7
    q = (jnp.einsum("mjn,n->mj", geom.points[0], g) + c).ravel()  # Q(b^j) = g.b^j + c
    b = 0.8 * jax.random.uniform(jax.random.key(0), (400, N))
    z = zone_index(b, geom.width, geom.num_zones)
    lo = q.reshape(geom.num_zones, -1).min(1)[z]
    hi = q.reshape(geom.num_zones, -1).max(1)[z]
    vals = jax.vmap(lambda x: zone_value(geom, 0, q, x))(b)
    inside = (b @ g + c >= lo - 1e-4) & (b @ g + c <= hi + 1e-4)
    # Exact where the affine value lies in the zone's range; clipped to it elsewhere.
    np.testing.assert_allclose(vals[inside], (b @ g + c)[inside], atol=3e-4)
    assert bool(jnp.all(vals >= lo - 1e-5)) and bool(jnp.all(vals <= hi + 1e-5))
    # A constant Q is reproduced exactly (the paper's linear form cannot do this).
    const = jnp.full(geom.num_cells, 2.5)
    assert (
        float(
            jnp.max(jnp.abs(jax.vmap(lambda x: zone_value(geom, 0, const, x))(b) - 2.5))
        )
        < 1e-5
    )
    lin = planning.make_zone_geometry(
        np.full((1, N), 0.8), 5, radius=1.6, seed=2, affine=False, limiter=False
    )
    lin_vals = jax.vmap(lambda x: zone_value(lin, 0, jnp.full(lin.num_cells, 2.5), x))(
        b
    )
    assert float(jnp.max(jnp.abs(lin_vals - 2.5))) > 0.1


def test_grid_cells_by_hand_and_constant_beyond_the_boundary():
    geom = planning.make_grid_geometry(
        np.array([[0.8, 1.5]]), 4
    )  # box [0, .8) x [0, 1)
    pts = jnp.array([[0.0, 0.0], [0.19, 0.26], [0.2, 0.25], [0.79, 0.99], [0.6, 0.5]])
    cells = [int(grid_cell(geom, 0, p)) for p in pts]
    assert cells == [0, 1, 4 + 1, 15, 3 * 4 + 2]
    q = jnp.arange(16.0)
    # b >= lambda in any coordinate: the value of lambda's cell (capped at 1): cell 15.
    assert float(grid_value(geom, 0, q, jnp.array([0.85, 0.1]))) == 15.0
    assert float(grid_value(geom, 0, q, jnp.array([0.5, 0.3]))) == 2 * 4 + 1


def test_input_perturbation_sensitivity_is_attained_by_replacing_one_episode():
    h, w = 3, 2
    delta = input_sensitivity(h, w, w)
    assert delta == pytest.approx(math.sqrt(h * (2 * w + w + 2)))
    ones = InventoryData(
        jnp.ones((1, h, w)),
        jnp.ones((1, h, w)),
        jnp.ones((1, h)),
        jnp.ones((1, h, w)),
        jnp.zeros((1, h, w)),
        jnp.ones((1, h), bool),
    )
    zeros = jax.tree.map(jnp.zeros_like, ones)
    diff = planning._baselines.record_vector(ones) - planning._baselines.record_vector(
        zeros
    )
    assert float(jnp.linalg.norm(diff)) == pytest.approx(delta)
    mech = planning.input_mechanism(2.0, h, w, w)
    assert mech.noise_std == pytest.approx(delta / 2.0)  # Delta / sqrt(2 rho)
    assert mech.neighboring.name == "REPLACE_ONE"
    noisy = planning.input_perturbation(
        jax.random.key(0), ones, jnp.full((h, 2 * w), 0.5), mech
    )
    assert float(noisy.observations.min()) >= 0 and float(noisy.observations.max()) <= 1
    # Feedback after the release needs the noisy pair below lambda = 0.5.
    b = jnp.concatenate([noisy.observations, noisy.actions], -1)
    assert bool(jnp.all(~noisy.feedback | jnp.all(b < 0.5, -1)))


def test_output_perturbation_sensitivity_is_the_range_bound():
    h, k = 4, 6
    assert output_sensitivity(h, k) == pytest.approx(math.sqrt(k * (16 + 9 + 4 + 1)))
    v_max = (h - jnp.arange(h, dtype=jnp.float32))[:, None]
    full, empty = jnp.broadcast_to(v_max, (h, k)), jnp.zeros((h, k))
    assert float(jnp.linalg.norm(full - empty)) == pytest.approx(
        output_sensitivity(h, k)
    )
    mech = planning.output_mechanism(1.0, h, k)
    out = planning.output_perturbation(jax.random.key(1), empty, mech)
    assert bool(jnp.all(out >= 0)) and bool(jnp.all(out <= v_max))


def test_saa_recovers_the_newsvendor_critical_fractile():
    # H = 1, zero inventory, uniform demand on [0.1, 0.7]: F(y*) = (c_l - c_o) / (c_l +
    # c_h).
    p = make_inventory_params(
        1,
        1,
        demand="uniform",
        demand_mean=0.4,
        demand_scale=0.3,
        order_cost=0.3,
        holding_cost=0.2,
        lost_sales_cost=1.0,
    )
    res = planning.saa_base_stock(jax.random.key(0), p, 10_000, 101)
    y_star = 0.1 + 0.6 * (1.0 - 0.3) / (1.0 + 0.2)
    assert float(res.levels[0]) == pytest.approx(y_star, abs=0.02)
    # Its cost is the closed-form expected cost at y* (within Monte Carlo error).
    e_over = (y_star - 0.1) ** 2 / (2 * 0.6)
    e_under = (0.7 - y_star) ** 2 / (2 * 0.6)
    closed = 0.3 * y_star + 0.2 * e_over + 1.0 * e_under
    assert float(res.saa_cost) == pytest.approx(closed, abs=0.01)
    assert planning.relative_gap(1.1, 1.0) == pytest.approx(0.1)
