"""Empirical privacy audit with a Dirac canary (docs/dp_pitfalls.md, "Empirical audit on
a CPU").

Each release is the real mechanism: per-unit clipping of a batch, then the optax noise
transform. The canary unit's gradient points along e_1 with a huge norm, so after
clipping it contributes C e_1; all other units have gradients orthogonal to e_1.
Projecting releases on e_1 gives N(C, (sigma C)^2) with the canary and N(0, (sigma C)^2)
without: the Gaussian-DP mu is 1/sigma per release.
"""

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats

from privrl_jax.privacy import compute_epsilon
from privrl_jax.privacy._aggregation import add_gaussian_noise
from privrl_jax.privacy._clipping import clipped_grad

SIGMA, C, D, UNITS, RELEASES = 1.5, 0.8, 8, 16, 40_000


def _releases(with_canary: bool, key) -> np.ndarray:
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731  the gradient of a unit is its x
    x = jax.random.normal(jax.random.key(0), (UNITS, 1, D)).at[:, 0, 0].set(0.0)
    x = x.at[0, 0].set(jnp.zeros(D).at[0].set(1e6))  # the canary
    mask = jnp.ones((UNITS, 1), bool).at[0].set(with_canary)
    total, _ = clipped_grad(loss, l2_clip_norm=C)(jnp.zeros(D), x, mask)
    tx = add_gaussian_noise(SIGMA, C, key)
    state = tx.init(total)

    def one(count):
        noised, _ = tx.update(total, state._replace(count=count))
        return noised[0]

    return np.asarray(jax.jit(jax.vmap(one))(jnp.arange(RELEASES)))


def test_gaussian_dp_mu_matches_one_over_sigma():
    a = _releases(True, jax.random.key(1))
    b = _releases(False, jax.random.key(2))
    mu_hat = (a.mean() - b.mean()) / np.sqrt(0.5 * (a.var() + b.var()))
    # Standard error of a difference of two means over a pooled sd: sqrt(2/RELEASES).
    assert abs(mu_hat - 1 / SIGMA) < 6 * np.sqrt(2 / RELEASES)
    # A halved-noise bug would give mu ~ 2/sigma: far outside the tolerance above.
    assert 2 / SIGMA - mu_hat > 10 * np.sqrt(2 / RELEASES)


def test_threshold_attack_lower_bound_below_accountant():
    a = _releases(True, jax.random.key(3))
    b = _releases(False, jax.random.key(4))
    delta = 1e-5
    eps_acc = compute_epsilon(dp_accounting.GaussianDpEvent(SIGMA), delta).epsilon
    best = 0.0
    for t in np.quantile(b, [0.9, 0.99, 0.999]):
        tp, fp = int((a > t).sum()), int((b > t).sum())
        # Clopper-Pearson 95% bounds: lower on TPR, upper on FPR.
        tpr_lo = scipy.stats.beta.ppf(0.025, tp, RELEASES - tp + 1) if tp else 0.0
        fpr_hi = scipy.stats.beta.ppf(0.975, fp + 1, RELEASES - fp)
        if tpr_lo > delta:
            best = max(best, float(np.log((tpr_lo - delta) / fpr_hi)))
    assert 0.0 < best <= eps_acc
