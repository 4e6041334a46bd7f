"""The public grid that gives DP-LSW / DP-LSL a finite state space on Mountain Car."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import envs, ope, privacy
from privrl_jax.ope._balle import first_visits
from privrl_jax.ope._features import GridDiscretiser
from privrl_jax.ope._gpope import IndexSchedule


def _mc_grid() -> GridDiscretiser:
    coder = ope.mountain_car_features(3, 2).coders[0]
    return GridDiscretiser.of_tiles(coder)


def test_bins_come_from_the_envs_declared_bounds():
    grid = _mc_grid()
    assert grid.bins == (6, 6) and grid.num_cells == 36
    pos, vel = grid.edges()
    # gym's MountainCar-v0 box, cut in 6 equal bins: nothing fitted on data.
    np.testing.assert_allclose(pos, np.linspace(-1.2, 0.6, 7), atol=1e-6)
    np.testing.assert_allclose(vel, np.linspace(-0.07, 0.07, 7), atol=1e-8)
    assert (grid.low, grid.high) == (
        envs.MOUNTAIN_CAR_OBS_LOW,
        envs.MOUNTAIN_CAR_OBS_HIGH,
    )


def test_known_states_map_to_known_cells():
    grid = _mc_grid()
    # position -0.45: bin floor(0.75 / 1.8 * 6) = 2; velocity 0.01: floor(0.08 / 0.14 *
    # 6) = 3; dimension 0 fastest: 2 + 6 * 3 = 20.
    assert int(grid(jnp.array([-0.45, 0.01]))) == 20
    assert int(grid(jnp.array([-1.2, -0.07]))) == 0  # the lower corner
    assert int(grid(jnp.array([0.6, 0.07]))) == 35  # the upper corner: the last cell
    assert (
        int(grid(jnp.array([0.59, -0.069]))) == 5
    )  # last position bin, first velocity
    # Outside the box: clipped into the edge cells.
    assert int(grid(jnp.array([-5.0, 1.0]))) == 30
    # Each cell's centre maps back to that cell.
    np.testing.assert_array_equal(jax.vmap(grid)(grid.centres()), np.arange(36))


def test_every_state_maps_to_a_cell_and_every_cell_is_reachable():
    grid = _mc_grid()
    x = jax.random.uniform(
        jax.random.key(0),
        (20_000, 2),
        minval=jnp.array([-2.0, -0.2]),
        maxval=jnp.array([1.5, 0.2]),
    )
    cells = np.asarray(jax.vmap(grid)(x))
    assert cells.min() >= 0 and cells.max() < grid.num_cells
    assert set(cells.tolist()) == set(range(grid.num_cells))
    # The naive reference: per-dimension searchsorted on the edges.
    pos, vel = (np.asarray(e) for e in grid.edges())
    xc = np.clip(np.asarray(x), [-1.2, -0.07], [0.6, 0.07])
    ip = np.clip(np.searchsorted(pos, xc[:, 0], side="right") - 1, 0, 5)
    iv = np.clip(np.searchsorted(vel, xc[:, 1], side="right") - 1, 0, 5)
    agree = np.mean(cells == ip + 6 * iv)
    assert agree > 0.9999  # only float round-off exactly on an edge may differ


@pytest.mark.parametrize("tiles,tilings", [(3, 2), (4, 4), (2, 3)])
def test_tile_features_are_constant_on_cells(tiles, tilings):
    fmap = ope.mountain_car_features(tiles, tilings)
    grid = GridDiscretiser.of_tiles(fmap.coders[0])
    x = jax.random.uniform(
        jax.random.key(1),
        (5000, 2),
        minval=jnp.array([-1.2, -0.07]),
        maxval=jnp.array([0.6, 0.07]),
    )
    phi_x = jax.vmap(fmap)(x)
    phi_cell = jax.vmap(fmap)(grid.centres()[jax.vmap(grid)(x)])
    assert float(jnp.mean(jnp.all(phi_x == phi_cell, axis=-1))) > 0.999
    # A coarser grid is not enough: halving the bins puts states with different
    # features in one cell.
    coarse = GridDiscretiser(grid.low, grid.high, tuple(b // 2 for b in grid.bins))
    if tilings % 2 == 0:
        phi_coarse = jax.vmap(fmap)(coarse.centres()[jax.vmap(coarse)(x)])
        assert float(jnp.mean(jnp.all(phi_x == phi_coarse, axis=-1))) < 0.9


def test_bad_grids_are_refused():
    with pytest.raises(ValueError, match="equal length"):
        GridDiscretiser((0.0,), (1.0, 2.0), (3,))
    with pytest.raises(ValueError, match="high must exceed low"):
        GridDiscretiser((1.0,), (1.0,), (3,))
    with pytest.raises(ValueError, match="bins must be integers"):
        GridDiscretiser((0.0,), (1.0,), (0,))


def test_mountain_car_first_visits_on_cells_match_a_python_loop():
    """What the on-policy comparison feeds DP-LSW / DP-LSL: cells of real Mountain Car
    observations, their first-visit returns within the public bounds [-1, 0]."""
    env, params = envs.mountain_car(max_steps_in_episode=200)
    pi = ope.EpsilonSoft(envs.energy_pumping_action, 0.1, envs.MOUNTAIN_CAR_NUM_ACTIONS)
    fmap = ope.mountain_car_features(3, 2)
    grid = GridDiscretiser.of_tiles(fmap.coders[0])
    c = ope.collect_offpolicy(
        jax.random.key(3),
        env,
        params,
        pi,
        pi,
        fmap,
        gamma=0.98,
        reward_scale=0.02,
        num_trajectories=3,
        max_length=200,
    )
    # On-policy: every importance ratio is 1.
    np.testing.assert_array_equal(np.asarray(c.data.transitions.rho_tm1), 1.0)
    cells = jax.vmap(jax.vmap(grid))(c.observations)
    v = first_visits(cells, c.rewards, c.data.mask, 0.98, grid.num_cells)
    for i in range(3):
        mask = np.asarray(c.data.mask[i])
        cs, rs = np.asarray(cells[i])[mask], np.asarray(c.rewards[i])[mask]
        assert len(rs) < 200  # the episode terminated (energy pumping reaches the goal)
        expect = np.zeros(grid.num_cells)
        seen = np.zeros(grid.num_cells, bool)
        for t, s in enumerate(cs):
            if not seen[s]:
                seen[s] = True
                expect[s] = sum(0.98**k * r for k, r in enumerate(rs[t:]))
        np.testing.assert_array_equal(np.asarray(v.visited[i]), seen)
        np.testing.assert_allclose(
            np.asarray(v.returns[i]), expect, rtol=1e-4, atol=1e-6
        )
        assert np.all((expect >= -1.0) & (expect <= 0.0))


@pytest.mark.slow  # two GPOPE compiles
def test_masked_padding_of_a_schedule_leaves_gpope_unchanged():
    """The benchmark pads every schedule to one width so all chunks share a compile."""
    m = 50
    col = ope.collect(
        jax.random.key(0),
        ope.medical_chain(5),
        ope.treatment_policy([0.5] * 5),
        ope.treatment_policy([0.5] * 5),
        ope.one_hot_features(5),
        num_trajectories=m,
        max_length=10,
    )
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=m, sampling_rate=0.1, microbatch_size=8
        ),
        l2_clip_norm=0.1,
        steps=20,
        noise_multiplier=1.0,
    )
    sch = ope.sample_schedule(plan, 4)
    u = sch.indices.shape[-1]
    padded = IndexSchedule(
        np.pad(sch.indices, [(0, 0), (0, 32 - u)]),
        np.pad(sch.mask, [(0, 0), (0, 32 - u)]),
    )
    ss = ope.StepSize(0.5)
    a = ope.gpope(plan, col.data, sch, jax.random.key(1), step_size=ss)
    b = ope.gpope(plan, col.data, padded, jax.random.key(1), step_size=ss)
    np.testing.assert_array_equal(np.asarray(a.theta), np.asarray(b.theta))
    np.testing.assert_array_equal(
        np.asarray(a.clipped_fraction), np.asarray(b.clipped_fraction)
    )
