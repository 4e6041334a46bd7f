"""Private selection: run DP candidates a random number of times, release only the best.

Choosing a hyper-parameter or a policy on the sensitive data costs privacy. Running each
of K candidates once and releasing the best costs the composition of the K runs; the
repeat-and-select procedure of Liu & Talwar (STOC 2019) and Papernot & Steinke
("Hyperparameter tuning with Renyi differential privacy", ICLR 2022) costs a small
constant over *one* run instead:

1. draw the number of runs K from a public distribution (:class:`Repetitions`);
2. K times, draw a candidate uniformly at random and run it: a DP mechanism returning a
   release and a DP score;
3. release the run with the highest score, and nothing else (neither K nor the other
   runs: K is what hides how many runs a good result needed).

The distributions are Papernot & Steinke's truncated negative binomial D_{eta, gamma}
(P[K = k] proportional to (1 - gamma)^k binom(k + eta - 1, k), k >= 1; eta = 1 is Liu &
Talwar's geometric, eta = 0 the logarithmic) and the Poisson distribution (K = 0 is
possible: nothing is released, which costs the same). Their RDP bounds, as functions of
one run's RDP curve (:func:`repeat_and_select_rdp`):

- Theorem 2 (truncated negative binomial): for lambda > 1,
  ``eps'(lambda) = eps(lambda) + (1 + eta) * min_l [(1 - 1/l) eps(l) + log(1/gamma)/l]
  + log(E[K]) / (lambda - 1)``;
- Theorem 6 (Poisson, mean mu): ``eps'(lambda) = eps(lambda) + mu * delta_hat +
  log(mu) / (lambda - 1)``, delta_hat the run's delta at ``log(1 + 1/(lambda - 1))``;

then RDP's monotonicity in lambda. dp-accounting 0.6 implements the same theorems
(``RepeatAndSelectDpEvent`` in its RDP accountant; no PLD), which is what the ledger
records and composes; :func:`repeat_and_select_rdp` is our own reading of the paper,
tested against it and against the exact Renyi divergence of a small discrete mechanism
(tests/privacy/test_selection.py).

The candidates' events. Q, one run, is "draw a candidate uniformly, run it": a
mixture, whose Renyi divergence is at most the largest of the candidates' (joint
quasi-convexity). So one run's RDP curve is the pointwise maximum over the candidates'
curves (:func:`pointwise_max_rdp`), and the theorems above hold with it. Candidates
with one event (the same DP-SGD plan at every learning rate) give that event; a
heterogeneous grid (steps, batch size, epsilon differ) gives a
:class:`PointwiseMaxDpEvent` of the distinct events, which our RDP accountant composes
(:func:`candidates_event`). :func:`select` cannot check that a callable keeps to its
event; the caller states it, as for any mechanism recorded in the ledger.

Resumability. Everything random in :func:`select` (K, which candidate each run draws,
each run's key) is a function of one secret key, and the whole procedure is recorded as
one ledger entry *before* the first run (the guard first), tagged with a fingerprint of
the key. A rerun with the same key (after a crash, say) finds that entry, pays nothing
more and, with candidates that are deterministic given their key, replays the same
release; another key is another selection and is charged again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import dp_accounting
import jax
import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from privrl_jax.privacy import _accounting, _ledger

R = TypeVar("R")

# dp-accounting does not export the event at its top level (0.6).
RepeatAndSelectDpEvent = dp_accounting.dp_event.RepeatAndSelectDpEvent
PointwiseMaxDpEvent = _accounting.PointwiseMaxDpEvent

# The RDP orders the module's own bounds use by default: dp-accounting's defaults, so a
# bound here and the ledger's epsilon optimise over the same grid.
DEFAULT_ORDERS: tuple[float, ...] = tuple(_rdp.DEFAULT_RDP_ORDERS)


def _tnb_mean(gamma: float, eta: float) -> float:
    """E[K] of the truncated negative binomial D_{eta, gamma}.

    Papernot & Steinke, Definition 1: ``eta (1 - gamma) / (gamma (1 - gamma^eta))``; its
    limits at eta = 0 (logarithmic) and eta = 1 (geometric).
    """
    if gamma >= 1.0:
        return 1.0
    if eta == 0.0:
        return (1.0 - gamma) / (gamma * math.log(1.0 / gamma))
    # -expm1(eta log gamma) = 1 - gamma^eta without cancellation for small eta.
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def _tnb_gamma(mean: float, eta: float) -> float:
    """The gamma of D_{eta, gamma} with E[K] = ``mean`` (bisection in log gamma).

    E[K] decreases in gamma, from inf at gamma -> 0 to 1 at gamma = 1. Returns the end
    of the final bracket whose mean is >= ``mean`` (the smaller gamma): the bounds grow
    with log(1/gamma), so the conservative side, as dp-accounting does.
    """
    if mean == 1.0:
        return 1.0
    if eta == 1.0:
        return 1.0 / mean
    lo, hi = -800.0, 0.0  # log gamma; mean(e^-800) overflows to inf, mean(1) = 1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _tnb_mean(math.exp(mid), eta) >= mean:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return math.exp(lo)


@dataclasses.dataclass(frozen=True)
class Repetitions:
    """The public distribution of the number of runs K of :func:`select`.

    Attributes:
      mean: E[K] >= 1.
      shape: eta of the truncated negative binomial D_{eta, gamma} (Papernot & Steinke
        2022, Definition 1): 0 logarithmic, 1 geometric (Liu & Talwar), any eta >= 0;
        ``inf`` for Poisson(mean) (K = 0 possible). dp-accounting's ``shape``.
    """

    mean: float
    shape: float

    def __post_init__(self):
        if not (math.isfinite(self.mean) and self.mean >= 1.0):
            raise ValueError(f"mean must be a finite number >= 1; got {self.mean!r}.")
        if math.isnan(self.shape) or self.shape < 0:
            raise ValueError(
                f"shape must be >= 0 (inf for Poisson); got {self.shape!r}."
            )

    @classmethod
    def geometric(cls, mean: float) -> Repetitions:
        """Liu & Talwar's geometric number of runs (eta = 1).

        P[K = k] = gamma (1 - gamma)^(k-1), gamma = 1 / mean.
        """
        return cls(float(mean), 1.0)

    @classmethod
    def logarithmic(cls, mean: float) -> Repetitions:
        """The logarithmic distribution (eta = 0): Theorem 2's smallest constant."""
        return cls(float(mean), 0.0)

    @classmethod
    def truncated_negative_binomial(cls, mean: float, eta: float) -> Repetitions:
        """D_{eta, gamma} with gamma set by E[K] = ``mean``."""
        return cls(float(mean), float(eta))

    @classmethod
    def poisson(cls, mean: float) -> Repetitions:
        """K ~ Poisson(mean) (Theorem 6); K = 0 releases nothing."""
        return cls(float(mean), math.inf)

    @property
    def is_poisson(self) -> bool:
        return math.isinf(self.shape)

    @property
    def gamma(self) -> float:
        """The gamma of D_{eta, gamma} (1 / mean for the geometric).

        Undefined for Poisson.
        """
        if self.is_poisson:
            raise ValueError("a Poisson number of runs has no gamma.")
        return _tnb_gamma(self.mean, self.shape)

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """P[K = k] for integer ``k`` (>= 0; 0 has mass only under Poisson)."""
        k = np.asarray(k)
        kf = k.astype(np.float64)
        if self.is_poisson:
            logp = kf * math.log(self.mean) - self.mean - _lgamma(kf + 1.0)
            return np.where(k >= 0, np.exp(logp), 0.0)
        gamma, eta = self.gamma, self.shape
        if gamma >= 1.0:
            return (k == 1).astype(np.float64)
        safe = np.maximum(kf, 1.0)
        if eta == 0.0:
            log_norm = math.log(math.log(1 / gamma))
            logp = safe * math.log1p(-gamma) - np.log(safe) - log_norm
        else:
            log_binom = _lgamma(safe + eta) - _lgamma(eta) - _lgamma(safe + 1.0)
            logp = (
                log_binom
                + safe * math.log1p(-gamma)
                - math.log(math.expm1(-eta * math.log(gamma)))
            )
        return np.where(k >= 1, np.exp(logp), 0.0)

    def sample(self, rng: np.random.Generator) -> int:
        """One draw of K from ``rng`` (host-side NumPy)."""
        if self.is_poisson:
            return int(rng.poisson(self.mean))
        gamma, eta = self.gamma, self.shape
        if gamma >= 1.0:
            return 1
        if eta == 0.0:
            return int(rng.logseries(1.0 - gamma))
        if eta == 1.0:
            return int(rng.geometric(gamma))
        # The negative binomial NB(eta, gamma) conditioned on K >= 1 (Definition 1).
        while True:
            k = int(rng.negative_binomial(eta, gamma))
            if k >= 1:
                return k

    def event(
        self, base: dp_accounting.DpEvent | Sequence[dp_accounting.DpEvent]
    ) -> dp_accounting.DpEvent:
        """The event of the selection over runs of ``base``.

        Args:
          base: one run's event, or every candidate's (:func:`candidates_event`).

        Returns:
          dp-accounting's ``RepeatAndSelectDpEvent`` of one run's event.
        """
        return RepeatAndSelectDpEvent(
            candidates_event(base), float(self.mean), float(self.shape)
        )

    def naive_event(
        self, base: dp_accounting.DpEvent | Sequence[dp_accounting.DpEvent]
    ) -> dp_accounting.DpEvent:
        """What the selection replaces: ceil(mean) runs, each released and composed.

        Args:
          base: one run's event, or every candidate's (:func:`candidates_event`).

        Returns:
          The composition of ceil(mean) runs.
        """
        base = candidates_event(base)
        runs = math.ceil(self.mean)
        return base if runs == 1 else dp_accounting.SelfComposedDpEvent(base, runs)

    def describe(self) -> dict[str, Any]:
        """The distribution's parameters, as the ledger records them."""
        kind = (
            "poisson"
            if self.is_poisson
            else {0.0: "logarithmic", 1.0: "geometric"}.get(
                self.shape, "truncated_negative_binomial"
            )
        )
        out: dict[str, Any] = {"distribution": kind, "mean": self.mean}
        if not self.is_poisson:
            out.update(eta=self.shape, gamma=self.gamma)
        return out


def _lgamma(x: np.ndarray | float) -> np.ndarray:
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def repeat_and_select_rdp(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    repetitions: Repetitions,
) -> np.ndarray:
    """RDP of the best of K runs, from one run's RDP curve (Papernot & Steinke 2022).

    Theorem 2 for the truncated negative binomial (eta >= 0), Theorem 6 for Poisson,
    then monotonicity (an order's bound is also any smaller order's). The other order
    of Theorem 2 (lambda hat) and Theorem 6's (eps hat, delta hat) come from the same
    curve (delta hat by dp-accounting's RDP-to-DP conversion).

    Args:
      orders: RDP orders (> 1 to get a finite bound at that order).
      rdp: one run's RDP at each order (the run's release and score together).
      repetitions: the distribution of K.

    Returns:
      The selection's RDP at each order (inf where no bound applies).

    Raises:
      ValueError: ``orders`` and ``rdp`` of different lengths.
    """
    orders = np.asarray(orders, np.float64)
    rdp = np.asarray(rdp, np.float64)
    if orders.shape != rdp.shape or orders.ndim != 1:
        raise ValueError(
            "orders and rdp must be 1-D of one length; got "
            f"{orders.shape}, {rdp.shape}."
        )
    mean = repetitions.mean
    out = np.full_like(orders, np.inf)
    above_one = orders > 1.0
    if repetitions.is_poisson:
        for i in np.flatnonzero(above_one):
            lam = orders[i]
            eps_hat = math.log1p(1.0 / (lam - 1.0))
            delta_hat, _ = _rdp.compute_delta(orders, rdp, eps_hat)
            out[i] = rdp[i] + mean * delta_hat + math.log(mean) / (lam - 1.0)
    else:
        eta, gamma = repetitions.shape, repetitions.gamma
        usable = orders >= 1.0  # lambda hat ranges over [1, inf)
        constant = (1.0 + eta) * np.min(
            (1.0 - 1.0 / orders[usable]) * rdp[usable]
            + math.log(1.0 / gamma) / orders[usable]
        )
        out[above_one] = (
            rdp[above_one] + math.log(mean) / (orders[above_one] - 1.0) + constant
        )
    # Monotonicity: D_lambda grows with lambda, so a larger order's bound holds too.
    by_order = np.argsort(orders)
    suffix_min = np.minimum.accumulate(out[by_order][::-1])[::-1]
    out[by_order] = suffix_min
    return out


def rdp_curve(
    event: dp_accounting.DpEvent,
    orders: Sequence[float] = DEFAULT_ORDERS,
    neighboring: dp_accounting.NeighboringRelation | None = None,
) -> np.ndarray:
    """One event's RDP at ``orders``, from dp-accounting's RDP accountant.

    Args:
      event: any event dp-accounting's RDP accountant takes, or a
        :class:`PointwiseMaxDpEvent` (anywhere in it).
      orders: the RDP orders.
      neighboring: the relation; by default the event's (``neighboring_relation_for``).

    Returns:
      The event's RDP at each order.
    """
    neighboring = neighboring or _accounting.neighboring_relation_for(event)
    acc = _accounting._RdpAccountant(list(orders), neighboring)
    acc.compose(event)
    # The accountant keeps the composed curve in _rdp (no public accessor in 0.6).
    return np.asarray(acc._rdp, np.float64)


def pointwise_max_rdp(
    events: Sequence[dp_accounting.DpEvent],
    orders: Sequence[float] = DEFAULT_ORDERS,
    neighboring: dp_accounting.NeighboringRelation | None = None,
) -> np.ndarray:
    """One run's RDP curve when the run's candidate is drawn independently of the data.

    The largest of the candidates' RDP at each order (module doc: the mixture's Renyi
    divergence is at most the largest of its components'), each curve from
    dp-accounting's RDP accountant.

    Args:
      events: every candidate's event (at least one).
      orders: the RDP orders.
      neighboring: the relation all candidates are accounted under; by default
        replace-one if any candidate samples without replacement, else add/remove-one.

    Returns:
      The pointwise maximum of the candidates' curves.

    Raises:
      ValueError: no events.
    """
    if not events:
        raise ValueError("pointwise_max_rdp needs at least one event.")
    neighboring = neighboring or _accounting.neighboring_relation_for(
        dp_accounting.ComposedDpEvent(list(events))
    )
    return np.max([rdp_curve(e, orders, neighboring) for e in events], axis=0)


def candidates_event(
    events: dp_accounting.DpEvent | Sequence[dp_accounting.DpEvent],
) -> dp_accounting.DpEvent:
    """The event of one run of a selection over candidates with these events.

    Args:
      events: one event that bounds every candidate, or one event per candidate.

    Returns:
      The event itself when all are equal; else a :class:`PointwiseMaxDpEvent` of the
      distinct ones, in first-seen order (its RDP is :func:`pointwise_max_rdp`).

    Raises:
      ValueError: an empty sequence.
    """
    if isinstance(events, dp_accounting.DpEvent):
        return events
    distinct: list[dp_accounting.DpEvent] = []
    seen: set[str] = set()
    for e in events:
        key = json.dumps(_ledger.event_to_dict(e), sort_keys=True)
        if key not in seen:
            seen.add(key)
            distinct.append(e)
    if not distinct:
        raise ValueError("a selection needs at least one candidate event.")
    if len(distinct) == 1:
        return distinct[0]
    return PointwiseMaxDpEvent(distinct)


def repeat_and_select_epsilon(
    base: dp_accounting.DpEvent,
    repetitions: Repetitions,
    delta: float,
    orders: Sequence[float] = DEFAULT_ORDERS,
) -> float:
    """(epsilon, ``delta``) of the selection by :func:`repeat_and_select_rdp`.

    From the base event's RDP curve, converted by dp-accounting's RDP-to-DP conversion.

    Args:
      base: the dp-accounting event of one run (e.g. ``plan.event()``).
      repetitions: the law of the number of runs K (:class:`Repetitions`).
      delta: target delta in (0, 1).
      orders: the RDP orders the curve is evaluated at (dp-accounting's defaults).

    Returns:
      The epsilon at ``delta`` of releasing the best of K runs.
    """
    _accounting.validate_delta(delta)
    curve = repeat_and_select_rdp(orders, rdp_curve(base, orders), repetitions)
    eps, _ = _rdp.compute_epsilon(list(orders), curve, delta)
    return float(eps)


@dataclasses.dataclass(frozen=True)
class SelectionResult(Generic[R]):
    """What :func:`select` releases, and what it must not.

    Attributes:
      release: the best run's release (None when K = 0, possible only under Poisson).
      score: its DP score (None when K = 0).
      candidate: the index of its candidate (None when K = 0).
      event: the dp-accounting event of the whole selection.
      audit: **not DP, never to be published**: K (``runs``) and every run's candidate
        and score, in order. Publishing K, or any run but the best, voids the
        selection's guarantee.
    """

    release: R | None
    score: float | None
    candidate: int | None
    event: dp_accounting.DpEvent
    audit: dict[str, Any]


def key_fingerprint(key: jax.Array) -> str:
    """A short SHA-256 of a key's bits.

    It names a selection in the ledger without storing the key.
    """
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return hashlib.sha256(np.asarray(key).tobytes()).hexdigest()[:16]


def _draw_plan(
    key: jax.Array, repetitions: Repetitions, num_candidates: int
) -> tuple[np.ndarray, jax.Array]:
    """K's candidate indices and the runs' parent key, all from ``key``."""
    k_plan, k_runs = jax.random.split(key)
    bits = np.asarray(jax.random.bits(k_plan, (4,), np.uint32))
    rng = np.random.default_rng(np.random.SeedSequence([int(b) for b in bits]))
    runs = repetitions.sample(rng)
    return rng.integers(0, num_candidates, size=runs), k_runs


def select(
    candidates: Sequence[Callable[[jax.Array], tuple[R, float]]],
    event: dp_accounting.DpEvent | Sequence[dp_accounting.DpEvent],
    repetitions: Repetitions,
    *,
    key: jax.Array,
    ledger: _ledger.Ledger | None = None,
    what: str = "private selection",
) -> SelectionResult[R]:
    """Runs randomly drawn candidates a random number of times; releases the best.

    Args:
      candidates: DP mechanisms; ``candidate(key)`` returns ``(release, score)``, the
        score a float computed with DP (higher is better; NaN counts as -inf). Each
        must satisfy ``event`` for its release and score together, and be
        deterministic given its key for a rerun to replay.
      event: the dp-accounting event of one candidate run (every candidate's), or
        one event per candidate (a heterogeneous grid: one run is then accounted by
        the pointwise max of their RDP curves, :func:`candidates_event`).
      repetitions: the public distribution of the number of runs K.
      key: the secret key: K, each run's candidate and each run's key derive from it.
      ledger: records the selection as one entry (checked against the budget and
        saved before the first run); a rerun with the same key and ``what`` finds it
        and records nothing more. None: the caller accounts ``result.event``.
      what: the ledger entry's description.

    Returns:
      A :class:`SelectionResult`; only ``release``, ``score`` and ``candidate`` are
      DP.

    Raises:
      BudgetExceededError: the selection's epsilon does not fit the ledger's budget;
        nothing ran.
      ValueError: no candidates, or not one event per candidate.
    """
    if not candidates:
        raise ValueError("select needs at least one candidate.")
    if not isinstance(event, dp_accounting.DpEvent) and len(event) != len(candidates):
        raise ValueError(
            f"select got {len(event)} events for {len(candidates)} candidates; give "
            "one event, or one per candidate."
        )
    selection_event = repetitions.event(event)
    if ledger is not None:
        params = {
            "mechanism": "repeat_and_select",
            **repetitions.describe(),
            "candidates": len(candidates),
            "key_fingerprint": key_fingerprint(key),
        }
        recorded = _ledger.event_to_dict(selection_event)
        params = json.loads(json.dumps(params))  # as reloaded
        replay = any(
            r.event == recorded and r.what == what and r.params == params
            for r in ledger.releases
        )
        if not replay:
            ledger.check(selection_event)  # the guard, before any run
            ledger.record(selection_event, what=what, params=params)
    chosen, k_runs = _draw_plan(key, repetitions, len(candidates))
    best: tuple[float, int, Any] | None = None  # (score, run, release)
    runs: list[dict[str, Any]] = []
    for j, c in enumerate(chosen):
        release, score = candidates[int(c)](jax.random.fold_in(k_runs, j))
        score = float(score)
        runs.append({"candidate": int(c), "score": score})
        ranked = -math.inf if math.isnan(score) else score
        if best is None or ranked > best[0]:
            best = (ranked, j, release)
    audit = {"runs": len(chosen), "history": runs}
    if best is None:
        return SelectionResult(None, None, None, selection_event, audit)
    _, j, release = best
    return SelectionResult(
        release, runs[j]["score"], runs[j]["candidate"], selection_event, audit
    )
