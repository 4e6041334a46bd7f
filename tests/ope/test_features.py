"""Tile coding (Sutton & Barto 2018, Sec. 9.5.4) and epsilon-soft policies."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.envs import _mountain_car
from privrl_jax.ope import _features as F


def test_one_dimensional_tiles_by_hand():
    # 4 tiles on [0, 1], 2 tilings: tiling 1 is shifted by half a tile (offset k*1/2).
    coder = F.TileCoder((0.0,), (1.0,), tiles_per_dim=4, num_tilings=2)
    np.testing.assert_allclose(coder.offsets(), [[0.0], [0.5]])
    # x = 0.3 -> 1.2 tile widths: tiling 0 tile 1, tiling 1 floor(1.7) = 1 (offset 5
    # tiles).
    np.testing.assert_array_equal(coder.active(jnp.array([0.3])), [1, 5 + 1])
    # x = 0.4 -> 1.6: tiling 0 tile 1, tiling 1 floor(2.1) = 2.
    np.testing.assert_array_equal(coder.active(jnp.array([0.4])), [1, 5 + 2])
    # The upper edge uses the extra tile of the shifted tiling; below low clips to 0.
    np.testing.assert_array_equal(coder.active(jnp.array([1.0])), [4, 5 + 4])
    np.testing.assert_array_equal(coder.active(jnp.array([-3.0])), [0, 5 + 0])


def test_two_dimensional_offsets_are_the_books_asymmetric_ones():
    coder = F.TileCoder((0.0, 0.0), (1.0, 1.0), tiles_per_dim=2, num_tilings=4)
    # Displacement (1, 3) per tiling, in units of 1/4 tile, modulo one tile.
    np.testing.assert_allclose(
        coder.offsets(), [[0, 0], [0.25, 0.75], [0.5, 0.5], [0.75, 0.25]]
    )
    # (0.2, 0.4) -> (0.4, 0.8) tile widths; shifted: tiling 1 (0.65, 1.55) -> (0, 1),
    # tiling 2 (0.9, 1.3) -> (0, 1), tiling 3 (1.15, 1.05) -> (1, 1); 3 x 3 tiles per
    # tiling, flat index i + 3 j.
    idx = np.asarray(coder.active(jnp.array([0.2, 0.4])))
    np.testing.assert_array_equal(idx, [0, 9 + 3, 18 + 3, 27 + 1 + 3])


def test_each_state_activates_exactly_one_tile_per_tiling():
    coder = F.TileCoder(_mountain_car.OBS_LOW, _mountain_car.OBS_HIGH, 6, 4)
    x = jax.random.uniform(
        jax.random.key(0),
        (500, 2),
        minval=jnp.array([-1.5, -0.1]),
        maxval=jnp.array([0.8, 0.1]),
    )
    phi = jax.vmap(coder)(x).reshape(500, coder.num_tilings, coder.tiles_per_tiling)
    np.testing.assert_array_equal(phi.sum(-1), np.ones((500, coder.num_tilings)))
    assert set(np.unique(phi)) <= {0.0, 1.0}


def test_points_in_the_same_tiles_have_equal_features_and_neighbours_share_most():
    coder = F.TileCoder((0.0, 0.0), (1.0, 1.0), tiles_per_dim=4, num_tilings=8)
    fm = F.FeatureMap((coder,), bias=True)
    # Tile width 1/4; tilings shift in steps of 1/32: two points inside one 1/32 x 1/32
    # cell of the finest grid of offsets lie in the same tile of every tiling.
    # Every tile boundary of every tiling is a multiple of 1/32 in each coordinate (the
    # offsets are k * (1, 3) / 8 tile widths), so points inside one cell
    # [10/32, 11/32) x [20/32, 21/32) share all their tiles.
    a, b = jnp.array([0.3126, 0.6251]), jnp.array([0.3430, 0.6560])
    np.testing.assert_array_equal(coder.active(a), coder.active(b))
    np.testing.assert_array_equal(fm(a), fm(b))
    # One cell to the right crosses exactly one tiling's boundary.
    c = jnp.array([0.3126 + 1 / 32, 0.6251])
    shared = np.sum(np.asarray(coder.active(a)) == np.asarray(coder.active(c)))
    assert shared == coder.num_tilings - 1
    # Far points share nothing.
    assert not np.any(
        np.asarray(coder.active(a)) == np.asarray(coder.active(jnp.array([0.9, 0.1])))
    )


def test_feature_map_has_unit_norm_and_right_size():
    coders = tuple(F.TileCoder((0.0,), (1.0,), 4, 2, dims=(i,)) for i in range(3))
    fm = F.FeatureMap(coders, bias=True)
    assert fm.num_features == 1 + 3 * 2 * 5 and fm.num_active == 7
    phi = jax.jit(jax.vmap(fm))(jax.random.uniform(jax.random.key(1), (50, 3)))
    np.testing.assert_allclose(np.linalg.norm(phi, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(phi[:, 0], 1 / np.sqrt(7), rtol=1e-6)


def test_epsilon_soft_probabilities():
    pol = F.EpsilonSoft(_mountain_car.energy_pumping_action, 0.3, 3)
    np.testing.assert_allclose(pol(jnp.array([-0.5, 0.01])), [0.1, 0.1, 0.8])
    np.testing.assert_allclose(pol(jnp.array([-0.5, -0.01])), [0.8, 0.1, 0.1])
    assert pol == F.EpsilonSoft(
        _mountain_car.energy_pumping_action, 0.3, 3
    )  # jit-cache key
    with pytest.raises(ValueError, match="epsilon"):
        F.EpsilonSoft(_mountain_car.energy_pumping_action, 1.5, 3)


def test_bad_boxes_are_refused():
    with pytest.raises(ValueError, match="high must exceed low"):
        F.TileCoder((0.0,), (0.0,))
    with pytest.raises(ValueError, match="equal length"):
        F.TileCoder((0.0, 1.0), (1.0,))
