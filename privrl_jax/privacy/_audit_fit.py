"""A white-box one-run audit of the library's own DP-SGD loop.

The loop is :func:`privrl_jax.privacy.fit`.

Steinke, Nasr & Jagielski ("Privacy Auditing with One (1) Training Run", NeurIPS 2023)
audit DP-SGD in one run with *gradient canaries*: m extra units whose gradient is a
fixed direction, each put in the training set with probability 1/2, and an auditor who
sees every noisy update (the white-box threat model DP-SGD's analysis covers) and scores
each canary by the updates' projection on its direction. We do exactly that through the
real loop, on the user's loss, optimizer and data:

- the parameters get an extra block ``canary`` of m zeros that the real loss never
  reads, so the real gradients are 0 there and the canaries' directions are the Dirac
  vectors of that block;
- canary i's unit has one item whose loss is ``1e6 * canary[i]``: its gradient, ``1e6
  e_i``, is clipped to exactly ``C e_i`` by the same clipping every unit gets;
- the included canaries are appended to the data, the sampler keeps its sampling rate
  (the dataset size grows by the number included), and :func:`fit` runs the plan's steps
  with the plan's noise;
- canary i's score is the sum over steps of the released noisy mean's coordinate
  ``canary[i]``.

The result is :func:`one_run_epsilon_lower_bound` on those scores: with probability >=
the confidence, the loop as implemented is not (eps, delta)-DP for any eps below it.
Above the accounted epsilon it is a privacy bug (:class:`PrivacyAuditError`). The
canaries are audit-only: a release run never contains them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax

from privrl_jax.privacy._accounting import Accountant, Neighboring, compute_epsilon
from privrl_jax.privacy._aggregation import DPTrainState
from privrl_jax.privacy._audit import (
    AuditResult,
    GaussianDpEstimate,
    KeyOrSeed,
    clopper_pearson_epsilon_lower_bound,
    draw_inclusion,
    gaussian_dp_epsilon_estimate,
    one_run_epsilon_lower_bound,
)
from privrl_jax.privacy._audit_selection import (
    LEDGER_CANDIDATES,
    audit_selection,
    worst_case_score_pair,
)
from privrl_jax.privacy._fit import Callback, DPMethod, DPSecret, ProgressBar, fit
from privrl_jax.privacy._ledger import Ledger
from privrl_jax.privacy._plan import (
    DPPlan,
    ExponentialMechanism,
    GaussianMechanism,
    mechanism_from_description,
)

PyTree = Any
# A canary's gradient norm before clipping: any value far above every clip norm in use.
CANARY_GRADIENT_NORM = 1e6


class PrivacyAuditError(RuntimeError):
    """An audit showed more epsilon than was accounted: the implementation leaks."""


@dataclasses.dataclass(frozen=True)
class FitAudit:
    """The outcome of :func:`audit_fit`, JSON-ready through :meth:`to_dict`.

    Attributes:
      epsilon_accounted: the plan's epsilon at ``delta`` (inf for sigma = 0).
      audit: the one-run bound (its ``epsilon_lower_bound`` is the demonstrated
        epsilon).
      gdp: the Gaussian-DP fit of the same scores (Nasr et al. 2023): ``mu`` is the
        noise the run showed, in units of the sensitivity (1 / sigma for one full-batch
        step). Its epsilons are estimates, not guarantees: only the one-run bound is.
      included: how many of the m canaries were in the training set (secret until the
        audit ends).
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

    @property
    def epsilon_ceiling(self) -> float:
        """The most this audit could have shown (every guess right)."""
        return self.audit.epsilon_ceiling

    @property
    def auditable(self) -> bool:
        """False when the plan is accounted above :attr:`epsilon_ceiling`.

        No fault can then be flagged, and a pass means nothing.
        """
        return self.audit.auditable(self.epsilon_accounted)

    @property
    def status(self) -> str:
        """``"violation"``, ``"not auditable at this size"`` or ``"passed"``."""
        return audit_status(
            self.epsilon_demonstrated, self.epsilon_accounted, self.epsilon_ceiling
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works."""
        return {
            "epsilon_accounted": self.epsilon_accounted,
            "epsilon_demonstrated": self.epsilon_demonstrated,
            "epsilon_ceiling": self.epsilon_ceiling,
            "auditable": self.auditable,
            "status": self.status,
            "included": self.included,
            "steps": self.steps,
            "audit": self.audit.to_dict(),
            "gaussian_dp_estimate": self.gdp.to_dict(),
        }

    def line(self) -> str:
        """The report's line: accounted, demonstrated (and its ceiling), status.

        Its form: "epsilon accounted X; epsilon demonstrated >= Y (95%, ..., at most Z
        at this size): status".
        """
        return (
            f"epsilon accounted {self.epsilon_accounted:.4g}; epsilon demonstrated >= "
            f"{self.epsilon_demonstrated:.3g} ({100 * self.audit.confidence:g}%, "
            "one-run audit, "
            f"m = {self.audit.m} canaries, {self.audit.guesses} guesses, "
            f"{self.audit.correct} right; at most {self.epsilon_ceiling:.3g} at this "
            f"size): {self.status}"
        )


def audit_status(demonstrated: float, accounted: float, ceiling: float) -> str:
    """What an audit says: a violation, a pass, or that it could not have failed.

    Args:
      demonstrated: the audit's lower bound on epsilon.
      accounted: the accounted epsilon.
      ceiling: the most the audit could have shown.

    Returns:
      ``"violation"`` (demonstrated above accounted), ``"not auditable at this size"``
      (accounted at or above the ceiling: nothing could be flagged) or ``"passed"``.
    """
    if demonstrated > accounted * (1 + 1e-9):
        return "violation"
    if not accounted < ceiling:
        return "not auditable at this size"
    return "passed"


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
    accountant: Accountant = "rdp",
    raise_on_violation: bool = True,
    callbacks: Sequence[Callback] = (),
    score: str = "likelihood",
) -> FitAudit:
    """One white-box run of :func:`fit` with ``num_canaries`` gradient canaries.

    Args:
      plan: the plan the release run uses (its sampling rate, clip norm, sigma and
        steps).
      per_item_loss: as :func:`privrl_jax.privacy.gradient_method`.
      optimizer: as :func:`privrl_jax.privacy.gradient_method`.
      params: as :func:`privrl_jax.privacy.gradient_method`.
      data: the training units, leaves ``[N, items, ...]`` (the release run's data, or a
        stand-in).
      num_canaries: The number of canaries m.
      k_positive: the auditor's "in" guesses (highest scores; fixed before the run,
        as the one-run bound requires).
      k_negative: the auditor's "out" guesses (lowest scores; fixed before the run);
        defaults to ``k_positive``.
      delta: the delta of the tested (eps, delta) hypothesis (the release's delta).
      seed: draws the inclusion bits (secret to the auditor until scoring).
      secret: the run's noise secret (default: fresh from the OS).
      confidence: of the lower bound.
      accountant: for the accounted epsilon.
      raise_on_violation: raise :class:`PrivacyAuditError` when the lower bound exceeds
        the accounted epsilon.
      callbacks: passed to :func:`fit` (e.g. a :class:`ProgressBar` for a long audit).
      score: how a canary's iterates are scored (:func:`canary_step_score`):
        ``"likelihood"`` (default; every step's likelihood ratio, which sees the few
        steps that sampled a canary under Poisson sampling) or ``"sum"`` (the sum of
        its coordinate over the steps, the earlier default).

    Returns:
      :class:`FitAudit`.

    Raises:
      ValueError: a replace-one plan (adding a canary unit is an add/remove neighbour,
        so the bound would not test the relation the plan is accounted under; as
        :func:`audit_ledger`).
    """
    if plan.neighboring is Neighboring.REPLACE_ONE:
        raise ValueError(
            "audit_fit audits add/remove-one plans only: adding a canary is an "
            "add/remove neighbour, not a replace-one one (audit_ledger skips such "
            "groups too)."
        )
    if num_canaries < 1:
        raise ValueError(f"num_canaries must be >= 1; got {num_canaries}.")
    k_negative = k_positive if k_negative is None else k_negative
    inclusion = draw_inclusion(seed, num_canaries)
    ids = np.flatnonzero(inclusion).astype(np.int32)
    leaves, tree = jax.tree_util.tree_flatten(data)
    n, items = leaves[0].shape[:2]
    # Canary units: a copy of unit 0's shapes (never read: only their flag and id
    # matter).
    canary_units = [np.repeat(np.asarray(x[:1]), len(ids), axis=0) for x in leaves]
    augmented = jax.tree_util.tree_unflatten(
        tree, [np.concatenate([np.asarray(x), c]) for x, c in zip(leaves, canary_units)]
    )
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
        return jnp.where(
            is_canary,
            CANARY_GRADIENT_NORM * p["canary"][c],
            per_item_loss(p["model"], real),
        )

    full_params = {"model": params, "canary": jnp.zeros(num_canaries, jnp.float32)}
    opt_state = optimizer.init(full_params)

    step_score = canary_step_score(
        score,
        sampling_rate=plan.sampling_rate,
        noise_multiplier=plan.noise_multipliers[0],
    )
    # the released noisy mean times q N / C: [canary sampled] + N(0, sigma^2)
    to_units = audit_plan.expected_batch_size / plan.l2_clip_norms[0]

    def update(state, noisy_mean):
        train, scores = state
        updates, new_opt = optimizer.update(noisy_mean, train.opt_state, train.params)
        # The white-box auditor's view: every released noisy mean, projected on each
        # canary and scored step by step.
        return DPTrainState(
            optax.apply_updates(train.params, updates), new_opt
        ), scores + step_score(noisy_mean["canary"] * to_units)

    method = DPMethod(audit_plan.clipped_grad(loss), lambda s: s[0].params, update)
    init = (DPTrainState(full_params, opt_state), jnp.zeros(num_canaries, jnp.float32))
    result = fit(
        audit_plan,
        method,
        (augmented, flag, cid),
        init,
        secret=secret,
        item_mask=jnp.asarray(item_mask),
        callbacks=callbacks,
    )
    scores = np.asarray(result.state[1], np.float64)
    bound = one_run_epsilon_lower_bound(
        scores,
        inclusion,
        delta=delta,
        k_positive=k_positive,
        k_negative=k_negative,
        confidence=confidence,
    )
    gdp = gaussian_dp_epsilon_estimate(
        scores[inclusion], scores[~inclusion], delta=delta, confidence=confidence
    )
    accounted = plan.epsilon(delta, accountant).epsilon
    out = FitAudit(accounted, bound, gdp, int(len(ids)), plan.steps)
    if raise_on_violation and bound.epsilon_lower_bound > accounted * (1 + 1e-9):
        raise PrivacyAuditError(
            "privacy bug: the audit demonstrated epsilon >= "
            f"{bound.epsilon_lower_bound:.4g} "
            f"({100 * confidence:g}%) but the plan accounts epsilon = {accounted:.4g} "
            "at delta = "
            f"{delta:g}: the noise that ran is smaller than the noise accounted."
        )
    return out


def canary_step_score(
    score: str, *, sampling_rate: float, noise_multiplier: float
) -> Callable[[jax.Array], jax.Array]:
    """The per-step score of a Dirac canary from its coordinate x of one release.

    In units of the clip norm, a release shows ``x = b + N(0, sigma^2)`` with ``b`` = 1
    when the canary was in the data and sampled (probability q), else 0. Summing x over
    the steps (``"sum"``) weighs the q T informative steps against T - q T steps of
    pure noise; at q = 0.01 it misses even a run whose noise is half the accounted one.
    ``"likelihood"`` adds, step by step, the log-likelihood ratio of "in" to "out" under
    the accounted sigma, ``log(1 - q + q exp((x - 1/2) / sigma^2))`` (Neyman-Pearson's
    statistic for the all-iterates white-box view; Nasr et al. 2023 audit DP-SGD on
    all iterates). With q = 1 it is an affine map of x, ranking as ``"sum"`` does. The
    one-run bound holds for any score fixed before the run; the accounted sigma and q
    are public. With sigma = 0 (a non-private plan) the likelihood is degenerate and
    the sum is used.

    Args:
      score: ``"likelihood"`` or ``"sum"``.
      sampling_rate: The sampling rate q.
      noise_multiplier: the accounted sigma.

    Returns:
      A jittable ``x -> per-step score`` (elementwise).
    """
    if score not in ("likelihood", "sum"):
        raise ValueError(f"score must be 'likelihood' or 'sum'; got {score!r}.")
    if score == "sum" or not noise_multiplier > 0:
        return lambda x: x
    inv_var = 1.0 / noise_multiplier**2
    if sampling_rate >= 1:
        return lambda x: (x - 0.5) * inv_var
    log_q, log_1mq = np.log(sampling_rate), np.log1p(-sampling_rate)

    def llr(x):
        return jnp.logaddexp(log_1mq, log_q + (x - 0.5) * inv_var)

    return llr


def _stand_in_problem(n: int) -> tuple[Callable, PyTree, PyTree]:
    # A linear model on random rows: the canaries live in their own block, so the model
    # only has to give the loop real units to clip and sample beside them.
    x = np.random.default_rng(0).normal(size=(n, 1, 2)).astype(np.float32)
    loss = lambda p, item: (jnp.dot(p["w"], item[0]) - item[1]) ** 2  # noqa: E731
    return loss, {"w": jnp.zeros(2, jnp.float32)}, (x, x.sum(-1))


def _audit_gaussian(
    mech: GaussianMechanism,
    count: int,
    m: int,
    k: int,
    delta: float,
    seed: KeyOrSeed,
    confidence: float,
) -> tuple[AuditResult, GaussianDpEstimate]:
    # Canary i moves coordinate i by the whole sensitivity; ``count`` releases of the
    # same vector, summed by the auditor (what composing them can show along a fixed
    # direction).
    inclusion = draw_inclusion(seed, m)
    value = jnp.asarray(inclusion, jnp.float32) * mech.l2_sensitivity
    keys = jax.random.split(
        jax.random.key(int(np.random.default_rng(seed).integers(2**31))), count
    )
    scores = cast(
        np.ndarray, sum(np.asarray(mech.release(k_, value), np.float64) for k_ in keys)
    )
    bound = one_run_epsilon_lower_bound(
        scores,
        inclusion,
        delta=delta,
        k_positive=k,
        k_negative=k,
        confidence=confidence,
    )
    gdp = gaussian_dp_epsilon_estimate(
        scores[inclusion], scores[~inclusion], delta=delta, confidence=confidence
    )
    return bound, gdp


def audit_ledger(
    ledger: Ledger,
    *,
    num_canaries: int = 10_000,
    guess_fraction: float = 0.01,
    seed: KeyOrSeed = 0,
    confidence: float = 0.95,
    microbatch_size: int = 256,
    progress: bool = False,
    selection_trials: int = 1_000_000,
    accountant: Accountant = "rdp",
) -> list[dict[str, Any]]:
    """Audits every mechanism a run's ledger recorded, as recorded.

    One row per ledger group.

    A DP-SGD group (a :meth:`DPPlan.describe`) is rebuilt as a plan with the recorded
    sampler, clip norm, sigma and number of steps and audited through :func:`audit_fit`
    on stand-in data of the recorded size (the canaries do not need the method's model:
    what is audited is the loop's clipping, sampling and noise as the plan runs them). A
    Gaussian-mechanism group (POOL) is audited on Dirac canaries of its released vector.
    An exponential-mechanism group (AIM's selections) gets the many-run audit of
    :func:`~privrl_jax.privacy.audit.audit_selection`: ``selection_trials`` draws of one
    selection on each side of :func:`worst_case_score_pair` (100 candidates, the
    recorded sensitivity), at the ledger's delta; the bound is one of a single
    selection, so its violation is judged against the selection's own pure epsilon
    (``epsilon_accounted_per_selection``), which the group's composed epsilon exceeds.
    A plan of several clipped blocks (GPOPE's primal and dual) is audited through its
    first block alone, a valid but loose lower bound of the whole. Groups that describe
    no mechanism (a non-private release) or replace-one sampling (adding a canary is an
    add/remove neighbour) are listed with why they were not audited. Each row's
    accounted epsilon is the group's own, at the ledger's delta, from ``accountant``
    (pass the one the run was accounted with: a PLD run's epsilon is lower than RDP's,
    and the audit must be judged against it). Each audited row states
    ``epsilon_ceiling``, the most its audit could have shown, and ``status``:
    ``"violation"``, ``"passed"`` or ``"not auditable at this size"`` (accounted at or
    above the ceiling: the audit could not have failed). ``progress`` shows a bar per
    audited DP-SGD group (an audit reruns every recorded step).

    Args:
      ledger: the run's ledger (its target delta is the audits' delta).
      num_canaries: canaries per audited DP-SGD or Gaussian-mechanism group.
      guess_fraction: the share of canaries guessed each way (in and out).
      seed: an int seed, a NumPy generator or a JAX key for the canaries and runs.
      confidence: the confidence of each lower bound.
      microbatch_size: the microbatch size of the rebuilt DP-SGD plans.
      progress: show a progress bar per audited DP-SGD group.
      selection_trials: draws on each side of an exponential-mechanism audit.
      accountant: the accountant the run was accounted with (``"rdp"`` or ``"pld"``).

    Returns:
      One dict per ledger group: ``what`` and ``count``; ``audited`` (False with
      ``why`` when not audited); for an audited group ``epsilon_accounted``,
      ``epsilon_demonstrated``, ``epsilon_ceiling``, ``status`` and ``violation``,
      with the audit's own details.
    """
    delta = ledger.target_delta
    k = max(1, int(guess_fraction * num_canaries))
    rows: list[dict[str, Any]] = []
    for g in ledger.groups():
        row: dict[str, Any] = {"what": g["what"], "count": g["count"]}
        mech = mechanism_from_description(g["params"], microbatch_size=microbatch_size)
        why = None
        if mech is None:
            why = (
                "no mechanism described "
                "(a non-private release spends no epsilon to audit)"
            )
        # A selection audit adds no canary: its score pair is a neighbour under
        # either relation, so only the canary audits skip replace-one.
        elif (
            not isinstance(mech, ExponentialMechanism)
            and mech.neighboring is Neighboring.REPLACE_ONE
        ):
            why = (
                "replace-one: adding a canary is an add/remove neighbour, "
                "not a replace-one one"
            )
        if why is not None:
            rows.append({**row, "audited": False, "why": why})
            continue
        if isinstance(mech, ExponentialMechanism):
            composed = (
                mech.event()
                if g["count"] == 1
                else dp_accounting.SelfComposedDpEvent(mech.event(), g["count"])
            )
            scores, neighbour = worst_case_score_pair(
                LEDGER_CANDIDATES, mech.sensitivity
            )
            sel = audit_selection(
                mech,
                scores,
                neighbour,
                trials=selection_trials,
                seed=seed,
                delta=delta,
                confidence=confidence,
            )
            # every draw on one side gives the event, none on the other: the most
            # these trials can show
            ceiling = clopper_pearson_epsilon_lower_bound(
                selection_trials,
                0,
                selection_trials,
                selection_trials,
                delta=delta,
                confidence=confidence,
            )
            rows.append(
                {
                    **row,
                    "audited": True,
                    "epsilon_accounted": compute_epsilon(
                        composed, delta, accountant=accountant
                    ).epsilon,
                    "accountant": accountant,
                    "epsilon_accounted_per_selection": mech.epsilon,
                    "epsilon_demonstrated": sel.epsilon_demonstrated,
                    "epsilon_ceiling": ceiling,
                    "auditable": bool(mech.epsilon < ceiling),
                    "status": audit_status(
                        sel.epsilon_demonstrated, mech.epsilon, ceiling
                    ),
                    "selection_audit": sel.to_dict(),
                    "violation": sel.violation,
                }
            )
            continue
        if isinstance(mech, GaussianMechanism):
            event = (
                mech.event()
                if g["count"] == 1
                else dp_accounting.SelfComposedDpEvent(mech.event(), g["count"])
            )
            accounted = compute_epsilon(event, delta, accountant=accountant).epsilon
            bound, gdp = _audit_gaussian(
                mech, g["count"], num_canaries, k, delta, seed, confidence
            )
        else:
            assert mech is not None  # refused above (``why``)
            plan = dataclasses.replace(mech, steps=int(g["count"]))
            accounted = plan.epsilon(delta, accountant).epsilon
            if plan.num_blocks > 1:
                # Canaries move the first block only: such a unit is a neighbour of the
                # whole mechanism and the auditor may ignore the other blocks
                # (post-processing), so the bound is one of the whole plan's epsilon,
                # not tight (the whole accounts every block).
                row["blocks"] = (
                    f"block 1 of {plan.num_blocks} audited alone (a lower bound of the "
                    "whole)"
                )
                plan = dataclasses.replace(
                    plan,
                    l2_clip_norm=plan.l2_clip_norms[0],
                    noise_multiplier=plan.noise_multipliers[0],
                )
            loss, params, data = _stand_in_problem(plan.dataset_size)
            res = audit_fit(
                plan,
                loss,
                optax.sgd(0.0),
                params,
                data,
                num_canaries=num_canaries,
                k_positive=k,
                delta=delta,
                seed=seed,
                confidence=confidence,
                raise_on_violation=False,
                callbacks=[ProgressBar(f"audit: {g['what']}", disable=not progress)],
            )
            bound, gdp = res.audit, res.gdp
        rows.append(
            {
                **row,
                "audited": True,
                "epsilon_accounted": accounted,
                "accountant": accountant,
                "epsilon_demonstrated": bound.epsilon_lower_bound,
                "epsilon_ceiling": bound.epsilon_ceiling,
                "auditable": bound.auditable(accounted),
                "status": audit_status(
                    bound.epsilon_lower_bound, accounted, bound.epsilon_ceiling
                ),
                "audit": bound.to_dict(),
                "gaussian_dp_estimate": gdp.to_dict(),
                "violation": bool(bound.epsilon_lower_bound > accounted * (1 + 1e-9)),
            }
        )
    return rows
