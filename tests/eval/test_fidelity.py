"""Marginal and Correlation fidelity scores."""

import numpy as np
import pytest
import scipy.stats

from privrl_jax import eval as ev
from privrl_jax.eval._fidelity import ks_statistics


def test_identical_data_scores_one():
    x = np.random.default_rng(0).normal(size=(300, 4))
    x[:, 1] += 0.7 * x[:, 0]
    assert ev.marginal_score(x, x) == 1.0
    assert ev.correlation_score(x, x) == pytest.approx(1.0)
    assert ev.correlation_score(x, x, method="spearman") == pytest.approx(1.0)


@pytest.mark.parametrize("shift", [0, 1, 7, 25])
def test_shifted_grid_gives_exact_ks(shift):
    """Real = grid 0..n-1, synthetic = same grid shifted by s: KS = s/n exactly."""
    n = 100
    real = np.arange(n, dtype=float)[:, None]
    synthetic = real + shift
    assert ks_statistics(real, synthetic)[0] == pytest.approx(shift / n)
    assert ev.marginal_score(real, synthetic) == pytest.approx(1 - shift / n)


def test_shifted_gaussians_match_closed_form():
    """N(0,1) vs N(delta,1): KS -> 2 Phi(delta/2) - 1."""
    rng = np.random.default_rng(1)
    deltas = np.array([0.2, 0.5, 1.0])
    real = rng.normal(size=(50_000, 3))
    synthetic = rng.normal(size=(50_000, 3)) + deltas
    expected = 2 * scipy.stats.norm.cdf(deltas / 2) - 1
    np.testing.assert_allclose(ks_statistics(real, synthetic), expected, atol=0.012)
    assert ev.marginal_score(real, synthetic) == pytest.approx(
        1 - expected.mean(), abs=0.012
    )


def test_ks_matches_scipy_with_ties():
    rng = np.random.default_rng(2)
    real = rng.integers(0, 5, size=(200, 3)).astype(float)
    synthetic = rng.integers(0, 6, size=(150, 3)).astype(float)
    expected = [
        scipy.stats.ks_2samp(real[:, j], synthetic[:, j]).statistic for j in range(3)
    ]
    np.testing.assert_allclose(ks_statistics(real, synthetic), expected, rtol=1e-12)


def test_correlation_closed_form():
    """Real: corr(x, y) = +1; synthetic: corr = -1 -> pair score 1 - 2/2 = 0."""
    x = np.linspace(-1, 1, 50)
    real = np.stack([x, 2 * x + 1], 1)
    synthetic = np.stack([x, -x], 1)
    assert ev.correlation_score(real, synthetic) == pytest.approx(0.0, abs=1e-12)
    # Three columns: pairs (0,1): |1-1|, (0,2): |1-0|, (1,2): |1-0| -> 1 - (0+.5+.5)/3.
    z = np.tile([1.0, -1.0], 25)  # uncorrelated with x (odd/even alternation)
    z = z - z.mean()
    real3 = np.stack([x, x, x], 1)
    syn3 = np.stack([x, x, z], 1)
    rho_xz = np.corrcoef(x, z)[0, 1]
    expected = 1 - (0 + abs(1 - rho_xz) / 2 + abs(1 - rho_xz) / 2) / 3
    assert ev.correlation_score(real3, syn3) == pytest.approx(expected)


def test_spearman_is_rank_invariant_and_constant_columns_are_skipped():
    rng = np.random.default_rng(3)
    real = rng.normal(size=(200, 2))
    real[:, 1] += real[:, 0]
    monotone = np.stack([np.exp(real[:, 0]), real[:, 1] ** 3], 1)
    assert ev.correlation_score(real, monotone, method="spearman") == pytest.approx(1.0)
    assert ev.correlation_score(real, monotone) < 0.99
    with_const = np.concatenate([real, np.ones((200, 1))], 1)
    assert ev.correlation_score(with_const, with_const) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "real,synthetic,match",
    [
        (np.ones(5), np.ones((5, 1)), "shape"),
        (np.ones((5, 2)), np.ones((5, 3)), "columns"),
        (np.full((5, 2), np.nan), np.ones((5, 2)), "NaN"),
    ],
)
def test_validation(real, synthetic, match):
    with pytest.raises(ValueError, match=match):
        ev.marginal_score(real, synthetic)


def test_free_cell_share_counts_positions_by_rounded_cell():
    from privrl_jax import eval as evaluation
    from privrl_jax.envs._maze import UMAZE, parse_layout

    walls, _ = parse_layout(
        UMAZE
    )  # free cells: (1,1) (1,2) (1,3) (2,3) (3,1) (3,2) (3,3)
    pos = np.array(
        [
            [1.0, 1.0],
            [1.49, 2.2],
            [2.0, 3.4],  # free (rounding stays in the cell)
            [2.0, 1.0],
            [2.0, 2.0],  # walls in the U's middle
            [0.2, 1.0],
            [-1.0, 2.0],
            [9.0, 9.0],
        ]
    )  # border wall, outside the grid
    assert evaluation.free_cell_share(pos, walls) == 3 / 8
    assert evaluation.free_cell_share(pos[:3], walls) == 1.0
    with pytest.raises(ValueError, match=r"positions \[N, 2\]"):
        evaluation.free_cell_share(np.zeros((3, 4)), walls)
    with pytest.raises(ValueError, match="at least one position; got N = 0"):
        evaluation.free_cell_share(np.zeros((0, 2)), walls)


def test_sliced_wasserstein_of_a_translation_is_its_length_times_the_mean_abs_coordinate():  # noqa: E501
    # Shifting every row by v moves each projection by <theta, v> exactly, so SW1 = |v|
    # E|theta_1|; on the sphere S^2, theta_1 is uniform on [-1, 1] (Archimedes),
    # E|theta_1| = 1/2.
    from privrl_jax import eval as evaluation

    x = np.random.default_rng(0).normal(size=(300, 3))
    p = 20_000
    got = evaluation.sliced_wasserstein(
        x, x + np.array([0.0, 4.0, 0.0]), num_projections=p, seed=1
    )
    sd = 4.0 * np.sqrt(1 / 12 / p)  # |theta_1| ~ U[0, 1]
    assert abs(got - 2.0) < 4 * sd


def test_sliced_wasserstein_in_one_dimension_is_scipys_wasserstein_distance():
    from privrl_jax import eval as evaluation

    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(400, 1)), rng.exponential(size=(250, 1))
    want = scipy.stats.wasserstein_distance(a[:, 0], b[:, 0])  # theta = +-1 in 1-D
    assert evaluation.sliced_wasserstein(a, b, num_projections=3) == pytest.approx(
        want, rel=1e-12
    )
    assert evaluation.sliced_wasserstein(a, a) == 0.0
    # Homogeneous of degree 1 in the scale of both tables.
    assert evaluation.sliced_wasserstein(
        5 * a, 5 * b, num_projections=3
    ) == pytest.approx(5 * want, rel=1e-12)
    with pytest.raises(ValueError, match="num_projections"):
        evaluation.sliced_wasserstein(a, b, num_projections=0)
