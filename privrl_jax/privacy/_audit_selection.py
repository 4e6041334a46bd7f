"""A many-run audit of a private selection: the exponential mechanism, as AIM runs it.

A selection releases one index, not a vector a gradient canary could move, so the
one-run audits of :mod:`privrl_jax.privacy._audit_fit` do not apply. The classical audit
does (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021): run the
mechanism many times on two neighbouring inputs, fix an output event in advance, and
bound e^eps >= (P[event | D] - delta) / P[event | D'] with Clopper-Pearson intervals
(:func:`~privrl_jax.privacy._audit.clopper_pearson_epsilon_lower_bound`).

For the exponential mechanism the inputs are score vectors, and its analysis only
assumes that one unit moves each score by at most the sensitivity Delta. The pair of
:func:`worst_case_score_pair` moves every score by exactly Delta, candidate 0 up and the
other K - 1 down. With a = eps / 2 the event "candidate 0" has the exact log-ratio

    log( e^a (1 + (K - 1) e^a) / (e^a + K - 1) ),

which tends to eps as K grows (about eps (1 - 1 / K) for small eps), so a mechanism that
leaks more than its epsilon (a missing factor 2, a sensitivity too small) shows a bound
above its epsilon, and a correct one a bound just under it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from privrl_jax.privacy._audit import (
    KeyOrSeed,
    _check_confidence,
    _check_delta,
    clopper_pearson_epsilon_lower_bound,
)

# The number of candidates of the pair audit_ledger uses: the pair's own epsilon is then
# >= 0.99 of the mechanism's for eps <= 1 (see the module docstring).
LEDGER_CANDIDATES = 100


class Selection(Protocol):
    """A private selection: ``select(key, scores)`` draws one index.

    ``logits(scores)`` gives the log-probabilities up to a constant (the law the audit
    compares with); ``epsilon`` is its pure-DP guarantee.
    """

    @property
    def epsilon(self) -> float: ...

    def select(self, key: jax.Array, scores: jax.Array) -> jax.Array: ...

    def logits(self, scores: jax.typing.ArrayLike) -> jax.Array: ...


def worst_case_score_pair(
    num_candidates: int, sensitivity: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two neighbouring score vectors that make the exponential mechanism nearly tight.

    They are ``(Delta, 0, ..., 0)`` and ``(0, Delta, ..., Delta)``.

    Every score moves by exactly ``sensitivity``, the most one unit may move it; the
    event "candidate 0" is the one to audit (module docstring).
    """
    k = int(num_candidates)
    if k < 2:
        raise ValueError(f"num_candidates must be >= 2; got {num_candidates!r}.")
    if not sensitivity > 0:
        raise ValueError(f"sensitivity must be > 0; got {sensitivity!r}.")
    scores = np.zeros(k)
    scores[0] = sensitivity
    neighbour = np.full(k, float(sensitivity))
    neighbour[0] = 0.0
    return scores, neighbour


def selection_epsilon(
    mechanism: Selection, scores: np.ndarray, neighbour_scores: np.ndarray
) -> float:
    """The exact pure-DP epsilon of ``mechanism`` on this pair.

    The largest |log P[i | scores] - log P[i | neighbour_scores]| over the candidates,
    from its logits' softmax in float64. An audit's lower bound on the same pair cannot
    exceed it (except with the audit's failure probability).

    Args:
      mechanism: the selection mechanism (e.g. an ``ExponentialMechanism``): its
        ``logits(scores)`` give the law of its output.
      scores: the candidates' scores on one data set.
      neighbour_scores: the same candidates' scores on a neighbouring data set.

    Returns:
      The largest absolute log-ratio of the two output laws (>= 0).
    """
    lp = scipy.special.log_softmax(np.asarray(mechanism.logits(scores), np.float64))
    lq = scipy.special.log_softmax(
        np.asarray(mechanism.logits(neighbour_scores), np.float64)
    )
    return float(np.max(np.abs(lp - lq)))


@dataclasses.dataclass(frozen=True)
class SelectionAudit:
    """The outcome of :func:`audit_selection`, JSON-ready through :meth:`to_dict`.

    Attributes:
      epsilon_accounted: the mechanism's own epsilon (one selection, pure DP).
      epsilon_of_pair: the exact epsilon of the two score vectors audited
        (:func:`selection_epsilon`), what a perfect audit of this pair would show.
      epsilon_demonstrated: the Clopper-Pearson lower bound: with probability >=
        ``confidence`` the mechanism is not (eps', delta)-DP for any eps' below it.
      event: the audited output (the candidate index).
      hits: how many of the ``trials`` draws on the first vector gave ``event``.
      neighbour_hits: the same on the neighbouring vector.
      trials: draws on each vector.
      delta: the delta of the hypothesis tested.
      confidence: the confidence level.
    """

    epsilon_accounted: float
    epsilon_of_pair: float
    epsilon_demonstrated: float
    event: int
    hits: int
    neighbour_hits: int
    trials: int
    delta: float
    confidence: float

    @property
    def violation(self) -> bool:
        """True when more epsilon was demonstrated than accounted: a privacy bug."""
        return self.epsilon_demonstrated > self.epsilon_accounted * (1 + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works."""
        return {**dataclasses.asdict(self), "violation": self.violation}


def _count_event(
    mechanism: Selection,
    scores: np.ndarray,
    key: jax.Array,
    trials: int,
    event: int,
    chunk: int,
) -> int:
    scores32 = jnp.asarray(scores, jnp.float32)
    draw = jax.jit(
        lambda k, n: jnp.sum(
            jax.vmap(lambda kk: mechanism.select(kk, scores32))(jax.random.split(k, n))
            == event
        ),
        static_argnums=1,
    )
    total, done, i = 0, 0, 0
    while done < trials:
        n = min(chunk, trials - done)
        total += int(draw(jax.random.fold_in(key, i), n))
        done += n
        i += 1
    return total


def audit_selection(
    mechanism: Selection,
    scores: np.ndarray,
    neighbour_scores: np.ndarray,
    *,
    event: int = 0,
    trials: int = 1_000_000,
    seed: KeyOrSeed = 0,
    delta: float = 0.0,
    confidence: float = 0.95,
    chunk: int = 65_536,
) -> SelectionAudit:
    """Many-run audit of one private selection on a pair of neighbouring score vectors.

    Draws ``trials`` selections on each vector (independent keys from ``seed``; the
    audit is public, no release), counts the fixed ``event`` and bounds epsilon with
    :func:`clopper_pearson_epsilon_lower_bound`: ``scores`` is the side where the event
    should be likelier, and the complement covers the other direction. The event must be
    fixed before the draws, as here: choosing it on the same draws would bias the bound
    upwards.

    Args:
      mechanism: e.g. :class:`~privrl_jax.privacy.ExponentialMechanism`.
      scores: the score vector on one dataset.
      neighbour_scores: the score vector on a neighbouring dataset (same length).
      event: the candidate whose probability is compared.
      trials: selections drawn on each vector.
      seed: an int, NumPy generator or JAX key.
      delta: the delta of the (eps, delta) hypothesis (0: pure DP).
      confidence: probability that the bound is valid.
      chunk: selections per compiled batch (memory: chunk x K floats).

    Returns:
      The :class:`SelectionAudit`.
    """
    scores = np.asarray(scores, np.float64)
    neighbour_scores = np.asarray(neighbour_scores, np.float64)
    if scores.ndim != 1 or scores.shape != neighbour_scores.shape:
        raise ValueError(
            "scores and neighbour_scores must be 1-d of the same length; got shapes "
            f"{scores.shape} and {neighbour_scores.shape}."
        )
    if not 0 <= int(event) < scores.size:
        raise ValueError(f"event must index a candidate in [0, {scores.size}).")
    if int(trials) < 1 or int(chunk) < 1:
        raise ValueError("trials and chunk must be >= 1.")
    delta = _check_delta(delta, allow_zero=True)
    confidence = _check_confidence(confidence)
    if isinstance(seed, jax.Array):
        key = seed
    else:
        rng = (
            seed
            if isinstance(seed, np.random.Generator)
            else np.random.default_rng(seed)
        )
        key = jax.random.key(int(rng.integers(2**31)))
    k_d, k_n = jax.random.split(key)
    hits = _count_event(mechanism, scores, k_d, int(trials), int(event), int(chunk))
    n_hits = _count_event(
        mechanism, neighbour_scores, k_n, int(trials), int(event), int(chunk)
    )
    # One orientation only (scores is the "in" side): the call's two directions, the
    # event and its complement, share its two intervals; a second orientation would
    # need two more and double the failure probability.
    bound = clopper_pearson_epsilon_lower_bound(
        hits, n_hits, int(trials), int(trials), delta=delta, confidence=confidence
    )
    return SelectionAudit(
        epsilon_accounted=float(mechanism.epsilon),
        epsilon_of_pair=selection_epsilon(mechanism, scores, neighbour_scores),
        epsilon_demonstrated=bound,
        event=int(event),
        hits=hits,
        neighbour_hits=n_hits,
        trials=int(trials),
        delta=delta,
        confidence=confidence,
    )
