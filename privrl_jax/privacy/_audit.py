"""Empirical privacy auditing: epsilon lower bounds from canaries.

Host-side NumPy / SciPy.

An audit is the reverse of accounting: the accountant proves an upper bound on epsilon,
an audit measures how well an attacker tells canaries that were in the input from
canaries that were not, and turns that into a lower bound that holds with a stated
confidence. A lower bound above the accounted epsilon means the implementation (or the
analysis) is wrong: that is what this module is for (docs/dp_pitfalls.md, "Empirical
audit on a CPU").

Three estimators:

- :func:`one_run_epsilon_lower_bound`: Steinke, Nasr & Jagielski (NeurIPS 2023), one
  training run with m canaries each included independently with probability 1/2.
- :func:`clopper_pearson_epsilon_lower_bound`: the classical many-run audit (Jagielski,
  Ullman & Oprea 2020; Nasr et al. 2021/2023) from one (TPR, FPR) pair with
  Clopper-Pearson intervals.
- :func:`gaussian_dp_epsilon_estimate`: the Gaussian-DP fit of Nasr et al. (USENIX
  Security 2023), through the exact mu-GDP to (epsilon, delta) conversion of Dong, Roth
  & Su (2022).

And two kinds of canaries: white-box gradient canaries for DP-SGD
(:func:`dirac_canaries`, :func:`random_direction_canaries`) and black-box
out-of-distribution rows for synthetic data (:func:`out_of_distribution_canaries`,
:func:`density_scores`, after Annamalai, Ganev & De Cristofaro, USENIX Security 2024).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import scipy.optimize
import scipy.special
import scipy.stats

KeyOrSeed = int | np.random.Generator | jax.Array

# Bracket of the epsilon searches. exp(60) overflows nothing in float64 and no audit
# with fewer than ~1e26 guesses can certify more (the all-correct bound grows like
# log(r)).
_EPS_MAX = 60.0
_XTOL = 1e-9


# ------------------------------------------------------------------------------ helpers


def _check_confidence(confidence: float) -> float:
    if not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}.")
    return float(confidence)


def _check_delta(delta: float, *, allow_zero: bool) -> float:
    low_ok = delta >= 0 if allow_zero else delta > 0
    if not isinstance(delta, numbers.Real) or not (low_ok and delta < 1):
        bound = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"delta must be in {bound}; got {delta!r}.")
    return float(delta)


def _rng(key_or_seed: KeyOrSeed) -> np.random.Generator:
    """A NumPy generator from an int seed, a generator, or a JAX key.

    The key may be typed or raw uint32.
    """
    if isinstance(key_or_seed, np.random.Generator):
        return key_or_seed
    if isinstance(key_or_seed, numbers.Integral) and not isinstance(key_or_seed, bool):
        return np.random.default_rng(int(key_or_seed))
    if isinstance(key_or_seed, jax.Array):
        raw = key_or_seed
        if jax.dtypes.issubdtype(raw.dtype, jax.dtypes.prng_key):
            raw = jax.random.key_data(raw)
        # The key's bits seed NumPy: the same key always gives the same canaries.
        return np.random.default_rng(np.asarray(raw, dtype=np.uint32).ravel().tolist())
    raise TypeError(
        f"expected an int seed, a numpy Generator or a JAX key; got {key_or_seed!r}."
    )


def _flatten(tree: Any) -> np.ndarray:
    leaves = jax.tree_util.tree_leaves(tree)
    if not leaves:
        raise ValueError("the update has no leaves.")
    return np.concatenate(
        [np.asarray(leaf, dtype=np.float64).ravel() for leaf in leaves]
    )


# ------------------------------------------------------------------------ one-run audit


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The outcome of a one-run audit, JSON-ready through :meth:`to_dict`.

    Attributes:
      epsilon_lower_bound: epsilon such that, with probability >= ``confidence`` over
        the canaries' inclusion and the mechanism's noise, the mechanism is not
        (epsilon', delta)-DP for any epsilon' < this value. 0.0 when the audit proves
        nothing.
      confidence: the confidence level, e.g. 0.95.
      delta: the delta of the (epsilon, delta) hypothesis being tested.
      method: ``"one_run"`` (with the delta term) or ``"one_run_pure"`` (delta = 0).
      m: number of canaries.
      k_pos: number of "in" guesses (highest scores).
      k_neg: number of "out" guesses (lowest scores).
      guesses: k_pos + k_neg.
      correct: number of correct guesses.
      epsilon_ceiling: the largest epsilon this audit could have shown (every guess
        right) at its m, guesses, delta and confidence: a mechanism accounted above it
        is not auditable at this size (no fault in it can be flagged).
    """

    epsilon_lower_bound: float
    confidence: float
    delta: float
    method: str
    m: int
    k_pos: int
    k_neg: int
    guesses: int
    correct: int
    epsilon_ceiling: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works."""
        return dataclasses.asdict(self)

    def auditable(self, epsilon_accounted: float) -> bool:
        """Whether this audit could flag a mechanism accounted at ``epsilon_accounted``.

        It can show at most :attr:`epsilon_ceiling`.
        """
        return bool(epsilon_accounted < self.epsilon_ceiling)


def one_run_epsilon_ceiling(
    m: int, guesses: int, *, delta: float, confidence: float = 0.95
) -> float:
    """The most a one-run audit with ``m`` canaries and ``guesses`` guesses can show.

    Every guess right: :func:`one_run_epsilon_from_counts` at ``correct = guesses``.
    With 10,000 canaries and 1% guessed each way (200 guesses) it is 3.91 at delta =
    1e-5 and 1.73 at 1e-4 (95%): an audit of that size cannot flag anything accounted
    above it, whatever ran.

    Args:
      m: number of canaries.
      guesses: r, the guesses the audit makes (0 <= r <= m).
      delta: the delta of the null hypothesis, in [0, 1).
      confidence: the confidence of the lower bound, in (0, 1).

    Returns:
      The epsilon lower bound the audit reports when all its guesses are right.
    """
    return one_run_epsilon_from_counts(
        m, guesses, guesses, delta=delta, confidence=confidence
    )


def one_run_p_value(
    m: int, guesses: int, correct: int, epsilon: float, delta: float
) -> float:
    """P[>= ``correct`` of ``guesses`` guesses are right] under (epsilon, delta)-DP.

    Steinke, Nasr & Jagielski 2023 show that, for m canaries each included independently
    with probability 1/2, the number W of correct guesses of an auditor that makes r
    guesses about an epsilon-DP mechanism is stochastically dominated by Binomial(r, p)
    with p = e^eps / (1 + e^eps), the accuracy of randomized response. With delta > 0
    the tail gains an
    additive term: with beta = P[Bin(r, p) >= v] and
    alpha = max_{1 <= i <= v} P[v - i <= Bin(r, p) < v] / i, one has
    P[W >= v] <= beta + 2 m delta alpha (their Theorem 5.2 and its algorithm).

    Args:
      m: number of canaries (the delta term scales with it).
      guesses: r, guesses made (abstentions excluded), 0 <= r <= m.
      correct: v, correct guesses, 0 <= v <= r.
      epsilon: epsilon >= 0 of the null hypothesis.
      delta: delta in [0, 1) of the null hypothesis.

    Returns:
      The p-value, in [0, 1].
    """
    if not 0 <= correct <= guesses <= m:
        raise ValueError(
            f"need 0 <= correct <= guesses <= m; got {correct}, {guesses}, {m}."
        )
    if correct == 0:
        return 1.0
    p = float(scipy.special.expit(epsilon))
    beta = float(scipy.stats.binom.sf(correct - 1, guesses, p))
    if delta == 0:
        return beta
    # P[v - i <= Bin < v] for i = 1..v is a running sum of the pmf from v - 1 downwards.
    window = np.cumsum(
        scipy.stats.binom.pmf(np.arange(correct - 1, -1, -1), guesses, p)
    )
    alpha = float(np.max(window / np.arange(1, correct + 1)))
    return min(1.0, beta + 2.0 * m * delta * alpha)


def one_run_epsilon_from_counts(
    m: int, guesses: int, correct: int, *, delta: float, confidence: float = 0.95
) -> float:
    """Largest epsilon that ``correct`` of ``guesses`` reject at level 1 - confidence.

    Solves ``one_run_p_value(m, guesses, correct, eps, delta) = 1 - confidence`` for eps
    (the p-value increases with eps); 0.0 when even eps = 0 is not rejected.

    With delta = 0 and all r guesses correct the p-value is p^r, so the bound has the
    closed form log(a / (1 - a)) with a = (1 - confidence)^(1/r): the most any audit
    with r guesses can show.
    """
    confidence = _check_confidence(confidence)
    delta = _check_delta(delta, allow_zero=True)
    significance = 1.0 - confidence

    def gap(eps: float) -> float:  # > 0 while eps is rejected
        return significance - one_run_p_value(m, guesses, correct, eps, delta)

    if gap(0.0) <= 0:
        return 0.0
    if gap(_EPS_MAX) > 0:
        return _EPS_MAX
    return float(scipy.optimize.brentq(gap, 0.0, _EPS_MAX, xtol=_XTOL))


def one_run_epsilon_lower_bound(
    scores: np.typing.ArrayLike,
    inclusion: np.typing.ArrayLike,
    *,
    delta: float,
    k_positive: int,
    k_negative: int = 0,
    confidence: float = 0.95,
) -> AuditResult:
    """One-run audit of Steinke, Nasr & Jagielski.

    The paper: "Privacy Auditing with One (1) Training Run".

    The auditor guesses "in" for the ``k_positive`` canaries with the highest scores and
    "out" for the ``k_negative`` lowest, abstains on the rest, and counts correct
    guesses against the secret ``inclusion``. Ties are broken by canary index, which is
    independent of the inclusion draw.

    ``k_positive``/``k_negative`` must be fixed before looking at the scores: choosing
    them to maximise the bound on the same data invalidates the confidence (split the
    canaries, or divide 1 - confidence by the number of choices tried).

    Args:
      scores: [m] attack scores, higher meaning "more likely in".
      inclusion: [m] bool, whether each canary was in the input (drawn by
        :func:`draw_inclusion`).
      delta: delta of the (epsilon, delta) claim under test; 0 gives the pure-DP bound.
      k_positive: number of "in" guesses.
      k_negative: number of "out" guesses.
      confidence: probability that the returned bound is valid.

    Returns:
      An :class:`AuditResult`.
    """
    scores = np.asarray(scores, dtype=np.float64)
    inclusion = np.asarray(inclusion)
    if scores.ndim != 1 or inclusion.shape != scores.shape:
        raise ValueError(
            f"scores and inclusion must be 1-D of equal length; got {scores.shape}, "
            f"{inclusion.shape}."
        )
    if inclusion.dtype != np.bool_:
        raise ValueError(
            f"inclusion must be a bool array; got dtype {inclusion.dtype}."
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite.")
    m = scores.size
    k_positive, k_negative = int(k_positive), int(k_negative)
    if k_positive < 0 or k_negative < 0 or k_positive + k_negative > m or m == 0:
        raise ValueError(
            f"need k_positive, k_negative >= 0 and k_positive + k_negative <= m = {m}; "
            f"got {k_positive}, {k_negative}."
        )
    # A stable sort on the scores ranks tied canaries by index.
    order = np.argsort(scores, kind="stable")
    correct = int(inclusion[order[m - k_positive :]].sum()) if k_positive else 0
    correct += int((~inclusion[order[:k_negative]]).sum())
    guesses = k_positive + k_negative
    eps = one_run_epsilon_from_counts(
        m, guesses, correct, delta=delta, confidence=confidence
    )
    ceiling = (
        eps
        if correct == guesses
        else one_run_epsilon_ceiling(m, guesses, delta=delta, confidence=confidence)
    )
    return AuditResult(
        epsilon_lower_bound=eps,
        confidence=float(confidence),
        delta=float(delta),
        method="one_run" if delta > 0 else "one_run_pure",
        m=m,
        k_pos=k_positive,
        k_neg=k_negative,
        guesses=guesses,
        correct=correct,
        epsilon_ceiling=ceiling,
    )


# ----------------------------------------------------------------------- many-run audit


def clopper_pearson_interval(
    successes: int, trials: int, confidence: float
) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for a binomial proportion.

    Each side fails with probability at most (1 - confidence) / 2.
    """
    if not 0 <= successes <= trials or trials < 1:
        raise ValueError(
            f"need 0 <= successes <= trials, trials >= 1; got {successes}, {trials}."
        )
    tail = (1.0 - _check_confidence(confidence)) / 2.0
    lo = (
        float(scipy.stats.beta.ppf(tail, successes, trials - successes + 1))
        if successes
        else 0.0
    )
    hi = (
        float(scipy.stats.beta.ppf(1.0 - tail, successes + 1, trials - successes))
        if successes < trials
        else 1.0
    )
    return lo, hi


def clopper_pearson_epsilon_lower_bound(
    tp: int, fp: int, n_pos: int, n_neg: int, *, delta: float, confidence: float = 0.95
) -> float:
    """Many-run epsilon lower bound from one membership test.

    After Jagielski et al. 2020 and Nasr et al.

    (epsilon, delta)-DP forces TPR <= e^eps FPR + delta and, applied to the complement
    event, 1 - FPR <= e^eps (1 - TPR) + delta. With a Clopper-Pearson lower bound on TPR
    and an upper bound on FPR (each failing with probability (1 - confidence) / 2, so
    both hold with probability >= confidence) the bound is the larger of log((TPR_lo -
    delta) / FPR_hi) and log((1 - FPR_hi - delta) / (1 - TPR_lo)); both directions use
    the same two bounds, so taking the maximum needs no further correction.

    Args:
      tp: runs with the canary in, flagged "in".
      fp: runs with the canary out, flagged "in".
      n_pos: runs with the canary in.
      n_neg: runs with the canary out.
      delta: delta of the claim under test.
      confidence: probability that the bound is valid.

    Returns:
      The lower bound, >= 0.
    """
    delta = _check_delta(delta, allow_zero=True)
    tpr_lo, _ = clopper_pearson_interval(tp, n_pos, confidence)
    _, fpr_hi = clopper_pearson_interval(fp, n_neg, confidence)
    best = 0.0
    if tpr_lo - delta > 0:  # fpr_hi > 0 always: the upper bound of 0 / n is positive
        best = max(best, math.log((tpr_lo - delta) / fpr_hi))
    if 1.0 - fpr_hi - delta > 0 and tpr_lo < 1.0:
        best = max(best, math.log((1.0 - fpr_hi - delta) / (1.0 - tpr_lo)))
    return best


# -------------------------------------------------------------------------- Gaussian DP


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

    Dong, Roth & Su, "Gaussian Differential Privacy" (JRSS-B 2022), Corollary 2.13: the
    exact (epsilon, delta) curve of the Gaussian mechanism with sensitivity / std = mu.
    Evaluated in the log domain so large epsilon does not overflow e^eps.
    """
    if not mu > 0:
        return 0.0
    a = scipy.stats.norm.logcdf(-epsilon / mu + mu / 2)
    b = epsilon + scipy.stats.norm.logcdf(-epsilon / mu - mu / 2)
    if b >= a:
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon at which mu-GDP gives ``delta``.

    The inverse of :func:`gdp_delta` in epsilon.
    """
    delta = _check_delta(delta, allow_zero=False)
    if not mu > 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0

    def gap(
        eps: float,
    ) -> float:  # delta(eps) decreases in eps; compared in logs for tiny deltas
        d = gdp_delta(eps, mu)
        return (math.log(d) if d > 0 else -math.inf) - math.log(delta)

    hi = 1.0
    while gap(hi) > 0:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(scipy.optimize.brentq(gap, 0.0, hi, xtol=_XTOL))


@dataclasses.dataclass(frozen=True)
class GaussianDpEstimate:
    """A Gaussian-DP fit of an attack and the (epsilon, delta) it implies.

    Only ``mu_lower_bound`` is a bound (on the mu of any GDP curve the mechanism
    meets). Both epsilons are *estimates*: they read epsilon off the Gaussian curve,
    which a non-Gaussian mechanism does not follow (randomized response at pure
    epsilon 1 gives an ``epsilon_estimate_low`` of 5.52, Laplace at epsilon 1 gives
    4.42). For a bound on any mechanism use the one-run or Clopper-Pearson audits.

    Attributes:
      mu: point estimate of mu, (mean_in - mean_out) / pooled std (clipped at 0).
      mu_lower_bound: lower confidence bound on mu from the best threshold's
        Clopper-Pearson (TPR, FPR) bounds, mu >= Phi^-1(TPR_lo) - Phi^-1(FPR_hi).
      epsilon_estimate: epsilon of ``mu``-GDP at ``delta`` (an estimate).
      epsilon_estimate_low: epsilon of ``mu_lower_bound``-GDP at ``delta``: a lower
        confidence bound on epsilon *only* for a mechanism whose privacy is exactly
        Gaussian-shaped (DP-SGD's nearly is), an estimate otherwise.
      delta: the delta used.
      confidence: confidence of the lower bounds.
      threshold: the threshold achieving ``mu_lower_bound`` (NaN if none is usable).
    """

    mu: float
    mu_lower_bound: float
    epsilon_estimate: float
    epsilon_estimate_low: float
    delta: float
    confidence: float
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works (NaN aside)."""
        return dataclasses.asdict(self)


def gaussian_dp_epsilon_estimate(
    scores_in: np.typing.ArrayLike,
    scores_out: np.typing.ArrayLike,
    *,
    delta: float,
    confidence: float = 0.95,
    thresholds: Sequence[float] | np.ndarray | None = None,
) -> GaussianDpEstimate:
    """Gaussian-DP estimate of epsilon (Nasr et al. 2023).

    The paper: "Tight Auditing of DP Machine Learning".

    If a mechanism is mu-GDP, every threshold test on its output satisfies Phi^-1(TPR) -
    Phi^-1(FPR) <= mu (Dong, Roth & Su 2022). The lower bound takes, over the
    thresholds, the largest Phi^-1(TPR_lo) - Phi^-1(FPR_hi) with one-sided
    Clopper-Pearson bounds at level (1 - confidence) / (2 n) each (Bonferroni over the n
    thresholds and the two rates), and converts it with the exact GDP curve. The epsilon
    is an estimate, a lower bound only *if* the mechanism's privacy is Gaussian-shaped
    (DP-SGD's is close to it, Nasr et al.); for any mechanism prefer
    :func:`one_run_epsilon_lower_bound` or :func:`clopper_pearson_epsilon_lower_bound`.

    Args:
      scores_in: scores of runs/canaries that were in (expected higher).
      scores_out: scores of those that were out.
      delta: delta in (0, 1) of the conversion.
      confidence: confidence of ``mu_lower_bound`` and ``epsilon_lower_bound``.
      thresholds: thresholds to try (test: score >= t means "in"); default all distinct
        scores. Fix them before seeing the scores to keep the Bonferroni count small.

    Returns:
      A :class:`GaussianDpEstimate`.
    """
    delta = _check_delta(delta, allow_zero=False)
    confidence = _check_confidence(confidence)
    a = np.asarray(scores_in, dtype=np.float64).ravel()
    b = np.asarray(scores_out, dtype=np.float64).ravel()
    if a.size < 2 or b.size < 2:
        raise ValueError("need at least two scores on each side.")
    pooled = math.sqrt(0.5 * (a.var(ddof=1) + b.var(ddof=1)))
    mu_hat = max(0.0, (a.mean() - b.mean()) / pooled) if pooled > 0 else math.inf

    ts = (
        np.union1d(a, b)
        if thresholds is None
        else np.unique(np.asarray(thresholds, float))
    )
    a_sorted, b_sorted = np.sort(a), np.sort(b)
    tp = a.size - np.searchsorted(a_sorted, ts, side="left")  # in-scores >= t
    fp = b.size - np.searchsorted(b_sorted, ts, side="left")
    tail = (1.0 - confidence) / (2 * ts.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr_lo = np.where(tp > 0, scipy.stats.beta.ppf(tail, tp, a.size - tp + 1), 0.0)
        fpr_hi = np.where(
            fp < b.size, scipy.stats.beta.ppf(1 - tail, fp + 1, b.size - fp), 1.0
        )
        mus = scipy.stats.norm.ppf(tpr_lo) - scipy.stats.norm.ppf(fpr_hi)
    mus = np.where(np.isfinite(mus), mus, -np.inf)
    best = int(np.argmax(mus))
    mu_lo = max(0.0, float(mus[best]))
    return GaussianDpEstimate(
        mu=float(mu_hat),
        mu_lower_bound=mu_lo,
        epsilon_estimate=(
            gdp_epsilon(mu_hat, delta) if math.isfinite(mu_hat) else math.inf
        ),
        epsilon_estimate_low=gdp_epsilon(mu_lo, delta),
        delta=delta,
        confidence=confidence,
        threshold=float(ts[best]) if mu_lo > 0 else math.nan,
    )


# ----------------------------------------------------------------------------- canaries


def draw_inclusion(key_or_seed: KeyOrSeed, m: int) -> np.ndarray:
    """[m] bool: each canary is in with probability 1/2, independently.

    The draw is the auditor's secret: the mechanism sees only the included canaries, and
    the one-run theorem needs exactly this fair, independent coin per canary.
    """
    if m < 1:
        raise ValueError(f"m must be >= 1; got {m}.")
    return _rng(key_or_seed).random(m) < 0.5


@dataclasses.dataclass(frozen=True)
class GradientCanaries:
    """White-box DP-SGD canaries: m unit directions in a flat d-dim parameter space.

    A canary unit's gradient is a huge multiple of its direction, so clipping makes it
    exactly C * direction; projecting the noised sum on the direction then gives C *
    [in] + N(0, (sigma C)^2), plus cross-talk from the other canaries when the
    directions are not orthogonal. That is the Gaussian mechanism per canary, the worst
    case DP-SGD is analysed for.

    Attributes:
      d: parameter dimension (of the flattened update).
      directions: [m, d] unit rows.
      coordinates: [m] the Dirac coordinates, or None for random directions.
    """

    d: int
    directions: np.ndarray
    coordinates: np.ndarray | None = None

    @property
    def m(self) -> int:
        """Number of canaries."""
        return int(self.directions.shape[0])

    def gradients(self, norm: float = 1e6) -> np.ndarray:
        """[m, d] canary gradients of L2 norm ``norm``.

        By default far above any clip norm.
        """
        return norm * self.directions

    def scores(self, update: Any) -> np.ndarray:
        """[m] projections of ``update`` on each canary.

        ``update`` is an array or a pytree, flattened.
        """
        flat = _flatten(update)
        if flat.size != self.d:
            raise ValueError(
                f"update has {flat.size} parameters; the canaries expect {self.d}."
            )
        if self.coordinates is not None:  # exact and cheap: no [m, d] product
            return flat[self.coordinates]
        return self.directions @ flat


def dirac_canaries(d: int, m: int, key_or_seed: KeyOrSeed = 0) -> GradientCanaries:
    """Puts m canaries on m distinct coordinates of a d-dim parameter vector (m <= d).

    Dirac canaries are orthogonal, so their projections do not interfere (Nasr et al.
    2023 use them for white-box audits).

    Args:
      d: the number of parameters.
      m: the number of canaries (1 <= m <= d).
      key_or_seed: an int seed, a NumPy generator or a JAX key for the coordinates.

    Returns:
      :class:`GradientCanaries` whose directions are m distinct unit coordinate
      vectors (their coordinates sorted, in ``coordinates``).

    Raises:
      ValueError: unless 1 <= m <= d.
    """
    if not 1 <= m <= d:
        raise ValueError(f"need 1 <= m <= d; got m={m}, d={d}.")
    coords = np.sort(_rng(key_or_seed).choice(d, size=m, replace=False))
    directions = np.zeros((m, d))
    directions[np.arange(m), coords] = 1.0
    return GradientCanaries(d=d, directions=directions, coordinates=coords)


def random_direction_canaries(
    d: int, m: int, key_or_seed: KeyOrSeed = 0
) -> GradientCanaries:
    """Draws m uniformly random unit directions in R^d (nearly orthogonal if d >> m).

    Args:
      d: the number of parameters (>= 1).
      m: the number of canaries (>= 1).
      key_or_seed: an int seed, a NumPy generator or a JAX key for the directions.

    Returns:
      :class:`GradientCanaries` with m unit-norm directions, uniform on the sphere.

    Raises:
      ValueError: for m or d below 1.
    """
    if m < 1 or d < 1:
        raise ValueError(f"need m, d >= 1; got m={m}, d={d}.")
    g = _rng(key_or_seed).standard_normal((m, d))
    return GradientCanaries(
        d=d, directions=g / np.linalg.norm(g, axis=1, keepdims=True)
    )


def out_of_distribution_canaries(
    data: np.typing.ArrayLike,
    m: int,
    key_or_seed: KeyOrSeed = 0,
    *,
    distance: float = 2.0,
) -> np.ndarray:
    """[m, dim] rows outside the data's bounding box.

    They lie in random directions from its centre.

    Black-box canaries for synthetic data (Annamalai, Ganev & De Cristofaro, "What do
    you want from theory alone?", USENIX Security 2024): a row unlike any real row is
    one a private generator should not reproduce, and one a leaky generator visibly
    does. Each canary sits at ``distance`` half-diagonals from the box centre; the box
    lies within one half-diagonal of its centre, so any ``distance > 1`` puts every
    canary outside it.

    Args:
      data: the real rows, [rows, dim].
      m: the number of canaries.
      key_or_seed: an int seed, a NumPy generator or a JAX key for the directions.
      distance: how far from the box centre, in half-diagonals (> 1).

    Returns:
      The canaries, [m, dim] float64 rows, each outside the data's bounding box.

    Raises:
      ValueError: for data that is not [rows, dim] or a distance <= 1.
    """
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"data must be [rows, dim]; got shape {x.shape}.")
    if not distance > 1:
        raise ValueError(f"distance must be > 1 half-diagonal; got {distance!r}.")
    lo, hi = x.min(axis=0), x.max(axis=0)
    centre, radius = (lo + hi) / 2, max(float(np.linalg.norm(hi - lo)) / 2, 1e-12)
    u = _rng(key_or_seed).standard_normal((m, x.shape[1]))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return centre + distance * radius * u


def density_scores(
    released: np.typing.ArrayLike,
    canaries: np.typing.ArrayLike,
    *,
    k: int = 1,
    bandwidth: float | None = None,
    columns: Sequence[int] | None = None,
    chunk: int = 1024,
) -> np.ndarray:
    """[m] how densely the released rows sit near each canary.

    Higher: more likely "in".

    With ``bandwidth=None``: minus the distance to the k-th nearest released row.
    Otherwise: the log of a Gaussian kernel density at that fixed bandwidth
    (unnormalised; only the ranking across canaries matters to the audits). The
    bandwidth must be fixed in advance, not fitted on the canaries' outcome.
    ``columns`` (fixed in advance too) measures the distance on those columns only:
    the projection in which the canaries differ from the data, as for
    :func:`empty_cell_canaries`.
    """
    r = np.asarray(released, dtype=np.float64)
    c = np.asarray(canaries, dtype=np.float64)
    if r.ndim != 2 or c.ndim != 2 or r.shape[1] != c.shape[1]:
        raise ValueError(
            f"released and canaries must be [n, dim], [m, dim]; got {r.shape}, "
            f"{c.shape}."
        )
    if columns is not None:
        cols = np.asarray(columns, dtype=np.int64)
        if (
            cols.ndim != 1
            or cols.size < 1
            or not np.all((cols >= 0) & (cols < c.shape[1]))
        ):
            raise ValueError(
                f"columns must be indices in [0, {c.shape[1]}); got {list(columns)}."
            )
        r, c = r[:, cols], c[:, cols]
    if bandwidth is None and not 1 <= k <= r.shape[0]:
        raise ValueError(f"k must be in [1, {r.shape[0]}]; got {k}.")
    if bandwidth is not None and not bandwidth > 0:
        raise ValueError(f"bandwidth must be > 0; got {bandwidth!r}.")
    out = np.empty(c.shape[0])
    r_sq = np.sum(r**2, axis=1)
    for start in range(
        0, c.shape[0], chunk
    ):  # chunks bound the [chunk, n] distance matrix
        cc = c[start : start + chunk]
        sq = np.maximum(
            np.sum(cc**2, axis=1)[:, None] + r_sq[None, :] - 2 * cc @ r.T, 0.0
        )
        if bandwidth is None:
            out[start : start + chunk] = -np.sqrt(
                np.partition(sq, k - 1, axis=1)[:, k - 1]
            )
        else:
            out[start : start + chunk] = scipy.special.logsumexp(
                -sq / (2 * bandwidth**2), axis=1
            )
    return out
