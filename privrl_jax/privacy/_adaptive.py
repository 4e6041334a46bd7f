"""Quantile-based adaptive clipping: the clip norm follows a private quantile estimate.

Andrew, Thakkar, McMahan & Ramaswamy (2021), "Differentially private learning with
adaptive clipping" (NeurIPS 2021, https://arxiv.org/abs/1905.03871), Algorithm 1 and
Theorem 1. At step t, with clip norm C_t, every sampled unit u reports one bit

    b_u = [ ||g_u|| <= C_t ]      (its whole-unit norm: one bit per unit however many
                                   items it holds, as the clip is per unit)

and the release is, besides the noisy clipped gradient sum,

    b~_t = ( sum_u (b_u - 1/2) + N(0, sigma_b^2) ) / m + 1/2,       m = q N (public)
    C_{t+1} = C_t * exp(-eta_C (b~_t - gamma))        (the paper's geometric update)

so C_t drifts toward the gamma-quantile of the unit norms: up while fewer than gamma
of the units are unclipped, down while more are.

Why the bits are centred (b_u - 1/2, as the paper and TF Privacy's
``QuantileAdaptiveClipSumQuery`` do): adding or removing one unit then moves the count
by at most 1/2 rather than 1 (under replace-one, a unit's bit flips: 1 either way). The
count's sensitivity is therefore ``neighboring.sensitivity_factor / 2`` and its noise
multiplier z_b = sigma_b / that.

The accounting (the paper's Theorem 1): the gradient sum (sensitivity Delta, noise
z_Delta Delta) and the count (noise multiplier z_b) are released together from the same
sampled batch, so the pair is ONE Gaussian mechanism of noise multiplier
``(z_Delta^-2 + z_b^-2)^(-1/2)`` (``_plan.effective_noise_multiplier``'s argument).
Choosing

    z_Delta = (z^-2 - z_b^-2)^(-1/2)          (add/remove: z_b = 2 sigma_b)

makes the pair exactly the plan's Gaussian of noise multiplier z: the plan's event, its
epsilon, the ledger's entry and the auditor's accounted epsilon are those of the fixed-
clip plan with the same z, bit for bit, and the count costs only a slightly larger
gradient noise. The split is impossible when z_b <= z (the count alone would spend more
than the whole budget); :func:`gradient_noise_multiplier` refuses it. Nothing else is
released: C_{t+1} is a function of the noisy count (post-processing), so the next
steps' sensitivity (C_{t+1}) is public when the step runs.

Pure JAX functions (the update and the bit count) and a frozen config; the plan
(``_plan.DPPlan(adaptive_clipping=...)``) and the loop (``_fit.fit``) wire them in.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from privrl_jax.privacy._accounting import Neighboring

# The fraction of the expected batch size the count's noise std defaults to: the paper's
# recommendation sigma_b = m / 20 (Andrew et al. 2021, Sec. 3.3).
DEFAULT_COUNT_NOISE_FRACTION = 0.05
# The count noise's key is fold_in(fold_in(noise_key, COUNT_NOISE_TAG), t): a root
# that no gradient release key (fold_in(noise_key, t), t < 2^31) can equal.
COUNT_NOISE_TAG = 0xFFFFFFFF


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdaptiveClipping:
    """Quantile-based adaptive clipping (Andrew et al. 2021), opt-in on a plan.

    ``DPPlan(..., l2_clip_norm=C0, adaptive_clipping=AdaptiveClipping())``: the plan's
    clip norm is the initial C0; :func:`~privrl_jax.privacy.fit` then moves it after
    every step toward the ``target_quantile`` of the per-unit gradient norms (see the
    module docstring of ``privacy/_adaptive.py`` for the update and its accounting).

    Attributes:
      target_quantile: gamma in (0, 1), the fraction of units left unclipped (the
        paper's default 0.5).
      learning_rate: eta_C > 0 of the geometric update (the paper's default 0.2).
      count_noise_std: sigma_b > 0, the std of the noise on the centred count of
        unclipped units; None: ``expected_batch_size / 20`` (the paper's default),
        resolved by the plan.
    """

    target_quantile: float = 0.5
    learning_rate: float = 0.2
    count_noise_std: float | None = None

    def __post_init__(self):
        g = float(self.target_quantile)
        if not 0.0 < g < 1.0:
            raise ValueError(
                f"target_quantile must lie in (0, 1); got {self.target_quantile!r}."
            )
        lr = float(self.learning_rate)
        if not 0.0 < lr < math.inf:
            raise ValueError(
                "learning_rate must be a finite number > 0; got "
                f"{self.learning_rate!r}."
            )
        object.__setattr__(self, "target_quantile", g)
        object.__setattr__(self, "learning_rate", lr)
        if self.count_noise_std is not None:
            s = float(self.count_noise_std)
            if not 0.0 < s < math.inf:
                raise ValueError(
                    "count_noise_std must be a finite number > 0 (or None for "
                    f"expected_batch_size / 20); got {self.count_noise_std!r}."
                )
            object.__setattr__(self, "count_noise_std", s)

    def resolved(self, expected_batch_size: float) -> AdaptiveClipping:
        """A copy with ``count_noise_std`` set (the default m / 20 when it was None)."""
        if self.count_noise_std is not None:
            return self
        return dataclasses.replace(
            self,
            count_noise_std=DEFAULT_COUNT_NOISE_FRACTION * float(expected_batch_size),
        )

    def describe(self) -> dict[str, Any]:
        """The config as plain JSON types (for the ledger)."""
        return {
            "target_quantile": self.target_quantile,
            "learning_rate": self.learning_rate,
            "count_noise_std": self.count_noise_std,
        }


def count_noise_multiplier(count_noise_std: float, neighboring: Neighboring) -> float:
    """z_b = sigma_b / (the centred count's sensitivity).

    The sensitivity is 1/2 under add/remove-one, 1 under replace-one.
    """
    return count_noise_std / (0.5 * neighboring.sensitivity_factor)


def gradient_noise_multiplier(
    noise_multiplier: float, count_multiplier: float
) -> float:
    """z_Delta = (z^-2 - z_b^-2)^(-1/2): the gradient's share of a budget z.

    With it, the gradient sum and the count together are one Gaussian mechanism of
    noise multiplier z (Andrew et al. 2021, Theorem 1).

    Args:
      noise_multiplier: z, the plan's (accounted) noise multiplier; 0 (a non-private
        plan) gives 0.
      count_multiplier: z_b, the count's noise multiplier
        (:func:`count_noise_multiplier`).

    Returns:
      z_Delta >= z.

    Raises:
      ValueError: z_b <= z, where no split exists (the count alone would cost more than
        the whole step); raise the count's noise std or lower the target epsilon.
    """
    if noise_multiplier == 0:
        return 0.0
    if not count_multiplier > noise_multiplier:
        raise ValueError(
            "adaptive clipping cannot split the noise: the count of unclipped "
            f"units has noise multiplier z_b = {count_multiplier:.6g} (its noise std "
            "over its sensitivity, 1/2 under add/remove-one), which must exceed the "
            f"plan's noise multiplier z = {noise_multiplier:.6g} for the gradient to "
            "keep any budget (z_Delta = (z^-2 - z_b^-2)^(-1/2)). Raise "
            "AdaptiveClipping.count_noise_std (the paper's default is expected batch "
            "size / 20), raise the expected batch size, or lower the target epsilon."
        )
    return 1.0 / math.sqrt(noise_multiplier**-2 - count_multiplier**-2)


def centred_unclipped_count(
    per_unit_norms: jax.Array, unit_mask: jax.Array, l2_clip_norm: jax.typing.ArrayLike
) -> jax.Array:
    """Sum over present units of ``[norm <= C] - 1/2`` (float32 scalar).

    Args:
      per_unit_norms: [units] each unit's whole-contribution norm (``ClipMetrics``'s;
        0 for a unit whose contribution was non-finite, so its bit is 1: any bit of a
        present unit keeps the sensitivity at 1/2).
      unit_mask: [units] bool, False for padded units (they contribute exactly 0).
      l2_clip_norm: the clip norm C_t the norms were clipped to.

    Returns:
      The count, of sensitivity 1/2 under add/remove-one (1 under replace-one).
    """
    bits = (per_unit_norms <= l2_clip_norm).astype(jnp.float32) - 0.5
    return jnp.sum(jnp.where(unit_mask, bits, 0.0))


def update_clip_norm(
    l2_clip_norm: jax.Array,
    centred_count: jax.Array,
    key: jax.Array,
    *,
    config: AdaptiveClipping,
    count_noise_std: jax.typing.ArrayLike,
    expected_batch_size: float,
) -> tuple[jax.Array, jax.Array]:
    """One geometric step of the clip norm from the noisy fraction of unclipped units.

    ``b~ = (count + N(0, sigma_b^2)) / m + 1/2``, ``C' = C exp(-eta (b~ - gamma))``.
    Pure and jittable.

    Args:
      l2_clip_norm: C_t (float32 scalar).
      centred_count: :func:`centred_unclipped_count` of step t's batch.
      key: the count noise's key of step t (never a gradient release's).
      config: gamma and eta.
      count_noise_std: sigma_b (0 in a non-private plan).
      expected_batch_size: m = q N, the public normaliser.

    Returns:
      ``(C_{t+1}, b~_t)``.
    """
    noise = jnp.asarray(count_noise_std, jnp.float32) * jax.random.normal(
        key, (), jnp.float32
    )
    fraction = (centred_count + noise) / jnp.float32(expected_batch_size) + 0.5
    new = l2_clip_norm * jnp.exp(
        -jnp.float32(config.learning_rate)
        * (fraction - jnp.float32(config.target_quantile))
    )
    return new.astype(jnp.float32), fraction
