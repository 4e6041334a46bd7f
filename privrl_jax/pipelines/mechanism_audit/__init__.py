"""Audit one DP mechanism as the methods run it: epsilon accounted vs demonstrated.

A self-check of the library's mechanisms and of the auditor, not a release: the
mechanism runs on a public toy problem with m canaries (nothing sensitive is read).

- ``fit``: one white-box run of :func:`privrl_jax.privacy.fit` (the loop PrivORL-n,
  PrivORL-j and GPOPE run) on 64 rows of a linear regression, full batch or Poisson,
  audited with gradient canaries (:func:`privrl_jax.privacy.audit.audit_fit`);
- ``gaussian``: a :class:`~privrl_jax.privacy.GaussianMechanism` (POOL's statistics
  have sensitivity sqrt(3H)) on Dirac canaries of its input vector, each adding the
  sensitivity to its own coordinate, scored by the released coordinate;
- ``exponential``: an :class:`~privrl_jax.privacy.ExponentialMechanism` (AIM's
  selection) over ``candidates`` scores, audited many-run
  (:func:`privrl_jax.privacy.audit.audit_selection`: ``trials`` draws on each side of
  the worst-case pair (Delta, 0, ..., 0) / (0, Delta, ..., Delta), event "candidate 0",
  Clopper-Pearson, pure DP);
- ``simulated``: the white-box view :func:`~privrl_jax.privacy.audit.audit_fit` builds
  of the DP loop's plan, simulated in NumPy (fast at 100,000 canaries and 500 steps):
  in units of C each Dirac canary's coordinate of a release is ``[in and sampled] +
  N(0, (f sigma)^2)``, scored over the steps by ``mechanism.score``
  (:func:`~privrl_jax.privacy.audit.canary_step_score`: ``sum`` of the coordinate or
  the per-step ``likelihood`` ratio). The auditor's power: how often it catches a fault.

``mechanism.noise_factor`` < 1 injects a fault (the noise that runs is that share of
the accounted noise; the exponential mechanism's logits are divided by it): its audit
must demonstrate more epsilon than accounted. A correct mechanism (factor 1) that does
raises
:class:`~privrl_jax.privacy.audit.PrivacyAuditError` after ``report.json`` is
written. ``run(config, run_dir)`` writes ``config.yaml`` and ``report.json``
(the accounted and demonstrated epsilons, the one-run audit's counts, the Gaussian-DP
fit); the one-run bound is Steinke, Nasr & Jagielski (NeurIPS 2023), 95%.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal

from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_STEPS,
    Bound,
    ConfigSource,
    at_least,
    check_bounds,
    load_config,
    positive,
    to_dict,
)
from privrl_jax.pipelines._rundir import fresh_run_dir, write_report

Kind = Literal["fit", "gaussian", "exponential", "simulated"]
KINDS = typing.get_args(Kind)
Sampler = Literal["full_batch", "poisson"]
SAMPLERS = typing.get_args(Sampler)
Score = Literal["sum", "likelihood"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MechanismConfig:
    """The audited mechanism (module doc).

    ``noise_multiplier``: None calibrates it to ``privacy.epsilon``; a value fixes it
    (the accounted epsilon is then its own). ``noise_factor``: the share of the
    accounted noise that runs (1: correct; < 1: an injected fault).
    ``l2_sensitivity``: the Gaussian's (POOL at H = 5: sqrt(15)).
    ``candidates``, ``score_sensitivity``, ``trials``: the exponential mechanism's
    (AIM on the umaze table: 78 candidates, sensitivity 22), its audit's draws a side.
    ``score``: the simulated kind's canary score over the steps.
    """

    kind: Kind = "fit"
    sampler: Sampler = "full_batch"
    dataset_size: int = 64
    sampling_rate: float = 0.25
    steps: int = 1
    l2_clip_norm: float = 1.0
    noise_multiplier: float | None = None
    noise_factor: float = 1.0
    l2_sensitivity: float = math.sqrt(15.0)
    candidates: int = 100
    score_sensitivity: float = 22.0
    trials: int = 10_000_000
    score: Score = "likelihood"

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "dataset_size": at_least(2, MAX_BATCH),
        "sampling_rate": positive(1.0),
        "steps": at_least(1, MAX_STEPS),
        "l2_clip_norm": positive(),
        "noise_factor": positive(1.0),
        "l2_sensitivity": positive(),
        "candidates": at_least(2, MAX_BATCH),
        "score_sensitivity": positive(),
        "trials": at_least(1, 10**9),
    }

    def __post_init__(self):
        """Check the ranges (one-line ValueError)."""
        check_bounds(self, "mechanism")
        if self.noise_multiplier is not None and self.noise_multiplier < 0:
            raise ValueError(
                "mechanism.noise_multiplier must be >= 0 or null (calibrated); got "
                f"{self.noise_multiplier}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig:
    """The target: epsilon (``.inf``: no noise) at delta."""

    epsilon: float = 1.0
    delta: float = 1e-5

    BOUNDS: ClassVar[dict[str, Bound]] = {"delta": positive(1.0)}

    def __post_init__(self):
        """Check the ranges (one-line ValueError)."""
        check_bounds(self, "privacy")
        if not self.epsilon > 0:  # .inf allowed: no noise
            raise ValueError(
                f"privacy.epsilon must be > 0 (.inf: no noise); got {self.epsilon}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class CanaryConfig:
    """``canaries``: m (1% guessed each way); ``seed``: their coins and the noise."""

    canaries: int = 10_000
    seed: int = 1

    BOUNDS: ClassVar[dict[str, Bound]] = {"canaries": at_least(100, MAX_BATCH)}

    def __post_init__(self):
        """Check the ranges (one-line ValueError)."""
        check_bounds(self, "audit")


@dataclasses.dataclass(frozen=True, kw_only=True)
class MechanismAuditConfig:
    """A mechanism audit's config (module doc)."""

    mechanism: MechanismConfig = dataclasses.field(default_factory=MechanismConfig)
    privacy: PrivacyConfig = dataclasses.field(default_factory=PrivacyConfig)
    audit: CanaryConfig = dataclasses.field(default_factory=CanaryConfig)


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> MechanismAuditConfig:
    """Load a mechanism audit's config.

    Args:
      path: a YAML file or a shipped name (``mechanism_audit/default``); None: the
        defaults.
      overrides: ``section.key=value`` strings.

    Returns:
      The checked config.

    Raises:
      ValueError: an unknown key or a bad value (one line).
    """
    return load_config(MechanismAuditConfig, path, overrides)


def _plan(cfg: MechanismAuditConfig) -> Any:
    from privrl_jax import privacy  # noqa: PLC0415 -- keeps `load` light

    m, p = cfg.mechanism, cfg.privacy
    if m.sampler == "full_batch":
        sampler = privacy.FullBatchSampler(
            dataset_size=m.dataset_size, microbatch_size=512
        )
    else:
        sampler = privacy.PoissonSampler(
            dataset_size=m.dataset_size,
            sampling_rate=m.sampling_rate,
            microbatch_size=512,
        )
    base = privacy.DPPlan(sampler=sampler, l2_clip_norm=m.l2_clip_norm, steps=m.steps)
    plan = (
        base.calibrate(p.epsilon, p.delta)
        if m.noise_multiplier is None
        else dataclasses.replace(base, noise_multiplier=m.noise_multiplier)
    )
    if m.noise_factor == 1.0:
        return plan
    factor = m.noise_factor

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class _Fault(privacy.DPPlan):
        # The injected fault: the noise that runs is `factor` of the accounted one.
        @property
        def noise_stds(self):
            return tuple(s * factor for s in super().noise_stds)

    return _Fault(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)})


def _audit_fit(cfg: MechanismAuditConfig) -> dict[str, Any]:
    import flax.linen as nn  # noqa: PLC0415
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import optax  # noqa: PLC0415

    from privrl_jax import privacy  # noqa: PLC0415
    from privrl_jax.privacy import audit  # noqa: PLC0415

    m, seed = cfg.audit.canaries, cfg.audit.seed
    n = cfg.mechanism.dataset_size
    # A public toy regression: the audit reads the loop, not the model.
    x = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    model = nn.Dense(1)

    def loss(p, item):
        return (model.apply(p, item[0])[0] - item[1]) ** 2

    plan = _plan(cfg)
    res = audit.audit_fit(
        plan,
        loss,
        optax.sgd(0.01),
        model.init(jax.random.key(0), x[0]),
        (x[:, None], x.sum(1)[:, None]),
        num_canaries=m,
        k_positive=m // 100,
        delta=cfg.privacy.delta,
        seed=seed,
        secret=privacy.DPSecret.from_seed(seed),
        raise_on_violation=False,
    )
    return res.to_dict()


def _audit_gaussian(cfg: MechanismAuditConfig) -> dict[str, Any]:
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from privrl_jax import privacy  # noqa: PLC0415
    from privrl_jax.privacy import audit  # noqa: PLC0415

    m, seed, delta = cfg.audit.canaries, cfg.audit.seed, cfg.privacy.delta
    mc = cfg.mechanism
    mech = privacy.GaussianMechanism(l2_sensitivity=mc.l2_sensitivity)
    mech = (
        mech.calibrate(cfg.privacy.epsilon, delta)
        if mc.noise_multiplier is None
        else dataclasses.replace(mech, noise_multiplier=mc.noise_multiplier)
    )
    # The auditor's fair coin per canary (as the one-run theorem needs); canary i
    # adds one unit's whole sensitivity to coordinate i.
    inclusion = np.random.default_rng(seed).random(m) < 0.5
    value = jnp.asarray(inclusion, jnp.float32) * mech.l2_sensitivity
    ran = dataclasses.replace(
        mech, noise_multiplier=mech.noise_multiplier * mc.noise_factor
    )
    scores = np.asarray(ran.release(jax.random.key(seed), value), np.float64)
    bound = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=delta, k_positive=m // 100, k_negative=m // 100
    )
    gdp = audit.gaussian_dp_epsilon_estimate(
        scores[inclusion], scores[~inclusion], delta=delta
    )
    accounted = mech.epsilon(delta).epsilon
    return {
        "epsilon_accounted": accounted,
        "epsilon_demonstrated": bound.epsilon_lower_bound,
        "audit": bound.to_dict(),
        "gaussian_dp_estimate": gdp.to_dict(),
    }


def _audit_exponential(cfg: MechanismAuditConfig) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415

    from privrl_jax import privacy  # noqa: PLC0415
    from privrl_jax.privacy import audit  # noqa: PLC0415

    mc = cfg.mechanism
    factor = mc.noise_factor

    class _Fault(privacy.ExponentialMechanism):
        # The injected fault: logits 1 / factor times the accounted ones.
        def logits(self, scores):
            return super().logits(scores) / factor

    cls = privacy.ExponentialMechanism if factor == 1.0 else _Fault
    mech = cls(epsilon=cfg.privacy.epsilon, sensitivity=mc.score_sensitivity)
    # The worst-case neighbouring pair: every score moves by the sensitivity.
    scores = np.zeros(mc.candidates)
    scores[0] = mc.score_sensitivity
    neighbour = np.full(mc.candidates, float(mc.score_sensitivity))
    neighbour[0] = 0.0
    res = audit.audit_selection(
        mech, scores, neighbour, trials=mc.trials, seed=cfg.audit.seed
    )
    out = res.to_dict()
    return {
        "epsilon_accounted": out["epsilon_accounted"],
        "epsilon_demonstrated": out["epsilon_demonstrated"],
        "audit": out,
        "gaussian_dp_estimate": None,
    }


def _audit_simulated(cfg: MechanismAuditConfig) -> dict[str, Any]:
    import numpy as np  # noqa: PLC0415

    from privrl_jax.privacy import audit  # noqa: PLC0415

    m, delta, mc = cfg.audit.canaries, cfg.privacy.delta, cfg.mechanism
    plan = _plan(
        dataclasses.replace(cfg, mechanism=dataclasses.replace(mc, noise_factor=1.0))
    )
    q, sigma = plan.sampling_rate, plan.noise_multiplier
    # The auditor's fair coin per canary, then per step Poisson sampling and the noise
    # that runs (noise_factor of the accounted): the draws in this order, from one seed.
    rng = np.random.default_rng(cfg.audit.seed)
    inclusion = rng.random(m) < 0.5
    step_score = audit.canary_step_score(
        mc.score, sampling_rate=q, noise_multiplier=sigma
    )
    scores = np.zeros(m)
    for _ in range(plan.steps):
        sampled = inclusion & (rng.random(m) < q)
        scores += np.asarray(
            step_score(sampled + mc.noise_factor * sigma * rng.standard_normal(m))
        )
    bound = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=delta, k_positive=m // 100, k_negative=m // 100
    )
    ran = dataclasses.replace(plan, noise_multiplier=sigma * mc.noise_factor)
    return {
        "epsilon_accounted": plan.epsilon(delta).epsilon,
        "epsilon_demonstrated": bound.epsilon_lower_bound,
        "audit": bound.to_dict() | {"epsilon_ran": ran.epsilon(delta).epsilon},
        "gaussian_dp_estimate": None,
    }


def run(cfg: MechanismAuditConfig, run_dir: str | Path) -> dict[str, Any]:
    """Audit the configured mechanism; write ``config.yaml`` and ``report.json``.

    Args:
      cfg: the config (:func:`load`).
      run_dir: a new or empty directory.

    Returns:
      The report: the config, ``epsilon_accounted``, ``epsilon_demonstrated``,
      ``violation``, ``fault`` (the injected noise factor is not 1), ``audit`` (the
      bound's counts) and ``gaussian_dp_estimate`` (None for a selection).

    Raises:
      ValueError: ``run_dir`` holds files.
      PrivacyAuditError: a correct mechanism demonstrated more than it accounts.
    """
    from privrl_jax import provenance  # noqa: PLC0415
    from privrl_jax.privacy.audit import PrivacyAuditError  # noqa: PLC0415

    resolved = to_dict(cfg)
    run_dir = fresh_run_dir(run_dir, resolved)
    audit_of = {
        "fit": _audit_fit,
        "gaussian": _audit_gaussian,
        "exponential": _audit_exponential,
        "simulated": _audit_simulated,
    }
    out = audit_of[cfg.mechanism.kind](cfg)
    fault = cfg.mechanism.noise_factor != 1.0
    report = {
        "config": resolved,
        **{k: out[k] for k in ("epsilon_accounted", "epsilon_demonstrated")},
        "violation": bool(out["epsilon_demonstrated"] > out["epsilon_accounted"]),
        "fault": fault,
        "audit": out["audit"],
        "gaussian_dp_estimate": out["gaussian_dp_estimate"],
        "provenance": provenance(),
    }
    write_report(run_dir, report)
    if report["violation"] and not fault:
        raise PrivacyAuditError(
            "privacy bug: the audit demonstrated "
            f"{report['epsilon_demonstrated']:.4g} > accounted "
            f"{report['epsilon_accounted']:.4g} (see {run_dir / 'report.json'})."
        )
    return report


__all__ = [
    "KINDS",
    "SAMPLERS",
    "CanaryConfig",
    "MechanismAuditConfig",
    "MechanismConfig",
    "PrivacyConfig",
    "load",
    "run",
]
