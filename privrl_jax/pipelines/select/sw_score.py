"""A DP sliced Wasserstein score of a release (``score.kind: sliced_wasserstein``).

The statistic. P fixed public unit directions u_p (seeded). The sensitive rows'
projections ``<x_i, u_p>``, clipped to [-R, R], are counted on B equal bins of
[-R, R]: a [P, B] table of counts h. The release's rows are binned the same way
(counts g over its m rows; the release is the run's earlier DP output, so public here).
The statistic is the mean over directions of the 1-D Wasserstein-1 distance between the
two binned laws::

    W = (1/P) sum_p sum_{b=1}^{B-1} |F_pb - G_pb| * (2R / B),

with ``F_pb = (h_p1 + ... + h_pb) / n`` the sensitive CDF at the b-th inner edge (n is
public) and G the release's. On the line W1 is the L1 distance between the two CDFs
(Vallender 1973); between laws on the bin centres this sum is exactly W1. Averaged over
directions it is the sliced distance (Rabin, Peyre, Delon & Bernot 2011; Bonneel et al.
2015), here of the clipped and binned projections.

The DP release. h goes through the Gaussian mechanism; the score is minus W computed
from the noisy counts, each noisy CDF clipped to [0, 1] (post-processing).

Sensitivity. Clipping puts every projection in exactly one bin, so one sensitive row
adds 1 to one bin of each direction: adding or removing it moves h by P entries of
magnitude 1, L2 sensitivity ``sqrt(P)``; replacing it moves at most two bins of each
direction by 1, ``sqrt(2 P)`` (attained when the two rows fall in different bins on
every direction). Neither depends on n, R or B.

This is the DP histogram (Dwork, McSherry, Nissim & Smith 2006: disjoint counts, one
count per row) of each projection, the "histogram query" estimate of a private CDF
(the baseline of Tao & Sarwate, "Functional approximation methods for differentially
private distribution estimation", 2025), read as a sliced distance. Rakotomamonjy &
Ralaivola (ICML 2021) privatise the sliced distance instead by adding Gaussian noise to
every projected row; that noise smooths both laws by a kernel whose width does not
shrink with n, whereas the noise of a count table, divided by n, does.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from privrl_jax import privacy

# The directions are public and fixed: every candidate is scored on the same ones.
DIRECTIONS_SEED = 0


def directions(
    num_projections: int, dim: int, seed: int = DIRECTIONS_SEED
) -> np.ndarray:
    """[P, dim] unit directions, uniform on the sphere, fixed by ``seed`` (public).

    Args:
      num_projections: P >= 1.
      dim: the rows' width.
      seed: fixes the directions.

    Returns:
      The directions, float64, each of norm 1.
    """
    u = np.random.default_rng(seed).normal(size=(num_projections, dim))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def projection_counts(
    x: np.ndarray, dirs: np.ndarray, half_width: float, bins: int
) -> np.ndarray:
    """NOT DP: [P, B] counts of the rows' clipped projections on B bins of [-R, R].

    Args:
      x: [n, d] rows.
      dirs: [P, d] directions.
      half_width: R > 0; a projection is clipped to [-R, R] (so every row is counted
        once per direction).
      bins: B >= 2.

    Returns:
      The counts, float64; each row sums to n.

    Raises:
      ValueError: a bad R or B, or shapes that do not match.
    """
    if not (math.isfinite(half_width) and half_width > 0):
        raise ValueError(f"half_width must be positive and finite; got {half_width!r}.")
    if bins < 2:
        raise ValueError(f"bins must be >= 2; got {bins}.")
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or x.shape[1] != dirs.shape[1]:
        raise ValueError(f"rows {x.shape} do not match directions {dirs.shape}.")
    proj = np.clip(x @ dirs.T, -half_width, half_width)  # [n, P]
    # Bin index floor((p + R) / (2R / B)); the right edge R belongs to the last bin.
    idx = np.minimum(
        np.floor((proj + half_width) * (bins / (2 * half_width))).astype(np.int64),
        bins - 1,
    )
    out = np.zeros((dirs.shape[0], bins))
    for p in range(dirs.shape[0]):
        out[p] = np.bincount(idx[:, p], minlength=bins)
    return out


def binned_distance(
    counts: np.ndarray, n: float, other: np.ndarray, m: float, half_width: float
) -> float:
    """The mean over directions of W1 between two binned laws (module doc).

    Args:
      counts: [P, B] counts (possibly noisy) of the first table.
      n: the first table's (public) size.
      other: [P, B] counts of the second table.
      m: its size.
      half_width: R; the bins are 2R / B wide.

    Returns:
      ``(1/P) sum_p sum_{b<B} |F_pb - G_pb| 2R / B``, each F clipped to [0, 1].
    """
    bins = counts.shape[1]
    f = np.clip(np.cumsum(counts, axis=1)[:, :-1] / n, 0.0, 1.0)
    g = np.cumsum(other, axis=1)[:, :-1] / m
    return float(np.abs(f - g).sum(axis=1).mean() * (2 * half_width / bins))


def sliced_distance(
    sensitive_x: np.ndarray,
    synthetic_x: np.ndarray,
    dirs: np.ndarray,
    half_width: float,
    bins: int,
) -> float:
    """NOT DP: the noiseless statistic W of the module doc.

    Args:
      sensitive_x: [n, d] the sensitive rows.
      synthetic_x: [m, d] the release's rows.
      dirs: [P, d] directions.
      half_width: R.
      bins: B.

    Returns:
      W >= 0 (the rows' units).
    """
    return binned_distance(
        projection_counts(sensitive_x, dirs, half_width, bins),
        len(sensitive_x),
        projection_counts(synthetic_x, dirs, half_width, bins),
        len(synthetic_x),
        half_width,
    )


def mechanism(
    num_projections: int,
    noise_multiplier: float,
    neighboring: privacy.Neighboring,
) -> privacy.GaussianMechanism:
    """The Gaussian mechanism of the [P, B] count table (module doc: sensitivity).

    Args:
      num_projections: P.
      noise_multiplier: sigma; each count gets noise of std ``sigma * sensitivity``.
      neighboring: the relation (add/remove one: ``sqrt(P)``; replace one:
        ``sqrt(2 P)``).

    Returns:
      The mechanism.
    """
    rows_moved = 2.0 if neighboring is privacy.Neighboring.REPLACE_ONE else 1.0
    return privacy.GaussianMechanism(
        l2_sensitivity=math.sqrt(rows_moved * num_projections),
        noise_multiplier=noise_multiplier,
        neighboring=neighboring,
    )


def dp_score(
    sensitive_counts: np.ndarray,
    n: int,
    synthetic_x: np.ndarray,
    dirs: np.ndarray,
    half_width: float,
    mech: privacy.GaussianMechanism,
    key: jax.Array,
) -> float:
    """Minus W from the noisy sensitive counts: a DP score (higher is better).

    Args:
      sensitive_counts: [P, B] :func:`projection_counts` of the sensitive rows.
      n: the public number of sensitive rows.
      synthetic_x: [m, d] the release's rows (already DP).
      dirs: [P, d] the directions the counts were taken on.
      half_width: R.
      mech: :func:`mechanism`.
      key: the noise's PRNG key.

    Returns:
      ``-W(noisy counts, release)``.
    """
    bins = sensitive_counts.shape[1]
    noisy = np.asarray(
        mech.release(key, np.asarray(sensitive_counts, np.float32)), np.float64
    )
    other = projection_counts(synthetic_x, dirs, half_width, bins)
    return -binned_distance(noisy, n, other, len(synthetic_x), half_width)
