"""A white-box one-run audit of the library's own DP-SGD loop (:func:`privrl_jax.privacy.fit`).

Steinke, Nasr & Jagielski ("Privacy Auditing with One (1) Training Run", NeurIPS 2023, Sec. 6)
audit DP-SGD in one run with *gradient canaries*: m extra units whose gradient is a fixed
direction, each put in the training set with probability 1/2, and an auditor who sees every
noisy update (the white-box threat model DP-SGD's analysis covers) and scores each canary by the
updates' projection on its direction. We do exactly that through the real loop, on the user's
loss, optimizer and data:

- the parameters get an extra block ``canary`` of m zeros that the real loss never reads, so the
  real gradients are 0 there and the canaries' directions are the Dirac vectors of that block;
- canary i's unit has one item whose loss is ``1e6 * canary[i]``: its gradient, ``1e6 e_i``, is
  clipped to exactly ``C e_i`` by the same clipping every unit gets;
- the included canaries are appended to the data, the sampler keeps its sampling rate (the dataset
  size grows by the number included), and :func:`fit` runs the plan's steps with the plan's noise;
- canary i's score is the sum over steps of the released noisy mean's coordinate ``canary[i]``.

The result is :func:`one_run_epsilon_lower_bound` on those scores: with probability >= the
confidence, the loop as implemented is not (eps, delta)-DP for any eps below it. Above the
accounted epsilon it is a privacy bug (:class:`PrivacyAuditError`). The canaries are audit-only:
a release run never contains them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from privrl_jax.privacy._audit import (
    AuditResult,
    GaussianDpEstimate,
    KeyOrSeed,
    draw_inclusion,
    gaussian_dp_epsilon_estimate,
    one_run_epsilon_lower_bound,
)
from privrl_jax.privacy._fit import DPMethod, DPSecret, fit
from privrl_jax.privacy._aggregation import DPTrainState
from privrl_jax.privacy._plan import DPPlan

PyTree = Any
# A canary's gradient norm before clipping: any value far above every clip norm in use.
CANARY_GRADIENT_NORM = 1e6


class PrivacyAuditError(RuntimeError):
    """An audit demonstrated more epsilon than was accounted: the implementation leaks."""


@dataclasses.dataclass(frozen=True)
class FitAudit:
    """The outcome of :func:`audit_fit`, JSON-ready through :meth:`to_dict`.

    Attributes:
      epsilon_accounted: the plan's epsilon at ``delta`` (inf for sigma = 0).
      audit: the one-run bound (its ``epsilon_lower_bound`` is the demonstrated epsilon).
      gdp: the Gaussian-DP fit of the same scores (Nasr et al. 2023): ``mu`` is the noise the run
        showed, in units of the sensitivity (1 / sigma for one full-batch step). An estimate, not
        a guarantee: only the one-run bound is.
      included: how many of the m canaries were in the training set (secret until the audit ends).
      steps: DP steps run.
    """

    epsilon_accounted: float
    audit: AuditResult
    gdp: GaussianDpEstimate
    included: int
    steps: int

    @property
    def epsilon_demonstrated(self) -> float:
        """The audit's lower bound on epsilon."""
        return self.audit.epsilon_lower_bound

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works."""
        return {"epsilon_accounted": self.epsilon_accounted,
                "epsilon_demonstrated": self.epsilon_demonstrated,
                "included": self.included, "steps": self.steps, "audit": self.audit.to_dict(),
                "gaussian_dp_estimate": self.gdp.to_dict()}

    def line(self) -> str:
        """The report's line: "epsilon accounted X; epsilon demonstrated >= Y (95%)"."""
        return (f"epsilon accounted {self.epsilon_accounted:.4g}; epsilon demonstrated >= "
                f"{self.epsilon_demonstrated:.3g} ({100 * self.audit.confidence:g}%, one-run audit, "
                f"m = {self.audit.m} canaries, {self.audit.guesses} guesses, "
                f"{self.audit.correct} right)")


def audit_fit(
    plan: DPPlan,
    per_item_loss: Callable[[PyTree, PyTree], jax.Array],
    optimizer: optax.GradientTransformation,
    params: PyTree,
    data: PyTree,
    *,
    num_canaries: int,
    k_positive: int,
    k_negative: int | None = None,
    delta: float,
    seed: KeyOrSeed = 0,
    secret: DPSecret | None = None,
    confidence: float = 0.95,
    accountant: str = "rdp",
    raise_on_violation: bool = True,
) -> FitAudit:
    """One white-box training run of :func:`fit` with ``num_canaries`` gradient canaries.

    Args:
      plan: the plan the release run uses (its sampling rate, clip norm, sigma and steps).
      per_item_loss, optimizer, params: as :func:`privrl_jax.privacy.gradient_method`.
      data: the training units, leaves ``[N, items, ...]`` (the release run's data, or a stand-in).
      num_canaries: m.
      k_positive, k_negative: the auditor's "in" / "out" guesses (highest / lowest scores; fixed
        before the run, as the one-run bound requires). ``k_negative`` defaults to ``k_positive``.
      delta: the delta of the tested (eps, delta) hypothesis (the release's delta).
      seed: draws the inclusion bits (secret to the auditor until scoring).
      secret: the run's noise secret (default: fresh from the OS).
      confidence: of the lower bound.
      accountant: for the accounted epsilon.
      raise_on_violation: raise :class:`PrivacyAuditError` when the lower bound exceeds the
        accounted epsilon.

    Returns:
      :class:`FitAudit`.
    """
    if num_canaries < 1:
        raise ValueError(f"num_canaries must be >= 1; got {num_canaries}.")
    k_negative = k_positive if k_negative is None else k_negative
    inclusion = draw_inclusion(seed, num_canaries)
    ids = np.flatnonzero(inclusion).astype(np.int32)
    leaves, tree = jax.tree_util.tree_flatten(data)
    n, items = leaves[0].shape[:2]
    # Canary units: a copy of unit 0's shapes (never read: only their flag and id matter).
    canary_units = [np.repeat(np.asarray(x[:1]), len(ids), axis=0) for x in leaves]
    augmented = jax.tree_util.tree_unflatten(
        tree, [np.concatenate([np.asarray(x), c]) for x, c in zip(leaves, canary_units)])
    flag = np.zeros((n + len(ids), items), bool)
    flag[n:, 0] = True
    cid = np.zeros((n + len(ids), items), np.int32)
    cid[n:, 0] = ids
    item_mask = np.ones((n + len(ids), items), bool)
    item_mask[n:, 1:] = False  # a canary unit is one item

    sampler = dataclasses.replace(plan.sampler, dataset_size=n + len(ids))
    audit_plan = dataclasses.replace(plan, sampler=sampler)

    def loss(p, item):
        real, is_canary, c = item
        return jnp.where(is_canary, CANARY_GRADIENT_NORM * p["canary"][c], per_item_loss(p["model"], real))

    full_params = {"model": params, "canary": jnp.zeros(num_canaries, jnp.float32)}
    opt_state = optimizer.init(full_params)

    def update(state, noisy_mean):
        train, scores = state
        updates, new_opt = optimizer.update(noisy_mean, train.opt_state, train.params)
        # The white-box auditor's view: every released noisy mean, projected on each canary.
        return DPTrainState(optax.apply_updates(train.params, updates), new_opt), scores + noisy_mean["canary"]

    method = DPMethod(audit_plan.clipped_grad(loss), lambda s: s[0].params, update)
    init = (DPTrainState(full_params, opt_state), jnp.zeros(num_canaries, jnp.float32))
    result = fit(audit_plan, method, (augmented, flag, cid), init, secret=secret,
                 item_mask=jnp.asarray(item_mask))
    scores = np.asarray(result.state[1], np.float64)
    bound = one_run_epsilon_lower_bound(scores, inclusion, delta=delta, k_positive=k_positive,
                                        k_negative=k_negative, confidence=confidence)
    gdp = gaussian_dp_epsilon_estimate(scores[inclusion], scores[~inclusion], delta=delta,
                                       confidence=confidence)
    accounted = plan.epsilon(delta, accountant).epsilon
    out = FitAudit(accounted, bound, gdp, int(len(ids)), plan.steps)
    if raise_on_violation and bound.epsilon_lower_bound > accounted * (1 + 1e-9):
        raise PrivacyAuditError(
            f"privacy bug: the audit demonstrated epsilon >= {bound.epsilon_lower_bound:.4g} "
            f"({100 * confidence:g}%) but the plan accounts epsilon = {accounted:.4g} at delta = "
            f"{delta:g}: the noise that ran is smaller than the noise accounted."
        )
    return out
