"""Fidelity of synthetic data: Marginal (KS) and Correlation scores.

PrivORL Sec. VIII-C / Appendix H-C, following SynthER (Lu et al. 2023), which uses
SDMetrics' ``KSComplement`` (per column 1 - KS statistic) and
``CorrelationSimilarity`` (per column pair 1 - |rho_real - rho_syn| / 2, Pearson by
default). Both scores are in [0, 1], 1 meaning identical statistics.

What runs where: host-side NumPy; the synthetic and real arrays are [N, d] tables.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.stats


def _check_tables(real, synthetic) -> tuple[np.ndarray, np.ndarray]:
    real, synthetic = np.asarray(real, np.float64), np.asarray(synthetic, np.float64)
    for name, table in (("real", real), ("synthetic", synthetic)):
        if table.ndim != 2 or table.shape[0] < 2:
            raise ValueError(f"{name} must have shape [N >= 2, d], got {table.shape}.")
        if not np.all(np.isfinite(table)):
            raise ValueError(f"{name} contains NaN or inf values.")
    if real.shape[1] != synthetic.shape[1]:
        raise ValueError(
            f"real has {real.shape[1]} columns but synthetic has {synthetic.shape[1]}."
        )
    return real, synthetic


def ks_statistics(real: np.ndarray, synthetic: np.ndarray) -> np.ndarray:
    """Two-sample Kolmogorov-Smirnov statistic of each column.

    D_j = sup_x |F_real,j(x) - F_syn,j(x)|, evaluated exactly at the pooled sample
    points (the statistic of ``scipy.stats.ks_2samp``).

    Args:
      real: [N, d].
      synthetic: [M, d].

    Returns:
      [d] statistics in [0, 1].
    """
    real, synthetic = _check_tables(real, synthetic)
    stats = np.empty(real.shape[1])
    for j in range(real.shape[1]):
        a, b = np.sort(real[:, j]), np.sort(synthetic[:, j])
        points = np.concatenate([a, b])
        cdf_a = np.searchsorted(a, points, side="right") / a.size
        cdf_b = np.searchsorted(b, points, side="right") / b.size
        stats[j] = np.max(np.abs(cdf_a - cdf_b))
    return stats


def marginal_score(real: np.ndarray, synthetic: np.ndarray) -> float:
    """Marginal fidelity: 1 - mean over columns of the two-sample KS statistic.

    SDMetrics' ``KSComplement`` averaged over columns (SynthER, PrivORL Sec. VIII-C).

    Args:
      real: [N, d], N >= 2.
      synthetic: [M, d], M >= 2.

    Returns:
      The score in [0, 1]; 1 for identical empirical marginals.

    Raises:
      ValueError: on bad shapes (not 2-D, fewer than 2 rows, different column
        counts) or non-finite values.

    >>> x = np.arange(10.0)[:, None]
    >>> marginal_score(x, x), round(marginal_score(x, x + 2), 6)
    (1.0, 0.8)
    """
    return float(1.0 - np.mean(ks_statistics(real, synthetic)))


def _correlation_matrix(table: np.ndarray, method: str) -> np.ndarray:
    if method == "spearman":
        table = scipy.stats.rankdata(table, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.corrcoef(table, rowvar=False)


def correlation_score(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    method: Literal["pearson", "spearman"] = "pearson",
) -> float:
    """Correlation fidelity: 1 - mean over column pairs of |rho_real - rho_syn| / 2.

    Pairs with a constant column in either table (undefined correlation) are skipped.
    Pearson is SDMetrics' default (used by SynthER); PrivORL's text says "Pearson rank
    correlations", so Spearman is available as ``method="spearman"``.

    Args:
      real: [N, d], d >= 2.
      synthetic: [M, d].
      method: "pearson" or "spearman".

    Returns:
      The score in [0, 1], or NaN if no pair has a defined correlation in both.

    Raises:
      ValueError: on bad shapes, non-finite values, d < 2 or an unknown method.
    """
    real, synthetic = _check_tables(real, synthetic)
    if method not in ("pearson", "spearman"):
        raise ValueError(f"method must be 'pearson' or 'spearman', got {method!r}.")
    if real.shape[1] < 2:
        raise ValueError(
            f"need at least 2 columns for correlations, got {real.shape[1]}."
        )
    upper = np.triu_indices(real.shape[1], k=1)
    rho_real = _correlation_matrix(real, method)[upper]
    rho_syn = _correlation_matrix(synthetic, method)[upper]
    defined = np.isfinite(rho_real) & np.isfinite(rho_syn)
    if not defined.any():
        return float("nan")
    return float(1.0 - np.mean(np.abs(rho_real[defined] - rho_syn[defined]) / 2.0))


def free_cell_share(positions: np.ndarray, walls: np.ndarray) -> float:
    """Share of 2-D positions that lie in a free cell of a maze's wall grid.

    The cell of position p is round(p), as in the maze envs (cell (i, j) spans (i, j) ±
    0.5); positions outside the grid count as not free. A synthesizer of maze2d data
    that reproduces the sensitive maze scores 1.0 (real data do); one that copies
    another maze's layout scores about that layout's overlap with this one's free cells.

    Args:
      positions: [N, 2] (row, column) positions in the maze's cell frame.
      walls: [H, W] bool, True at walls.

    Returns:
      The share in [0, 1].

    Raises:
      ValueError: `positions` not [N, 2] with N >= 1, or `walls` not 2-D.
    """
    walls = np.asarray(walls, bool)
    positions = np.asarray(positions, np.float64)
    if positions.ndim != 2 or positions.shape[1] != 2 or walls.ndim != 2:
        raise ValueError(
            f"expected positions [N, 2] and walls [H, W]; got {positions.shape} and "
            f"{walls.shape}."
        )
    if positions.shape[0] == 0:
        # A share of no positions is undefined; a NaN here would pass silently into
        # a mean over seeds.
        raise ValueError("free_cell_share needs at least one position; got N = 0.")
    cell = np.rint(positions).astype(np.int64)
    inside = np.all((cell >= 0) & (cell < np.array(walls.shape)), axis=1)
    cell = np.clip(cell, 0, np.array(walls.shape) - 1)
    return float(np.mean(inside & ~walls[cell[:, 0], cell[:, 1]]))


def sliced_wasserstein(
    real: np.ndarray, synthetic: np.ndarray, *, num_projections: int = 64, seed: int = 0
) -> float:
    """Sliced 1-Wasserstein distance between two tables.

    The mean over random unit directions of the 1-D Wasserstein-1 distance of the
    projected rows (``scipy.stats.wasserstein_distance``).
    Rabin, Peyré, Delon & Bernot ("Wasserstein barycenter and its application to texture
    mixing", 2011) and Bonneel et al. (2015) define the sliced distance this way; it is
    a metric on distributions, 0 only for equal laws, and, unlike a per-column KS score,
    it sees a joint shift (e.g. a transition whose next state does not follow its state
    and action). The directions are uniform on the sphere and fixed by ``seed``, so two
    tables scored with the same seed are comparable. Compare columns on one scale (e.g.
    the public normaliser's), else the widest column dominates. 0 means identical
    samples; the distance of two samples of the same law is the finite-sample floor
    (what a held-out real sample scores).

    Args:
      real: [N, d], N >= 2.
      synthetic: [M, d], M >= 2.
      num_projections: the random directions.
      seed: fixes the directions.

    Returns:
      The distance (>= 0, in the tables' units).

    Raises:
      ValueError: on bad shapes, non-finite values or `num_projections` below 1.

    >>> x = np.random.default_rng(0).normal(size=(500, 3))
    >>> y = x + np.array([3.0, 0.0, 0.0])
    >>> round(sliced_wasserstein(x, y, num_projections=2000), 1)
    1.5
    """
    real, synthetic = _check_tables(real, synthetic)
    if num_projections < 1:
        raise ValueError(f"num_projections must be >= 1; got {num_projections}.")
    dirs = np.random.default_rng(seed).normal(size=(num_projections, real.shape[1]))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    pr, ps = real @ dirs.T, synthetic @ dirs.T
    return float(
        np.mean(
            [
                scipy.stats.wasserstein_distance(pr[:, j], ps[:, j])
                for j in range(num_projections)
            ]
        )
    )
