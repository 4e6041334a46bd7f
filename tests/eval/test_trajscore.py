"""TrajScore (PrivORL Sec. VIII-C): windows, greedy cosine F1,
identical sets score 1."""

import jax
import numpy as np
import pytest

from privrl_jax import eval as evaluation
from privrl_jax.eval._trajscore import trajscore_from_embeddings


def test_hand_example():
    real = np.array([[1.0, 0.0]])
    syn = np.array([[2.0, 0.0], [0.0, 1.0]])
    s = trajscore_from_embeddings(real, syn)
    # recall: the real one matches (1, 0) exactly; precision: (1 + 0) / 2.
    assert s["recall"] == pytest.approx(1.0) and s["precision"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(2 * 0.5 / 1.5)


def test_windows():
    steps = np.arange(2 * 7 * 1, dtype=np.float32).reshape(2, 7, 1)
    w = evaluation.trajectory_windows(steps, np.array([7, 2]), 3)
    np.testing.assert_array_equal(
        w, [[0, 1, 2], [3, 4, 5]]
    )  # tails and a short trajectory dropped


def test_identical_sets_score_one_and_shifted_sets_less():
    rng = np.random.default_rng(0)
    public = rng.normal(size=(400, 12)).astype(np.float32)
    enc = evaluation.fit_trajectory_encoder(
        jax.random.key(0),
        public,
        window=3,
        latent_dim=4,
        hidden=(16,),
        steps=200,
        batch_size=64,
    )
    real = rng.normal(size=(50, 12)).astype(np.float32)
    assert evaluation.trajscore(enc, real, real)["f1"] == pytest.approx(1.0, abs=1e-6)
    other = evaluation.trajscore(
        enc, real, rng.normal(size=(50, 12)).astype(np.float32) + 3.0
    )["f1"]
    assert other < 0.99
