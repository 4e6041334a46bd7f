"""Fidelity plots are written as PNG files."""

import numpy as np
import pytest

from privrl_jax import eval as ev

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_tsne_png(tmp_path):
    rng = np.random.default_rng(0)
    real = rng.normal(size=(300, 5))
    synthetic = rng.normal(size=(300, 5)) + 3.0
    path = tmp_path / "tsne.png"
    _, emb = ev.plot_tsne(real, synthetic, seed=0, num_points=60, path=path)
    assert emb.shape == (120, 2)
    assert path.read_bytes()[:8] == PNG_MAGIC
    # The two well-separated clouds stay separated in the embedding.
    centre_real, centre_syn = emb[:60].mean(0), emb[60:].mean(0)
    spread = max(emb[:60].std(0).max(), emb[60:].std(0).max())
    assert np.linalg.norm(centre_real - centre_syn) > 2 * spread
    assert not list(tmp_path.glob("*.tmp.png"))


def test_marginal_histograms_png(tmp_path):
    rng = np.random.default_rng(1)
    real, synthetic = rng.normal(size=(100, 7)), rng.normal(size=(80, 7))
    path = tmp_path / "hist.png"
    fig = ev.plot_marginals(
        real, synthetic, names=[f"x{i}" for i in range(7)], path=path
    )
    assert path.read_bytes()[:8] == PNG_MAGIC
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 7
    with pytest.raises(ValueError, match="names"):
        ev.plot_marginals(real, synthetic, names=["a"])
