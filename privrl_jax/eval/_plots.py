"""Plots comparing real and synthetic transitions.

Figures are built with ``matplotlib.figure.Figure`` directly (not pyplot), so no
backend is selected and no global matplotlib state is touched.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib.figure
import numpy as np
from sklearn.manifold import TSNE
from threadpoolctl import threadpool_limits


def _save(fig: matplotlib.figure.Figure, path: str | os.PathLike) -> None:
    """Writes atomically: to a temporary name, then renames."""
    path = os.fspath(path)
    tmp = f"{path}.tmp.png"
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    os.replace(tmp, path)


def _subsample(rng: np.random.Generator, table: np.ndarray, n: int) -> np.ndarray:
    table = np.asarray(table)
    if table.shape[0] <= n:
        return table
    return table[rng.choice(table.shape[0], n, replace=False)]


def plot_tsne(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    seed: int,
    num_points: int = 500,
    path: str | os.PathLike | None = None,
    max_threads: int | None = 1,
) -> tuple[matplotlib.figure.Figure, np.ndarray]:
    """t-SNE of ``num_points`` real and ``num_points`` synthetic rows, jointly embedded.

    scikit-learn's TSNE with default settings (PrivORL Appendix H-E).

    Args:
      real: [N, d].
      synthetic: [M, d].
      seed: seed of the subsampling and of t-SNE (host-side, plotting only).
      num_points: rows drawn from each table (500 in the paper).
      path: if given, the PNG is written there.
      max_threads: OpenMP/BLAS threads for t-SNE (None: library default). One
        thread embeds 1,000 points in seconds; on an oversubscribed CPU the
        default thread pool was measured 20x slower.

    Returns:
      The figure and the 2-D embedding [n_real + n_syn, 2] (real rows first).
    """
    real, synthetic = np.asarray(real, np.float64), np.asarray(synthetic, np.float64)
    if real.ndim != 2 or synthetic.ndim != 2 or real.shape[1] != synthetic.shape[1]:
        raise ValueError(
            f"real and synthetic must be [N, d] with equal d, got {real.shape} and "
            f"{synthetic.shape}."
        )
    rng = np.random.default_rng(seed)
    a, b = _subsample(rng, real, num_points), _subsample(rng, synthetic, num_points)
    both = np.concatenate([a, b])
    perplexity = min(30.0, (both.shape[0] - 1) / 3.0)
    with threadpool_limits(max_threads):
        emb = TSNE(
            n_components=2, perplexity=perplexity, random_state=seed
        ).fit_transform(both)
    fig = matplotlib.figure.Figure(figsize=(5, 5))
    ax = fig.add_subplot()
    ax.scatter(*emb[: len(a)].T, s=6, alpha=0.6, label="real")
    ax.scatter(*emb[len(a) :].T, s=6, alpha=0.6, label="synthetic")
    ax.set_title("t-SNE: real vs synthetic")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend()
    if path is not None:
        _save(fig, path)
    return fig, emb


def plot_marginals(
    real: np.ndarray,
    synthetic: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    bins: int = 40,
    max_cols: int = 6,
    path: str | os.PathLike | None = None,
) -> matplotlib.figure.Figure:
    """One histogram per dimension, real and synthetic overlaid (densities).

    Args:
      real: [N, d].
      synthetic: [M, d].
      names: optional d column names.
      bins: histogram bins (shared range per dimension).
      max_cols: panels per row.
      path: if given, the PNG is written there.

    Returns:
      The figure.
    """
    real, synthetic = np.asarray(real, np.float64), np.asarray(synthetic, np.float64)
    if real.ndim != 2 or synthetic.ndim != 2 or real.shape[1] != synthetic.shape[1]:
        raise ValueError(
            f"real and synthetic must be [N, d] with equal d, got {real.shape} and "
            f"{synthetic.shape}."
        )
    d = real.shape[1]
    if names is not None and len(names) != d:
        raise ValueError(f"names has {len(names)} entries, expected {d}.")
    cols = min(d, max_cols)
    rows = -(-d // cols)
    fig = matplotlib.figure.Figure(figsize=(2.6 * cols, 2.1 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for j, ax in enumerate(axes.flat):
        if j >= d:
            ax.set_visible(False)
            continue
        lo = min(real[:, j].min(), synthetic[:, j].min())
        hi = max(real[:, j].max(), synthetic[:, j].max())
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
        ax.hist(real[:, j], edges, density=True, alpha=0.5, label="real")
        ax.hist(synthetic[:, j], edges, density=True, alpha=0.5, label="synthetic")
        ax.set_title(names[j] if names is not None else f"dim {j}", fontsize=8)
        ax.tick_params(labelsize=6)
    axes.flat[0].legend(fontsize=6)
    fig.tight_layout()
    if path is not None:
        _save(fig, path)
    return fig
