"""Privacy accounting on Google's dp-accounting (host-side, plain Python).

Every DP mechanism in privrl_jax is described by a ``dp_accounting.DpEvent``; epsilon
comes from dp-accounting's RDP or PLD accountant, never from a formula of ours. Inputs
are validated *before* dp-accounting sees them, because it silently returns epsilon = 0
for delta = NaN or delta > 1 and infinity for some tiny deltas (docs/dp_pitfalls.md,
item 12).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.metadata
import logging
import math
import numbers
import warnings
from collections.abc import Callable
from typing import Literal, TypeGuard

import attr
import dp_accounting
import numpy as np
from dp_accounting import pld, rdp

# Which dp-accounting accountant reports epsilon: "rdp" (Renyi DP, Mironov 2017; an
# upper bound, never below PLD) or "pld" (privacy loss distributions; tight).
Accountant = Literal["rdp", "pld"]

# PLD discretisation: dp-accounting's default value_discretization_interval. It moves
# epsilon by up to tens of percent when coarsened, so it is pinned here and recorded
# with every reported epsilon.
PLD_DISCRETIZATION = 1e-4
# RDP orders: dp-accounting's defaults (``rdp.RdpAccountant`` with orders=None);
# recorded likewise.
DP_ACCOUNTING_VERSION = importlib.metadata.version("dp-accounting")


class Neighboring(enum.Enum):
    """Neighbouring relations between datasets, as dp-accounting names them.

    The relation fixes the L2 sensitivity of a clipped sum: C when one unit is added or
    removed, 2C when one unit is replaced by another (both may point in opposite
    directions).
    """

    ADD_OR_REMOVE_ONE = "add_or_remove_one"
    REPLACE_ONE = "replace_one"

    @property
    def sensitivity_factor(self) -> float:
        """Sensitivity of a sum of unit contributions of norm <= C, in units of C."""
        return 2.0 if self is Neighboring.REPLACE_ONE else 1.0

    def to_dp_accounting(self) -> dp_accounting.NeighboringRelation:
        return dp_accounting.NeighboringRelation[self.name]


class Sampling(str, enum.Enum):
    """How each step's units are chosen; each scheme has its own dp-accounting event.

    - ``POISSON``: every unit independently with probability q (DP-SGD's analysed
      scheme).
    - ``TRUNCATED_POISSON``: Poisson, then cut to a fixed capacity; accounted with
      ``TruncatedSubsampledGaussianDpEvent`` (PLD only).
    - ``UNIFORM_ONE``: one unit drawn uniformly per step (GPOPE), accounted as
      ``SampledWithoutReplacementDpEvent(N, 1, .)`` under the replace-one relation.
    - ``FULL_BATCH``: every unit every step; each step is a plain ``GaussianDpEvent``.
    """

    POISSON = "poisson"
    TRUNCATED_POISSON = "truncated_poisson"
    UNIFORM_ONE = "uniform_one"
    FULL_BATCH = "full_batch"


def _is_real(value: object) -> TypeGuard[float]:
    """Python or NumPy real scalar (not bool).

    NumPy ints and floats are accepted everywhere.
    """
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_traced(value) -> bool:
    """A JAX tracer (inside jit/vmap/grad): known only when the program runs."""
    import jax  # noqa: PLC0415  (host-side module; jax is loaded by then anyway)

    return isinstance(value, jax.core.Tracer)


def _concrete(name: str, value, how: str):
    """``value`` as a Python number where it is a 0-d NumPy/JAX array.

    Raises, naming ``how`` (the way that works), where it is traced.
    """
    if _is_traced(value):
        raise ValueError(
            f"{name} is traced (inside jax.jit / jax.vmap / jax.grad), but it must be "
            f"a concrete number here: the accounting runs on the host. {how}"
        )
    if (
        isinstance(value, np.ndarray) or type(value).__module__.startswith("jax")
    ) and getattr(value, "shape", None) == ():
        if np.issubdtype(value.dtype, np.number) and value.dtype != np.bool_:
            return value.item()
    return value


def _check_positive(name: str, value: float) -> None:
    if not _is_real(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")


def validate_delta(delta: float, *, dataset_size: int | None = None) -> None:
    """Raises for delta outside (0, 1); warns when delta >= 1/N (a weak guarantee).

    Args:
      delta: the target delta.
      dataset_size: number of privacy units N (trajectories, not transitions, when the
        unit is a trajectory), if known.
    """
    if not _is_real(delta) or not math.isfinite(delta) or not 0 < delta < 1:
        raise ValueError(
            f"delta must be a number in (0, 1); got {delta!r}. Typical: 1e-5 or "
            "1/N^1.1."
        )
    if dataset_size is not None and delta >= 1.0 / dataset_size:
        warnings.warn(
            f"delta={delta:g} >= 1/N = {1.0 / dataset_size:g} for N={dataset_size} "
            "privacy units: a "
            "mechanism that publishes one unit in the clear satisfies this (epsilon, "
            "delta), so the "
            "guarantee is weak. Choose delta well below 1/N (e.g. 1/N^1.1).",
            stacklevel=2,
        )


def validate_sampling_rate(sampling_rate: float) -> None:
    if not _is_real(sampling_rate) or not 0 < sampling_rate <= 1:
        raise ValueError(
            f"sampling_rate must be in (0, 1]; got {sampling_rate!r} (use batch / N)."
        )


def validate_steps(steps: int) -> None:
    if (
        isinstance(steps, (bool, np.bool_))
        or not isinstance(steps, numbers.Integral)
        or steps < 1
    ):
        raise ValueError(f"steps must be an int >= 1; got {steps!r}.")


def dpsgd_event(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    *,
    sampling: Sampling | str = Sampling.POISSON,
    dataset_size: int | None = None,
    capacity: int | None = None,
) -> dp_accounting.DpEvent:
    """The dp-accounting event of ``steps`` DP-SGD steps.

    Gaussian noise on a clipped sum.

    ``noise_multiplier`` is dp-accounting's: the noise std over the L2 *sensitivity* of
    the sum under the scheme's neighbouring relation, never over the clip norm. Under
    add/remove-one (Poisson) the sensitivity is C, so the noise std is sigma*C; under
    replace-one (``UNIFORM_ONE``) it is 2C, so the mechanism this event describes adds
    noise of std 2*sigma*C. Build the noise from the same
    :class:`~privrl_jax.privacy.DPPlan` that builds this event and the two cannot
    disagree.

    Args:
      noise_multiplier: sigma > 0, noise std / L2 sensitivity.
      sampling_rate: q in (0, 1]: Poisson inclusion probability (ignored for
        ``UNIFORM_ONE``, where it is 1/N).
      steps: number of noisy releases T >= 1 (empty Poisson batches count too).
      sampling: the sampling scheme actually used by the trainer (see
        :class:`Sampling`).
      dataset_size: N, required for ``TRUNCATED_POISSON`` and ``UNIFORM_ONE``.
      capacity: the fixed batch capacity of ``TRUNCATED_POISSON``.

    Returns:
      ``SelfComposedDpEvent(one_step_event, steps)``.
    """
    _check_positive("noise_multiplier", noise_multiplier)
    validate_steps(steps)
    sampling = Sampling(sampling)
    gaussian = dp_accounting.GaussianDpEvent(float(noise_multiplier))
    if sampling == Sampling.POISSON:
        validate_sampling_rate(sampling_rate)
        step = dp_accounting.PoissonSampledDpEvent(float(sampling_rate), gaussian)
    elif sampling == Sampling.TRUNCATED_POISSON:
        validate_sampling_rate(sampling_rate)
        if dataset_size is None or capacity is None or capacity < 1:
            raise ValueError(
                "truncated Poisson sampling needs dataset_size and capacity >= 1; got "
                f"dataset_size={dataset_size!r}, capacity={capacity!r}."
            )
        step = dp_accounting.TruncatedSubsampledGaussianDpEvent(
            dataset_size=int(dataset_size),
            sampling_probability=float(sampling_rate),
            truncated_batch_size=int(capacity),
            noise_multiplier=float(noise_multiplier),
        )
    elif sampling == Sampling.FULL_BATCH:
        step = gaussian
    else:
        if dataset_size is None or dataset_size < 1:
            raise ValueError(
                "uniform one-unit sampling needs dataset_size >= 1; got "
                f"{dataset_size!r}."
            )
        step = dp_accounting.SampledWithoutReplacementDpEvent(
            int(dataset_size), 1, gaussian
        )
    return dp_accounting.SelfComposedDpEvent(step, int(steps))


def neighboring_relation_for(
    event: dp_accounting.DpEvent,
) -> dp_accounting.NeighboringRelation:
    """Replace-one for events with sampling without replacement, else add/remove-one."""
    if _contains(event, dp_accounting.SampledWithoutReplacementDpEvent):
        return dp_accounting.NeighboringRelation.REPLACE_ONE
    return dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def _contains(event: dp_accounting.DpEvent, cls: type) -> bool:
    if isinstance(event, cls):
        return True
    if isinstance(event, (dp_accounting.ComposedDpEvent, PointwiseMaxDpEvent)):
        return any(_contains(e, cls) for e in event.events)
    inner = getattr(event, "event", None)
    return inner is not None and _contains(inner, cls)


@attr.s(frozen=True)
class PointwiseMaxDpEvent(dp_accounting.DpEvent):
    """One release by one of ``events``, which one chosen independently of the data.

    E.g. one run of a private selection whose candidates differ in steps, batch size or
    noise. Such a release is a mixture of the events' mechanisms, and the Renyi
    divergence is jointly quasi-convex, so its RDP at every order is at most the
    largest of the events' RDP at that order: the pointwise maximum of their curves.
    Papernot & Steinke's repeat-and-select theorems hold with that curve (their one
    run's RDP is all they use). dp-accounting 0.6 has no such event; our RDP
    accountant (:func:`make_accountant`) composes it, nested anywhere (inside a
    ``RepeatAndSelectDpEvent`` too). The PLD accountant and zCDP refuse it.

    Attributes:
      events: the possible releases (at least one).
    """

    events: list[dp_accounting.DpEvent] = attr.ib()


class _RdpAccountant(rdp.RdpAccountant):
    """dp-accounting's RDP accountant, plus :class:`PointwiseMaxDpEvent`."""

    def _maybe_compose(self, event, count, do_compose):
        if not isinstance(event, PointwiseMaxDpEvent):
            return super()._maybe_compose(event, count, do_compose)
        if not event.events:
            return rdp.rdp_privacy_accountant.CompositionErrorDetails(
                invalid_event=event, error_message="no events to take the max of."
            )
        curves = []
        for inner in event.events:
            # Each event's own curve, from zero (the caller's composed curve is apart).
            sub = _RdpAccountant(self._orders, self._neighboring_relation)
            error = sub._maybe_compose(inner, 1, do_compose)
            if error is not None:
                return error
            curves.append(sub._rdp)
        if do_compose:
            self._rdp = self._rdp + count * np.max(curves, axis=0)
        return None


class PLDCache:
    """The PLDs of single sampled-Gaussian steps, kept for reuse (bounded, oldest out).

    Building the PLD of one truncated-Poisson step costs seconds (dp-accounting
    integrates the mixture over every batch size up to the capacity); composing it
    ``n`` times costs a fraction of that. A ledger asks for the epsilon of the same
    step event at every checkpoint, so it keeps one of these and builds each step's
    PLD once. The key is the whole event with the discretisation and the relation, so
    a hit is the very PLD dp-accounting would build: epsilon is bit-identical to the
    uncached accountant's (tests/privacy/test_ledger_cache.py checks it).
    """

    def __init__(self, max_entries: int = 8):
        if (
            isinstance(max_entries, bool)
            or not isinstance(max_entries, int)
            or max_entries < 1
        ):
            raise ValueError(f"max_entries must be an int >= 1; got {max_entries!r}.")
        self.max_entries = max_entries
        self._plds: dict[
            tuple, pld.privacy_loss_distribution.PrivacyLossDistribution
        ] = {}
        self.builds = 0

    def get(self, key: tuple, build: Callable[[], object]):
        """The PLD under ``key``, built by ``build()`` on a miss."""
        hit = self._plds.get(key)
        if hit is None:
            hit = build()
            self.builds += 1
            if len(self._plds) >= self.max_entries:
                self._plds.pop(next(iter(self._plds)))
            self._plds[key] = hit
        return hit


class _CachingPLDAccountant(pld.PLDAccountant):
    """dp-accounting's PLD accountant, taking single-step PLDs from a :class:`PLDCache`.

    The cache holds the PLDs of the two DP-SGD events.

    The two branches below do what ``PLDAccountant._maybe_compose`` does for these
    events (same factory, same arguments, then ``self_compose(count)`` and
    ``compose``); every other event goes to dp-accounting unchanged. PLDs are immutable
    (``compose``/``self_compose`` return new ones), so a cached one can be reused.
    """

    def __init__(self, neighboring, cache: PLDCache):
        super().__init__(neighboring, value_discretization_interval=PLD_DISCRETIZATION)
        self._cache = cache

    def _maybe_compose(self, event, count, do_compose):
        single = self._cached_single(event) if do_compose else None
        if single is None:
            return super()._maybe_compose(event, count, do_compose)
        self._pld = self._pld.compose(single.self_compose(count))
        return None

    def _cached_single(self, event):
        build = None
        vdi, rel = self._value_discretization_interval, self.neighboring_relation
        plds = pld.privacy_loss_distribution
        if (
            isinstance(event, dp_accounting.TruncatedSubsampledGaussianDpEvent)
            and event.sampling_probability != 0
            and event.truncated_batch_size != 0
            and event.dataset_size != 0
            and event.noise_multiplier != 0
        ):

            def build():
                return plds.from_truncated_subsampled_gaussian_mechanism(
                    dataset_size=event.dataset_size,
                    sampling_probability=event.sampling_probability,
                    truncated_batch_size=event.truncated_batch_size,
                    noise_multiplier=event.noise_multiplier,
                    value_discretization_interval=vdi,
                    neighboring_relation=rel,
                )

        elif (
            isinstance(event, dp_accounting.PoissonSampledDpEvent)
            and isinstance(event.event, dp_accounting.GaussianDpEvent)
            and event.sampling_probability != 0
            and event.event.noise_multiplier != 0
        ):

            def build():
                return plds.from_gaussian_mechanism(
                    standard_deviation=event.event.noise_multiplier,
                    value_discretization_interval=vdi,
                    sampling_prob=event.sampling_probability,
                    neighboring_relation=rel,
                )

        if build is None:
            return None
        return self._cache.get((repr(event), vdi, rel.name), build)


def make_accountant(
    accountant: Accountant,
    neighboring: dp_accounting.NeighboringRelation,
    *,
    pld_cache: PLDCache | None = None,
) -> dp_accounting.PrivacyAccountant:
    """A fresh dp-accounting accountant with our pinned settings.

    PLD: single-step PLDs are taken from ``pld_cache`` when given.
    """
    if accountant == "rdp":
        return _RdpAccountant(neighboring_relation=neighboring)
    if accountant == "pld":
        if pld_cache is not None:
            return _CachingPLDAccountant(neighboring, pld_cache)
        return pld.PLDAccountant(
            neighboring, value_discretization_interval=PLD_DISCRETIZATION
        )
    raise ValueError(f"accountant must be 'rdp' or 'pld'; got {accountant!r}.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpsilonReport:
    """An epsilon with everything needed to reproduce it."""

    epsilon: float
    delta: float
    accountant: str
    neighboring: str
    dp_accounting_version: str = DP_ACCOUNTING_VERSION
    pld_discretization: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def compute_epsilon(
    event: dp_accounting.DpEvent,
    delta: float,
    *,
    accountant: Accountant = "rdp",
    neighboring: dp_accounting.NeighboringRelation | None = None,
    pld_cache: PLDCache | None = None,
) -> EpsilonReport:
    """Epsilon of ``event`` at ``delta`` from dp-accounting's RDP or PLD accountant.

    Args:
      event: any dp-accounting event (see :func:`dpsgd_event`).
      delta: target delta in (0, 1).
      accountant: ``"rdp"`` (Mironov 2017; upper bound, never below PLD) or ``"pld"``
        (tight).
      neighboring: neighbouring relation; by default replace-one for events with
        sampling without replacement and add/remove-one otherwise.
      pld_cache: reuse single-step PLDs across calls (:class:`PLDCache`); the epsilon
        is the same bits as without it.

    Returns:
      An :class:`EpsilonReport`: the epsilon with the delta, accountant, relation and
      PLD discretisation it was computed with.

    Raises:
      ValueError: for invalid delta or an event the accountant does not support (e.g.
        truncated Poisson under RDP), with what to use instead.
    """
    validate_delta(delta)
    neighboring = neighboring or neighboring_relation_for(event)
    acc = _supporting_accountant(accountant, neighboring, event, pld_cache)
    with _quiet_absl():
        eps = float(acc.compose(event).get_epsilon(delta))
    if math.isnan(eps) or eps < 0:
        raise ValueError(
            f"dp-accounting returned epsilon={eps} for delta={delta}; check the inputs."
        )
    return EpsilonReport(
        epsilon=eps,
        delta=float(delta),
        accountant=accountant,
        neighboring=neighboring.name,
        pld_discretization=PLD_DISCRETIZATION if accountant == "pld" else None,
    )


def _innermost(event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
    inner = getattr(event, "event", None)
    return event if inner is None else _innermost(inner)


def dpsgd_epsilon(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    *,
    accountant: Accountant = "rdp",
    sampling: Sampling | str = Sampling.POISSON,
    dataset_size: int | None = None,
    capacity: int | None = None,
) -> EpsilonReport:
    """Epsilon of ``steps`` DP-SGD steps.

    Shorthand for ``compute_epsilon(dpsgd_event(...))``.

    ``noise_multiplier`` is noise std / L2 sensitivity (see :func:`dpsgd_event`): with
    ``sampling="uniform_one"`` (replace-one) the noise that achieves the returned
    epsilon has std ``2 * noise_multiplier * C``.
    """
    event = dpsgd_event(
        noise_multiplier,
        sampling_rate,
        steps,
        sampling=sampling,
        dataset_size=dataset_size,
        capacity=capacity,
    )
    return compute_epsilon(event, delta, accountant=accountant)


def _supporting_accountant(
    accountant: Accountant,
    neighboring,
    event: dp_accounting.DpEvent,
    pld_cache: PLDCache | None = None,
):
    """dp-accounting's accountant for ``event``.

    Raises a one-line ValueError when it cannot take it.
    """
    acc = make_accountant(accountant, neighboring, pld_cache=pld_cache)
    if not acc.supports(event):
        raise ValueError(
            f"the {accountant.upper()} accountant of dp-accounting "
            f"{DP_ACCOUNTING_VERSION} does not support "
            f"{type(_innermost(event)).__name__} under {neighboring.name}; use "
            f"accountant='{'pld' if accountant == 'rdp' else 'rdp'}'."
        )
    return acc


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    accountant: Accountant = "rdp",
    sampling: Sampling | str = Sampling.POISSON,
    dataset_size: int | None = None,
    capacity: int | None = None,
    tol: float = 1e-3,
) -> float:
    """Smallest noise multiplier whose epsilon is at most ``target_epsilon``.

    Uses dp-accounting's ``calibrate_dp_mechanism``.

    The result is noise std / L2 sensitivity (see :func:`dpsgd_event`): under
    ``uniform_one`` sampling, add noise of std ``2 * sigma * C``.

    The result is dp-accounting's bracketing search (tolerance ``tol`` on sigma), which
    returns a sigma on
    the private side of the target: recomputing epsilon gives a value <= target_epsilon.

    Args:
      target_epsilon: the epsilon to meet (> 0).
      delta: target delta in (0, 1).
      sampling_rate: q, the probability a unit is in a step's batch (Poisson).
      steps: the number of releases T.
      accountant: ``"rdp"`` or ``"pld"``.
      sampling: the sampling scheme (:class:`Sampling`).
      dataset_size: N, needed by ``uniform_one`` and truncated Poisson sampling.
      capacity: the batch capacity of truncated Poisson sampling.
      tol: the search's tolerance on sigma.

    Returns:
      The smallest noise multiplier sigma (within ``tol``) whose T releases are
      (target_epsilon, delta)-DP.

    Raises:
      ValueError: for an invalid target, delta or step count.
    """
    _check_positive("target_epsilon", target_epsilon)
    validate_delta(delta)
    validate_steps(steps)
    probe = dpsgd_event(
        1.0,
        sampling_rate,
        1,
        sampling=sampling,
        dataset_size=dataset_size,
        capacity=capacity,
    )

    def make_event(sigma: float) -> dp_accounting.DpEvent:
        return dpsgd_event(
            sigma,
            sampling_rate,
            steps,
            sampling=sampling,
            dataset_size=dataset_size,
            capacity=capacity,
        )

    return calibrate_sigma(
        make_event,
        target_epsilon,
        delta,
        accountant=accountant,
        neighboring=neighboring_relation_for(probe),
        tol=tol,
    )


def calibrate_sigma(
    make_event,
    target_epsilon: float,
    delta: float,
    *,
    accountant: Accountant,
    neighboring: dp_accounting.NeighboringRelation,
    tol: float = 1e-3,
) -> float:
    """Smallest sigma with ``epsilon(make_event(sigma)) <= target_epsilon``.

    Found by dp-accounting's search.

    The one calibration routine behind :func:`calibrate_noise_multiplier`,
    ``DPPlan.calibrate`` and ``GaussianMechanism.calibrate``.
    """
    if accountant not in ("rdp", "pld"):
        raise ValueError(f"accountant must be 'rdp' or 'pld'; got {accountant!r}.")
    # dp-accounting's search raises a bare "Unsupported event" deep inside; say it
    # first, plainly.
    _supporting_accountant(accountant, neighboring, make_event(1.0))

    def search(acc: Accountant, bracket) -> float:
        with _quiet_absl():
            return float(
                dp_accounting.calibrate_dp_mechanism(
                    lambda: make_accountant(acc, neighboring),
                    make_event,
                    float(target_epsilon),
                    float(delta),
                    bracket,
                    tol=tol,
                )
            )

    sigma = search("rdp", dp_accounting.LowerEndpointAndGuess(1e-2, 1.0))
    if accountant == "pld":
        # PLD evaluations cost seconds each; RDP's sigma (an upper bound, since RDP
        # epsilon >= PLD epsilon) brackets the PLD answer tightly and saves most of the
        # search.
        sigma = search("pld", dp_accounting.LowerEndpointAndGuess(sigma / 2, sigma))
    return sigma


@contextlib.contextmanager
def _quiet_absl():
    """Silences dp-accounting's per-order convergence warnings.

    They fire while a search probes tiny sigmas.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def zcdp_noise_std(rho: float, sensitivity: float) -> float:
    """Gaussian std giving rho-zCDP for an L2 sensitivity: sigma = Delta / sqrt(2 rho).

    Reference: Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications,
    Extensions, and Lower Bounds", Proposition 1.6 (https://arxiv.org/abs/1605.02065).
    """
    _check_positive("rho", rho)
    _check_positive("sensitivity", sensitivity)
    return sensitivity / math.sqrt(2.0 * rho)


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """(epsilon, delta)-DP implied by rho-zCDP.

    epsilon = rho + 2 sqrt(rho log(1/delta)).

    Reference: Bun & Steinke 2016, Proposition 1.3 (https://arxiv.org/abs/1605.02065).
    This is the classic conversion; dp-accounting's RDP accountant on a ``ZCDpEvent`` is
    slightly tighter.
    """
    _check_positive("rho", rho)
    validate_delta(delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def zcdp_rho(event: dp_accounting.DpEvent) -> float:
    """The rho of the zCDP guarantee of ``event`` (Bun & Steinke 2016).

    It is what a rho budget counts.

    A Gaussian release of std sigma at L2 sensitivity Delta, ``GaussianDpEvent(sigma /
    Delta)``, is rho = Delta^2 / (2 sigma^2)-zCDP (Proposition 1.6); compositions add
    (Lemma 2.3); a ``ZCDpEvent`` is its own rho, a ``NoOpDpEvent`` 0 and a
    ``NonPrivateDpEvent`` inf.

    Raises:
      ValueError: the event has no exact zCDP guarantee (subsampled DP-SGD steps,
        approximate zCDP with xi > 0, Laplace, ...): a rho budget cannot count it.

    >>> import dp_accounting
    >>> event = dp_accounting.GaussianDpEvent(2.0)
    >>> zcdp_rho(dp_accounting.SelfComposedDpEvent(event, 4))
    0.5
    """
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
        return math.inf
    if isinstance(event, dp_accounting.GaussianDpEvent):
        sigma = float(event.noise_multiplier)
        return math.inf if sigma == 0 else 0.5 / sigma**2
    if isinstance(event, dp_accounting.ZCDpEvent) and event.xi == 0:
        return float(event.rho)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return event.count * zcdp_rho(event.event)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return sum((zcdp_rho(e) for e in event.events), 0.0)
    raise ValueError(
        f"{type(event).__name__} has no exact zCDP guarantee, so a rho budget cannot "
        "count it; use an (epsilon, delta) budget."
    )


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Epsilon at ``delta`` of rho-zCDP from dp-accounting's RDP accountant.

    The event is ``ZCDpEvent(rho)``.

    Tighter than :func:`zcdp_to_epsilon`'s closed form; inf for rho = inf (no noise).

    Args:
      rho: the zCDP parameter (>= 0; inf for a release without noise).
      delta: target delta in (0, 1).

    Returns:
      The epsilon of rho-zCDP at ``delta``.
    """
    if _is_real(rho) and math.isinf(rho) and rho > 0:
        return math.inf
    _check_positive("rho", rho)
    return compute_epsilon(dp_accounting.ZCDpEvent(rho), delta).epsilon
