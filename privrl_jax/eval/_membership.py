"""Membership inference against the diffusion synthesizer: the loss-threshold attack.

Matsumoto, Miura and Yanai (2023), "Membership Inference Attacks against Diffusion
Models", https://arxiv.org/abs/2302.03262: a white-box attacker evaluates the
model's denoising loss on a candidate at fixed noise levels; training members tend
to have lower loss. PrivORL Sec. IX-D reports TPR at 10% and 1% FPR with members =
the sensitive training transitions and non-members = held-out sensitive ones.

For EDM the DDPM timestep becomes a noise level sigma. Matsumoto et al. find the
attack strongest at small-to-moderate noise (DDPM t ~ 100-300 of 1000, i.e.
sigma = sqrt((1 - alpha_bar) / alpha_bar) ~ 0.3-1); our default levels span
0.05-2. The attack is scored at every level and the best level is reported (an
attacker-favourable choice, hence conservative for the defence).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import sklearn.metrics

from privrl_jax.diffusion import DenoiseFn, edm_loss_at

DEFAULT_MIA_SIGMAS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


@functools.partial(
    jax.jit,
    static_argnames=("denoise_fn", "sigmas", "num_noise", "sigma_data", "chunk"),
)
def mia_loss_scores(
    denoise_fn: DenoiseFn,
    params: Any,
    x: jax.Array,
    key: jax.Array,
    *,
    sigmas: tuple[float, ...] = DEFAULT_MIA_SIGMAS,
    num_noise: int = 4,
    sigma_data: float = 1.0,
    chunk: int = 1024,
) -> jax.Array:
    """Per-example EDM loss at fixed noise levels and fixed noise draws.

    The same ``num_noise`` noise vectors per level (drawn from ``key``) are used for
    every example, so members and non-members are scored identically.

    Args:
      denoise_fn: preconditioned denoiser (static), e.g. `EDMDenoiser`.
      params: its parameters.
      x: candidate examples (normalised, encoded), [N, d].
      key: PRNG key of the fixed noise draws.
      sigmas: noise levels (static).
      num_noise: noise draws per level, averaged (static).
      sigma_data: data std for the loss weight.
      chunk: examples evaluated at once (static; bounds memory).

    Returns:
      Losses [N, len(sigmas)]; lower means "more likely a member".
    """
    noises = jax.random.normal(key, (len(sigmas), num_noise, x.shape[-1]), x.dtype)
    sigma_arr = jnp.asarray(sigmas, x.dtype)

    def one_example(xi):
        def one_level(sigma, level_noises):
            losses = jax.vmap(
                lambda n: edm_loss_at(
                    denoise_fn, params, xi, sigma, n, sigma_data=sigma_data
                )
            )(level_noises)
            return losses.mean()

        return jax.vmap(one_level)(sigma_arr, noises)

    return jax.lax.map(one_example, x, batch_size=min(chunk, x.shape[0]))


def tpr_at_fpr(fpr: np.ndarray, tpr: np.ndarray, target_fpr: float) -> float:
    """Largest TPR on the ROC curve with FPR <= target_fpr."""
    ok = fpr <= target_fpr
    return float(tpr[ok].max()) if ok.any() else 0.0


def mia_metrics(
    member_scores: np.ndarray, nonmember_scores: np.ndarray
) -> dict[str, float]:
    """ROC metrics of a membership score (higher = predicted member).

    Args:
      member_scores: scores of training members, [n].
      nonmember_scores: scores of held-out non-members, [m].

    Returns:
      ``{"auc", "tpr_at_10_fpr", "tpr_at_1_fpr"}`` (fractions, not percent).

    Raises:
      ValueError: if either set is empty or has non-finite scores.
    """
    member_scores = np.asarray(member_scores, np.float64).ravel()
    nonmember_scores = np.asarray(nonmember_scores, np.float64).ravel()
    for name, s in (
        ("member_scores", member_scores),
        ("nonmember_scores", nonmember_scores),
    ):
        if s.size == 0:
            raise ValueError(f"{name} is empty.")
        if not np.all(np.isfinite(s)):
            raise ValueError(f"{name} contains NaN or inf values.")
    labels = np.concatenate(
        [np.ones(member_scores.size), np.zeros(nonmember_scores.size)]
    )
    scores = np.concatenate([member_scores, nonmember_scores])
    fpr, tpr, _ = sklearn.metrics.roc_curve(labels, scores)
    return {
        "auc": float(sklearn.metrics.auc(fpr, tpr)),
        "tpr_at_10_fpr": tpr_at_fpr(fpr, tpr, 0.10),
        "tpr_at_1_fpr": tpr_at_fpr(fpr, tpr, 0.01),
    }


def loss_threshold_attack(
    member_losses: np.ndarray,
    nonmember_losses: np.ndarray,
    *,
    sigmas: tuple[float, ...] = DEFAULT_MIA_SIGMAS,
) -> dict[str, Any]:
    """Evaluates the loss-threshold attack from `mia_loss_scores` outputs.

    Args:
      member_losses: [n, S] losses of members at S noise levels.
      nonmember_losses: [m, S] losses of non-members.
      sigmas: the S noise levels (for the report).

    Returns:
      ``{"per_sigma": {sigma: metrics}, "best_sigma": float, **metrics_at_best}``
      where the best level maximises TPR@1%FPR (ties: AUC). Score = -loss.
    """
    member_losses = np.asarray(member_losses)
    nonmember_losses = np.asarray(nonmember_losses)
    if member_losses.ndim != 2 or member_losses.shape[1] != len(sigmas):
        raise ValueError(
            f"member_losses must be [n, {len(sigmas)}], got {member_losses.shape}."
        )
    if nonmember_losses.ndim != 2 or nonmember_losses.shape[1] != len(sigmas):
        raise ValueError(
            f"nonmember_losses must be [m, {len(sigmas)}], got "
            f"{nonmember_losses.shape}."
        )
    per_sigma = {
        float(s): mia_metrics(-member_losses[:, i], -nonmember_losses[:, i])
        for i, s in enumerate(sigmas)
    }
    best = max(
        per_sigma, key=lambda s: (per_sigma[s]["tpr_at_1_fpr"], per_sigma[s]["auc"])
    )
    return {"per_sigma": per_sigma, "best_sigma": best, **per_sigma[best]}


def distance_to_closest_record_scores(
    candidates: np.ndarray, synthetic: np.ndarray, *, chunk: int | None = None
) -> np.ndarray:
    """Black-box membership scores from a synthetic release: distance to closest record.

    A candidate's score is minus its Euclidean distance to its nearest synthetic row
    (higher = predicted member).

    The "full black-box" attack of Chen, Yu, Zhang & Fritz (GAN-Leaks, CCS 2020): a
    generator that memorised a training row emits samples near it, so members sit closer
    to the release than non-members of the same law. It needs only the release (no
    model), which makes it the attack a reader of a published synthetic dataset can run.
    Compare rows on one scale (e.g. the public normaliser's). Exact nearest neighbours,
    in chunks of ``chunk`` candidates (default: as many as keep a chunk's distance
    matrix near 10^7 entries, 80 MB).

    Args:
      candidates: [n, d] rows whose membership is scored.
      synthetic: [N, d] the release, N >= 1.
      chunk: candidates per chunk of the distance computation, >= 1 (memory only;
        the scores do not depend on it); None picks one.

    Returns:
      [n] float64 scores, each <= 0.

    Raises:
      ValueError: `candidates` and `synthetic` not [n, d] and [N >= 1, d], or a
        `chunk` below 1.
    """
    c = np.asarray(candidates, np.float64)
    s = np.asarray(synthetic, np.float64)
    if c.ndim != 2 or s.ndim != 2 or c.shape[1] != s.shape[1] or len(s) == 0:
        raise ValueError(
            f"expected candidates [n, d] and synthetic [N >= 1, d]; got {c.shape} and "
            f"{s.shape}."
        )
    if chunk is not None and chunk < 1:
        # range() with a step <= 0 would leave `out` unwritten (np.empty) or raise.
        raise ValueError(f"chunk must be >= 1 or None; got {chunk!r}.")
    s_sq = np.sum(s * s, axis=1)
    chunk = chunk or max(1, 10_000_000 // len(s))
    out = np.empty(len(c))
    for i in range(0, len(c), chunk):
        x = c[i : i + chunk]
        d2 = np.sum(x * x, axis=1)[:, None] - 2 * x @ s.T + s_sq[None, :]
        out[i : i + chunk] = -np.sqrt(np.maximum(d2.min(axis=1), 0.0))
    return out
