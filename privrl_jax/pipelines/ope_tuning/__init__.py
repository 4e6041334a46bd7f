"""GPOPE vs DP-LSW / DP-LSL on the chain or Mountain Car, hyper-parameters paid for.

``run(config, run_dir)`` evaluates the chain's (or on-policy Mountain Car's, see
``_setting``) target policy on-policy by one method at
a total budget that includes tuning (:class:`OPETuningConfig`), and the same method
tuned on the truth (the oracle, not private), and writes ``report.json`` (the
accounting: total and per-run epsilon) and ``audit/audit.json`` (NOT DP: the true MSE of
the privately chosen release and of the oracle's, their gap). A simulation study: the
noise comes from ``seed``, so nothing here is a private release.
"""

from __future__ import annotations

import functools
import json
import math
import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import yaml

from privrl_jax import ope, privacy
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._ope_tuning_config import (
    METHODS,
    OPETuningConfig,
    load,
)
from privrl_jax.pipelines._rundir import atomic_write_text, refuse_other_run, run_in_dir
from privrl_jax.pipelines.ope_tuning._setting import setting
from privrl_jax.pipelines.select import dp_score

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE


def _rdp_epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    acc = dp_accounting.rdp.RdpAccountant(neighboring_relation=REPLACE_ONE)
    return float(acc.compose(event).get_epsilon(delta))


def _gpope_plan(m: int, steps: int, clip: float, sigma: float | None) -> privacy.DPPlan:
    return privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=m),
        l2_clip_norm=clip,
        steps=steps,
        noise_multiplier=sigma,
    )


def _score_mechanism(cfg: OPETuningConfig) -> privacy.GaussianMechanism:
    # Replace-one: a clipped sum moves by at most 2 h.
    return privacy.GaussianMechanism(
        l2_sensitivity=2.0 * cfg.score_clip,
        noise_multiplier=cfg.score_noise,
        neighboring=privacy.Neighboring.REPLACE_ONE,
    )


def gpope_run_event(
    m: int, steps: int, sigma: float, score_noise: float
) -> dp_accounting.DpEvent:
    """One private-selection run of GPOPE: the one-of-m plan, then the score.

    Args:
      m: the number of trajectories (the plan samples one of them each step).
      steps: GPOPE's number of steps.
      sigma: GPOPE's noise multiplier.
      score_noise: the Gaussian score's noise multiplier.

    Returns:
      The run's DP event: the plan's, composed with the score's.
    """
    plan = _gpope_plan(m, steps, 1.0, sigma)
    return dp_accounting.ComposedDpEvent(
        [plan.event(), dp_accounting.GaussianDpEvent(score_noise)]
    )


@functools.lru_cache(maxsize=64)
def gpope_selection_sigma(
    m: int,
    steps: int,
    score_noise: float,
    mean_runs: float,
    epsilon: float,
    delta: float,
) -> float:
    """The least GPOPE noise multiplier whose private selection fits ``epsilon``.

    The selection draws K from the logarithmic distribution; its cost is the RDP
    epsilon (replace-one) at ``delta``. Found by bisection in log sigma.

    Args:
      m: the number of trajectories.
      steps: GPOPE's number of steps.
      score_noise: the Gaussian score's noise multiplier.
      mean_runs: E[K], the mean number of runs.
      epsilon: the selection's budget.
      delta: the delta at which its epsilon is computed.

    Returns:
      The noise multiplier (within the bisection's tolerance, on the safe side).

    Raises:
      ValueError: the scores alone exceed the budget.
    """
    reps = privacy.Repetitions.logarithmic(mean_runs)

    def eps(sigma: float) -> float:
        return _rdp_epsilon(
            reps.event(gpope_run_event(m, steps, sigma, score_noise)), delta
        )

    lo, hi = math.log(0.05), math.log(1e4)
    if eps(math.exp(hi)) > epsilon:
        raise ValueError(
            f"the selection's scores alone cost more than epsilon = {epsilon}; raise "
            "score_noise or epsilon."
        )
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if eps(math.exp(mid)) > epsilon:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


def _poisson_plan(
    m: int, batch: float, steps: int, clip: float, sigma: float | None
) -> privacy.DPPlan:
    sampler = privacy.PoissonSampler(
        dataset_size=m, sampling_rate=batch / m, microbatch_size=64
    )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=clip, steps=steps, noise_multiplier=sigma
    )


def _cfg_plan(cfg: OPETuningConfig, clip: float, sigma: float | None) -> privacy.DPPlan:
    m = cfg.num_trajectories
    if cfg.gpope_sampler == "poisson":
        return _poisson_plan(m, cfg.gpope_batch_size, cfg.gpope_steps, clip, sigma)
    return _gpope_plan(m, cfg.gpope_steps, clip, sigma)


@functools.lru_cache(maxsize=64)
def _calibrated_sigma(m: int, steps: int, epsilon: float, delta: float) -> float:
    plan = _gpope_plan(m, steps, 1.0, None).calibrate(epsilon, delta, "rdp")
    return float(plan.noise_multiplier)


@functools.lru_cache(maxsize=64)
def _poisson_sigma(
    m: int, batch: float, steps: int, epsilon: float, delta: float
) -> float:
    # Accounted under add/remove-one; group privacy makes it replace-one (epsilon,
    # delta)-DP, like the baselines (an upper bound on its replace-one cost).
    plan = _poisson_plan(m, batch, steps, 1.0, None)
    return float(
        plan.calibrate(*ope.replace_one_target(epsilon, delta), "rdp").noise_multiplier
    )


def _full_sigma(cfg: OPETuningConfig) -> float:
    m, steps = cfg.num_trajectories, cfg.gpope_steps
    if cfg.gpope_sampler == "poisson":
        return _poisson_sigma(m, cfg.gpope_batch_size, steps, cfg.epsilon, cfg.delta)
    return _calibrated_sigma(m, steps, cfg.epsilon, cfg.delta)


def lsl_split(cfg: OPETuningConfig) -> dict[str, float]:
    """DP-LSL's per-run (epsilon, delta) when its K candidates and K scores compose.

    The scores are composed by RDP at delta / 2, the runs by basic composition of
    the rest of the budget.

    Args:
      cfg: the cell's config (budget, ``lsl_ridge`` candidates, ``score_noise``).

    Returns:
      ``run_epsilon`` and ``run_delta`` (each run's), and ``scores_epsilon`` (the K
      scores' together).

    Raises:
      ValueError: the scores alone exceed the budget.
    """
    k = len(cfg.lsl_ridge)
    scores = dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(cfg.score_noise), k
    )
    eps_scores = _rdp_epsilon(scores, cfg.delta / 2)
    eps_run = (cfg.epsilon - eps_scores) / k
    if eps_run <= 0:
        raise ValueError(
            f"DP-LSL's {k} scores alone cost epsilon {eps_scores:.3g} >= "
            f"{cfg.epsilon}; raise score_noise or epsilon."
        )
    return {
        "run_epsilon": eps_run,
        "run_delta": cfg.delta / (2 * k),
        "scores_epsilon": eps_scores,
    }


def _schedule_seed(key: jax.Array) -> int:
    bits = np.asarray(jax.random.bits(key, (2,), jnp.uint32))
    return int(bits[0]) << 32 | int(bits[1])


def run(cfg: OPETuningConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs one cell (module doc).

    Args:
      cfg: the cell's config.
      run_dir: where the report and the audit are written.

    Returns:
      The report (+ ``audit``).
    """
    return run_in_dir(Path(run_dir), lambda d, _: _run(cfg, d))


def _run(cfg: OPETuningConfig, run_dir: Path) -> dict[str, Any]:
    t0 = time.time()
    resolved = to_dict(cfg)
    refuse_other_run(run_dir, resolved, "ope_tuning")
    atomic_write_text(
        run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
    )
    st = setting(cfg)
    phi, data, visits, rho = st.cell_phi, st.data, st.visits, st.rho
    m = cfg.num_trajectories
    mech = _score_mechanism(cfg)
    root = jax.random.fold_in(jax.random.key(cfg.seed), 7)
    k_private, k_oracle = jax.random.split(root)

    def mse(theta) -> float:
        return float(ope.value_mse(jnp.asarray(theta), st.eval_phi, st.values))

    def score(theta, key) -> float:
        return dp_score(theta, data, "horizon", cfg.score_clip, mech, m, key)

    bounds = tuple(cfg.return_bounds)
    if cfg.method == "gpope":
        grid = [
            {"gpope.l2_clip_norm": h, "gpope.step_size": b}
            for h in cfg.gpope_clip
            for b in cfg.gpope_step_size
        ]

        def gpope_theta(h, b, sigma, key):
            plan = _cfg_plan(cfg, h, sigma)
            k_s, k_n = jax.random.split(key)
            schedule = ope.sample_schedule(plan, _schedule_seed(k_s))
            step = ope.StepSize(b, cfg.gpope_decay_steps)
            return ope.gpope(plan, data, schedule, k_n, step_size=step).theta

        if cfg.tuning == "private":
            sigma = gpope_selection_sigma(
                m,
                cfg.gpope_steps,
                cfg.score_noise,
                cfg.mean_runs,
                cfg.epsilon,
                cfg.delta,
            )
            reps = privacy.Repetitions.logarithmic(cfg.mean_runs)
            run_event = gpope_run_event(m, cfg.gpope_steps, sigma, cfg.score_noise)

            def candidate(c):
                def fn(key):
                    k_run, k_score = jax.random.split(key)
                    theta = gpope_theta(
                        c["gpope.l2_clip_norm"], c["gpope.step_size"], sigma, k_run
                    )
                    return np.asarray(theta), score(theta, k_score)

                return fn

            result = privacy.select(
                [candidate(c) for c in grid], run_event, reps, key=k_private
            )
            total = _rdp_epsilon(result.event, cfg.delta)
            chosen_theta, chosen = result.release, result.candidate
            accounting = {
                "how": "private selection (Papernot & Steinke; dp-accounting "
                "RepeatAndSelectDpEvent, RDP, replace-one)",
                "mean_runs": cfg.mean_runs,
                "noise_multiplier": sigma,
                "run_epsilon": _rdp_epsilon(run_event, cfg.delta),
                "runs": result.audit["runs"],  # NOT DP: reported in the audit only
            }
        full_sigma = _full_sigma(cfg)
        oracle_thetas = [
            gpope_theta(
                c["gpope.l2_clip_norm"],
                c["gpope.step_size"],
                full_sigma,
                jax.random.fold_in(k_oracle, i),
            )
            for i, c in enumerate(grid)
        ]
    elif cfg.method == "dp_lsl":
        grid = [{"ridge": r} for r in cfg.lsl_ridge]
        if cfg.tuning == "private":
            split = lsl_split(cfg)
            scored = []
            for i, c in enumerate(grid):
                k_run, k_score = jax.random.split(jax.random.fold_in(k_private, i))
                theta = ope.dp_lsl(
                    k_run,
                    visits,
                    phi,
                    rho,
                    epsilon=split["run_epsilon"],
                    delta=split["run_delta"],
                    return_bounds=bounds,
                    num_trajectories=m,
                    ridge=c["ridge"],
                    calibration=cfg.calibration,
                ).theta
                scored.append((score(theta, k_score), np.asarray(theta)))
            chosen = int(np.argmax([s for s, _ in scored]))
            chosen_theta = scored[chosen][1]
            total = len(grid) * split["run_epsilon"] + split["scores_epsilon"]
            accounting = {
                "how": "every candidate once: basic composition of the runs' "
                f"smooth-sensitivity ({cfg.calibration} alpha) (epsilon, delta) "
                "plus the scores' RDP epsilon at delta / 2",
                **split,
            }
        oracle_thetas = [
            ope.dp_lsl(
                jax.random.fold_in(k_oracle, i),
                visits,
                phi,
                rho,
                epsilon=cfg.epsilon,
                delta=cfg.delta,
                return_bounds=bounds,
                num_trajectories=m,
                ridge=c["ridge"],
                calibration=cfg.calibration,
            ).theta
            for i, c in enumerate(grid)
        ]
    else:
        grid = [{}]
        theta = ope.dp_lsw(
            k_private,
            visits,
            phi,
            rho,
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            return_bounds=bounds,
            num_trajectories=m,
            ridge=cfg.lsw_ridge,
            calibration=cfg.calibration,
        ).theta
        chosen, chosen_theta, total = 0, np.asarray(theta), cfg.epsilon
        accounting = {
            "how": f"one smooth-sensitivity release ({cfg.calibration} alpha; no "
            "hyper-parameter to choose)"
        }
        oracle_thetas = [theta]
    if cfg.tuning == "fixed":
        # One candidate, set off the data: the release is the oracle's, at the whole
        # budget (GPOPE's sigma calibrated for it alone), and nothing is chosen.
        chosen, chosen_theta, total = 0, np.asarray(oracle_thetas[0]), cfg.epsilon
        accounting = {
            "how": "fixed hyper-parameters (set off the data, not paid for): one "
            "release at the whole budget"
        }
        if cfg.method == "gpope":
            accounting["noise_multiplier"] = full_sigma
    oracle_mse = [mse(t) for t in oracle_thetas]
    best = int(np.argmin(oracle_mse))
    runs = accounting.pop("runs", None)
    report = {
        "config": resolved,
        "method": cfg.method,
        "tuning": cfg.tuning,
        "candidates": grid,
        "epsilon_total": total,
        "delta": cfg.delta,
        "accounting": accounting,
        "chosen": {"candidate": chosen, "hyper_parameters": grid[chosen]},
        "theta": np.asarray(chosen_theta).tolist(),
        "wall_time_s": time.time() - t0,
    }
    audit = {
        "notice": "NOT DP (true values; seeded noise): never publish.",
        "mse_private": mse(chosen_theta),
        "mse_oracle": oracle_mse[best],
        "gap": mse(chosen_theta) - oracle_mse[best],
        "oracle_candidate": best,
        "oracle_mse_every_candidate": oracle_mse,
        "runs": runs,
        "lstd_mse": mse(st.lstd),
    }
    (run_dir / "audit").mkdir(exist_ok=True)
    atomic_write_text(run_dir / "audit" / "audit.json", json.dumps(audit, indent=2))
    atomic_write_text(run_dir / "report.json", json.dumps(report, indent=2))
    return report | {"audit": audit}


__all__ = [
    "METHODS",
    "OPETuningConfig",
    "gpope_selection_sigma",
    "load",
    "lsl_split",
    "run",
]
