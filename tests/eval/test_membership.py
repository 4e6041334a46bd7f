"""Membership-inference metrics and the loss-threshold attack."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from privrl_jax import diffusion
from privrl_jax import eval as ev
from privrl_jax.eval._membership import DEFAULT_MIA_SIGMAS


@pytest.mark.parametrize("mu", [0.0, 1.0, 2.0])
def test_metrics_on_known_score_distributions(mu):
    """Members ~ N(mu, 1), non-members ~ N(0, 1): TPR@a = 1 - Phi(z_{1-a} - mu)."""
    rng = np.random.default_rng(0)
    members = rng.normal(mu, 1.0, 200_000)
    nonmembers = rng.normal(0.0, 1.0, 200_000)
    m = ev.mia_metrics(members, nonmembers)
    norm = scipy.stats.norm
    assert m["auc"] == pytest.approx(norm.cdf(mu / np.sqrt(2)), abs=0.004)
    assert m["tpr_at_10_fpr"] == pytest.approx(
        1 - norm.cdf(norm.ppf(0.9) - mu), abs=0.006
    )
    assert m["tpr_at_1_fpr"] == pytest.approx(
        1 - norm.cdf(norm.ppf(0.99) - mu), abs=0.006
    )


def test_metrics_perfect_separation_and_validation():
    m = ev.mia_metrics(np.array([5.0, 6.0, 7.0]), np.array([0.0, 1.0, 2.0]))
    assert m == {"auc": 1.0, "tpr_at_10_fpr": 1.0, "tpr_at_1_fpr": 1.0}
    with pytest.raises(ValueError, match="empty"):
        ev.mia_metrics(np.array([]), np.array([1.0]))
    with pytest.raises(ValueError, match="NaN"):
        ev.mia_metrics(np.array([np.nan]), np.array([1.0]))


def _zero_net(params, x, c_noise):
    del params, c_noise
    return jnp.zeros_like(x)


def test_loss_scores_match_a_naive_loop():
    den = diffusion.EDMDenoiser(_zero_net)
    x = jax.random.normal(jax.random.key(0), (5, 3))
    sigmas = (0.1, 1.0)
    key = jax.random.key(1)
    got = np.asarray(
        ev.mia_loss_scores(den, None, x, key, sigmas=sigmas, num_noise=3, chunk=2)
    )
    noises = jax.random.normal(key, (2, 3, 3))
    expected = np.array(
        [
            [
                np.mean(
                    [
                        float(diffusion.edm_loss_at(den, None, x[i], s, noises[j, r]))
                        for r in range(3)
                    ]
                )
                for j, s in enumerate(sigmas)
            ]
            for i in range(5)
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5)


class MemorisingDenoiser:
    """Exact denoiser of the empirical distribution of ``points`` (a model that has
    memorised its training set): softmax-weighted average of the training points."""

    def __init__(self, points):
        self.points = jnp.asarray(points)

    def __call__(self, params, x, sigma):
        del params
        sigma = jnp.broadcast_to(sigma, x.shape[:-1])[..., None]
        d2 = jnp.sum((x[..., None, :] - self.points) ** 2, -1)
        w = jax.nn.softmax(-d2 / (2 * sigma**2), axis=-1)
        return w @ self.points


class GaussianDenoiser:
    """Exact denoiser of N(0, I): the population model, which leaks nothing."""

    def __call__(self, params, x, sigma):
        del params
        sigma = jnp.broadcast_to(sigma, x.shape[:-1])[..., None]
        return x / (1 + sigma**2)


def test_attack_detects_memorisation_and_not_the_population_model():
    members = jax.random.normal(jax.random.key(0), (200, 2))
    nonmembers = jax.random.normal(jax.random.key(1), (200, 2))
    key = jax.random.key(2)
    sigmas = DEFAULT_MIA_SIGMAS
    for den, expect_leak in (
        (MemorisingDenoiser(members), True),
        (GaussianDenoiser(), False),
    ):
        loss_in = ev.mia_loss_scores(den, None, members, key)
        loss_out = ev.mia_loss_scores(den, None, nonmembers, key)
        result = ev.loss_threshold_attack(loss_in, loss_out, sigmas=sigmas)
        assert set(result["per_sigma"]) == set(sigmas)
        if expect_leak:
            assert result["auc"] > 0.95
            assert result["tpr_at_1_fpr"] > 0.3  # measured 0.485 at sigma = 0.05
        else:
            # Best of 6 levels on 200 vs 200 examples: close to chance.
            assert result["auc"] < 0.62
            assert result["tpr_at_1_fpr"] < 0.08


def test_distance_to_closest_record_is_the_naive_nearest_neighbour_distance():
    from privrl_jax import eval as evaluation

    rng = np.random.default_rng(0)
    cand, syn = rng.normal(size=(7, 3)), rng.normal(size=(50, 3))
    naive = -np.array([min(np.linalg.norm(c - s) for s in syn) for c in cand])
    got = evaluation.distance_to_closest_record_scores(
        cand, syn, chunk=3
    )  # several chunks
    np.testing.assert_allclose(got, naive, rtol=1e-10, atol=1e-12)
    # A candidate copied into the release scores 0, the maximum: a memorised member.
    assert evaluation.distance_to_closest_record_scores(syn[:2], syn)[0] == 0.0
    with pytest.raises(ValueError, match="candidates"):
        evaluation.distance_to_closest_record_scores(cand, syn[:, :2])
    # chunk 0 or below is refused (a negative step would leave the scores unwritten).
    for bad in (0, -3):
        with pytest.raises(ValueError, match="chunk must be >= 1"):
            evaluation.distance_to_closest_record_scores(cand, syn, chunk=bad)
