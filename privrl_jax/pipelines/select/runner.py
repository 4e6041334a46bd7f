"""``privrl select``'s run.

The candidates, their DP scores, ``privacy.select`` and the report.
See :mod:`privrl_jax.pipelines.select` for what a run writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import yaml

from privrl_jax import ope, privacy
from privrl_jax.pipelines import gpope
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._rundir import (
    atomic_write_bytes,
    atomic_write_text,
    not_private_mark,
    private_dir,
    refuse_other_run,
    run_in_dir,
)
from privrl_jax.pipelines._select_config import SelectRunConfig

RELEASE_FILE = "selected.json"
WHAT = "private selection"
AUDIT_NOTICE = (
    "NOT DP. This directory reads the sensitive data without differential privacy: "
    "the number of runs K, every run's score and candidate, and the true errors of "
    "the candidates. Publishing any of it voids the selection's guarantee. Never "
    "publish it.\n"
)
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the number of runs, the candidates drawn and their noise. Use this run "
    "for tests and reproduction only."
)
# The audit's every-candidate runs draw from fold_in(key, 2): privacy.select splits the
# key in two, and split(key)[i] is fold_in(key, i) in JAX, so fold_in(key, 1) would
# replay the selection's own runs instead of drawing new ones.
AUDIT_STREAM = 2
BUDGET_HINT = (
    "Raise privacy.epsilon (the whole search's budget), lower repetitions.mean, or "
    "give each run less (the candidates' privacy.epsilon, or more score noise)."
)


def repetitions(cfg: SelectRunConfig) -> privacy.Repetitions:
    """The configured distribution of the number of runs.

    Args:
      cfg: the selection's config (its ``repetitions`` section).

    Returns:
      The distribution of K.
    """
    r = cfg.repetitions
    if r.distribution == "poisson":
        return privacy.Repetitions.poisson(r.mean)
    if r.distribution == "geometric":
        return privacy.Repetitions.geometric(r.mean)
    if r.distribution == "logarithmic":
        return privacy.Repetitions.logarithmic(r.mean)
    return privacy.Repetitions.truncated_negative_binomial(r.mean, r.eta)


def candidate_configs(cfg: SelectRunConfig) -> list[gpope.GPOPERunConfig]:
    """Every candidate's full pipeline config.

    Args:
      cfg: the selection's config (its ``candidates`` section).

    Returns:
      One GPOPE config per candidate, in the grid's product order.

    Raises:
      ValueError: a bad grid key or value (naming the candidate).
    """
    return cfg.candidates.load_each(gpope.load)


def gpope_config_source(spec: str) -> str:
    """A candidate base config as the GPOPE loader takes it.

    Args:
      spec: ``candidates.config``: a YAML file or a shipped name.

    Returns:
      The file, or the qualified shipped name (``gpope/...``).
    """
    from privrl_jax.pipelines._config import qualify_config  # noqa: PLC0415

    return str(qualify_config(spec, "gpope"))


def score_mechanism(
    cfg: SelectRunConfig, plan: privacy.DPPlan
) -> privacy.GaussianMechanism:
    """The Gaussian mechanism of a run's score, under the plan's neighbouring relation.

    The clipped sum's sensitivity is h under add/remove-one, 2h under replace-one.

    Args:
      cfg: the selection's config (its ``score`` section: h and the noise).
      plan: a candidate's plan (its neighbouring relation).

    Returns:
      The score's mechanism.
    """
    s = cfg.score
    relation = plan.neighboring
    return privacy.GaussianMechanism(
        l2_sensitivity=relation.sensitivity_factor * s.l2_clip_norm,
        noise_multiplier=s.noise_multiplier,
        neighboring=relation,
    )


def run_event(cfg: SelectRunConfig, plan: privacy.DPPlan) -> dp_accounting.DpEvent:
    """One run's event: the GPOPE plan, then its score.

    A value score is post-processing of the plan's release: the plan alone.

    Args:
      cfg: the selection's config (its ``score`` section).
      plan: the candidate's plan.

    Returns:
      The DP event of one run.
    """
    if cfg.score.kind == "value":
        return plan.event()
    return dp_accounting.ComposedDpEvent(
        [plan.event(), score_mechanism(cfg, plan).event()]
    )


def td_directions(
    theta: jax.Array, data: ope.TrajectoryData, normalization: str
) -> jax.Array:
    """[m, n] per-trajectory ``b_i - A_i theta = sum_t w_t rho_t delta_t phi_t``.

    Args:
      theta: [n] the value weights.
      data: the m trajectories.
      normalization: the per-transition weights w_t (``ope.item_weights``).

    Returns:
      One TD direction per trajectory.
    """
    tr = data.transitions
    delta = (
        tr.r_t
        + tr.discount_t * jnp.einsum("mtn,n->mt", tr.phi_t, theta)
        - jnp.einsum("mtn,n->mt", tr.phi_tm1, theta)
    )
    weights = ope.item_weights(data.mask, normalization)
    coef = jnp.where(data.mask, weights * tr.rho_tm1 * delta, 0.0)
    return jnp.einsum("mt,mtn->mn", coef, tr.phi_tm1)


def dp_score(
    theta: jax.Array,
    data: ope.TrajectoryData,
    normalization: str,
    clip: float,
    mechanism: privacy.GaussianMechanism,
    dataset_size: int,
    key: jax.Array,
) -> float:
    """``-||noisy mean of clipped TD directions||^2``: a DP score (higher is better).

    The mean divides the noisy sum by the public ``dataset_size``; squaring is
    post-processing.

    Args:
      theta: [n] the value weights scored.
      data: the sensitive trajectories.
      normalization: the per-transition weights (``ope.item_weights``).
      clip: the L2 norm each trajectory's TD direction is clipped to.
      mechanism: the Gaussian mechanism that releases the clipped sum.
      dataset_size: the public number of trajectories.
      key: the noise's PRNG key.

    Returns:
      The DP score.
    """
    g = td_directions(theta, data, normalization)
    norms = jnp.linalg.norm(g, axis=1, keepdims=True)
    clipped = g * jnp.minimum(1.0, clip / jnp.maximum(norms, 1e-30))
    noisy = mechanism.release(key, jnp.sum(clipped, axis=0)) / dataset_size
    return -float(jnp.sum(noisy**2))


def policy_value(task: gpope.GPOPETask, theta: Any) -> float:
    """The value estimate of ``task``'s target policy at the public start.

    ``initial . Phi theta``, with the chain's public start distribution ``initial``.

    Args:
      task: a chain task (its start distribution and features).
      theta: the value weights (a DP release).

    Returns:
      The estimated value (post-processing of ``theta``).
    """
    assert task.mdp is not None  # chain only (checked by the run)
    return float(task.mdp.initial @ (task.features @ jnp.asarray(theta)))


def true_policy_value(task: gpope.GPOPETask) -> float:
    """NOT DP (the model): the exact value of the target at the start distribution.

    Args:
      task: a chain task.

    Returns:
      The target policy's true value.
    """
    assert task.mdp is not None
    return float(task.mdp.initial @ ope.exact_values(task.mdp, task.target))


def _key_name(key: jax.Array) -> str:
    bits = np.asarray(jax.random.key_data(key))
    return hashlib.sha256(bits.tobytes()).hexdigest()[:16]


def _schedule_seed(key: jax.Array) -> int:
    bits = np.asarray(jax.random.bits(key, (4,), jnp.uint32))
    return int.from_bytes(bits.astype("<u4").tobytes(), "little")


def make_candidate(
    ccfg: gpope.GPOPERunConfig,
    plan: privacy.DPPlan,
    data: ope.TrajectoryData,
    cfg: SelectRunConfig,
    cache: Path | None,
    task: gpope.GPOPETask | None = None,
) -> Callable[[jax.Array], tuple[dict[str, Any], float]]:
    """``run(key) -> (release, DP score)``: one candidate of the selection.

    GPOPE at ``ccfg``'s hyper-parameters, then its score; deterministic given ``key``.

    Args:
      ccfg: the candidate's GPOPE config.
      plan: its DP plan.
      data: the sensitive trajectories.
      cfg: the selection's config (its ``score`` section).
      cache: with a folder, a finished run's result is kept there (it is secret: the
        run's score) and a resumed selection reads it; None: nothing is kept.
      task: the candidate's task, for a value score.

    Returns:
      The candidate's run: a key to its release (``theta``, ``w``) and DP score.
    """
    g = ccfg.gpope
    step = ope.StepSize(g.step_size, g.decay_steps, g.decay_power)
    mechanism = score_mechanism(cfg, plan)

    def run(key: jax.Array) -> tuple[dict[str, Any], float]:
        path = None if cache is None else cache / f"{_key_name(key)}.json"
        if path is not None and path.exists():
            stored = json.loads(path.read_text())
            return stored["release"], float(stored["score"])
        k_sched, k_noise, k_score = jax.random.split(key, 3)
        schedule = ope.sample_schedule(plan, _schedule_seed(k_sched))
        res = ope.gpope(
            plan, data, schedule, k_noise, step_size=step, normalization=g.normalization
        )
        if cfg.score.kind == "value":
            assert task is not None
            score = policy_value(task, res.theta)
        else:
            score = dp_score(
                res.theta,
                data,
                g.normalization,
                cfg.score.l2_clip_norm,
                mechanism,
                plan.dataset_size,
                k_score,
            )
        release = {
            "theta": np.asarray(res.theta).tolist(),
            "w": np.asarray(res.w).tolist(),
        }
        if path is not None:
            text = json.dumps({"release": release, "score": score})
            atomic_write_bytes(path, text.encode(), secret=True)
        return release, score

    return run


def _secret(run_dir: Path, cfg: SelectRunConfig) -> privacy.DPSecret:
    """The selection's secret.

    From privacy.noise_seed (not private), else drawn once and kept in
    checkpoints/select/secret.json (owner-only) for a resume.
    """
    if cfg.privacy.noise_seed is not None:
        return privacy.DPSecret.from_seed(cfg.privacy.noise_seed)
    path = private_dir(run_dir / "checkpoints" / "select") / "secret.json"
    if path.exists():
        words = np.asarray(json.loads(path.read_text())["words"], np.uint32)
        return privacy.DPSecret(words, False)
    secret = privacy.DPSecret.fresh()
    text = json.dumps({"words": [int(w) for w in secret.words]})
    atomic_write_bytes(path, text.encode(), secret=True)
    return secret


def _epsilon(event: dp_accounting.DpEvent, delta: float) -> float:
    return float(privacy.compute_epsilon(event, delta, accountant="rdp").epsilon)


def open_ledger(
    cfg: SelectRunConfig,
    run_dir: Path,
    resolved: dict[str, Any],
    dataset_id: str,
    dataset_size: int,
    selection_event: dp_accounting.DpEvent,
) -> privacy.Ledger:
    """Writes ``config.yaml`` and opens the selection's ledger, checked before any run.

    Args:
      cfg: the selection's config.
      run_dir: the run directory.
      resolved: ``cfg`` as a dict (what ``config.yaml`` holds).
      dataset_id: the candidates' one data set.
      dataset_size: its number of records.
      selection_event: the whole selection's event.

    Returns:
      The ledger (its selection entry, if any, is replayed by ``privacy.select``).

    Raises:
      BudgetExceededError: a new selection does not fit the budget.
    """
    p = cfg.privacy
    atomic_write_text(
        run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
    )
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id=dataset_id,
        dataset_size=dataset_size,
        target_epsilon=p.epsilon,
        target_delta=p.delta,
        artifacts=[run_dir / "checkpoints" / "select", run_dir / RELEASE_FILE],
        not_private=not_private_mark(NOT_PRIVATE_SEED, p.noise_seed),
    )
    if not any(r.what == WHAT for r in ledger.releases):
        # The guard in the CLI's terms before anything runs (select checks again).
        ledger.check(selection_event, hint=BUDGET_HINT)
    return ledger


def select_recorded(
    cands: list[Callable[[jax.Array], tuple[dict[str, Any], float]]],
    events: list[dp_accounting.DpEvent],
    reps: privacy.Repetitions,
    secret: privacy.DPSecret,
    ledger: privacy.Ledger,
    keep: Callable[[dict[str, Any]], dict[str, Any]],
) -> tuple[privacy.SelectionResult, list[dict[str, Any]]]:
    """``privacy.select`` over the candidates, recording every run (for the audit).

    Args:
      cands: each candidate's run (key -> release, DP score).
      events: each candidate run's event.
      reps: the distribution of the number of runs.
      secret: the selection's secret (its noise key).
      ledger: the selection's ledger.
      keep: what of a run's release the record keeps.

    Returns:
      The selection's result, and every run in order: ``candidate``, ``score`` and
      ``keep(release)`` (NOT DP).
    """
    history: list[dict[str, Any]] = []

    def recorded(i: int) -> Callable[[jax.Array], tuple[dict[str, Any], float]]:
        def run_one(key: jax.Array) -> tuple[dict[str, Any], float]:
            release, score = cands[i](key)
            history.append({"candidate": i, "score": score, **keep(release)})
            return release, score

        return run_one

    result = privacy.select(
        [recorded(i) for i in range(len(cands))],
        events,
        reps,
        key=secret.noise_key,
        ledger=ledger,
        what=WHAT,
    )
    return result, history


def write_selected(
    path: Path,
    cfg: SelectRunConfig,
    result: privacy.SelectionResult,
    ledger: privacy.Ledger,
    method: str,
    release: Any,
    extra: dict[str, Any] | None = None,
) -> None:
    """Writes the published record of the choice (``selected.json``).

    Args:
      path: where.
      cfg: the selection's config.
      result: what ``privacy.select`` returned.
      ledger: the selection's ledger (its head is recorded).
      method: the record's ``method``.
      release: the record's ``release``.
      extra: keys after ``release`` (the pipeline's own).
    """
    grid = cfg.candidates.candidates()
    chosen = result.candidate
    atomic_write_text(
        path,
        json.dumps(
            {
                "method": method,
                "candidate": chosen,
                "hyper_parameters": None if chosen is None else grid[chosen],
                "score": result.score,
                "release": release,
                **(extra or {}),
                "score_kind": cfg.score.kind,
                "private": cfg.privacy.noise_seed is None,
                "ledger_head": ledger.head,
            },
            indent=2,
        ),
    )


def selection_report(
    cfg: SelectRunConfig,
    resolved: dict[str, Any],
    reps: privacy.Repetitions,
    events: list[dp_accounting.DpEvent],
    selection_event: Any,
    result: privacy.SelectionResult,
    ledger: privacy.Ledger,
    run: dict[str, Any],
    publishable: list[str],
) -> dict[str, Any]:
    """The selection's report (without ``wall_time_s`` and ``audit``).

    Args:
      cfg: the selection's config.
      resolved: ``cfg`` as a dict.
      reps: the distribution of the number of runs.
      events: each candidate run's event.
      selection_event: ``reps.event(events)``.
      result: what ``privacy.select`` returned.
      ledger: the selection's ledger (its report is the spend).
      run: the report's ``selection.run`` (one run's mechanisms).
      publishable: the files that may be published.

    Returns:
      The report: config, grid, selection, choice, spend, naive composition, release.
    """
    p = cfg.privacy
    grid = cfg.candidates.candidates()
    chosen = result.candidate
    spent = ledger.report()
    report: dict[str, Any] = {
        "config": resolved,
        "candidates": grid,
        "num_candidates": len(grid),
        "pipeline": cfg.candidates.pipeline,
        "selection": {
            "mechanism": "repeat_and_select",
            **reps.describe(),
            "run": run,
            # A heterogeneous grid: each candidate's own epsilon, and one run's
            # (pointwise max of their RDP curves, accounted as such).
            "run_epsilon": _epsilon(selection_event.event, p.delta),
            "candidate_epsilons": [_epsilon(e, p.delta) for e in events],
            "heterogeneous": heterogeneous(events),
            "event": privacy.event_to_dict(selection_event),
        },
        "chosen": {
            "candidate": chosen,
            "hyper_parameters": None if chosen is None else grid[chosen],
            "score": result.score,
        },
        "epsilon_spent": spent["rdp"].get("epsilon", math.inf),
        "delta": p.delta,
        "naive": {
            "every_candidate_once": _epsilon(
                dp_accounting.ComposedDpEvent(list(events)), p.delta
            ),
            "mean_runs_composed": _epsilon(reps.naive_event(events), p.delta),
        },
        "privacy": spent,
        "release": {
            "publishable": publishable,
            "never_publish": ["audit/", "checkpoints/"],
        },
    }
    if p.noise_seed is not None:
        report["warning"] = NOT_PRIVATE_SEED
    return report


def heterogeneous(events: list[dp_accounting.DpEvent]) -> bool:
    """Whether the candidates' events differ (the report then lists each run's)."""
    return len(set(map(str, map(privacy.event_to_dict, events)))) > 1


def write_report(
    run_dir: Path, report: dict[str, Any], audit: dict[str, Any], t0: float
) -> dict[str, Any]:
    """Writes the NOT DP audit and the report (JSON and Markdown).

    Args:
      run_dir: the run directory.
      report: :func:`selection_report`'s report (gets ``wall_time_s``, ``audit``).
      audit: the NOT DP audit (``audit/``, never published).
      t0: the run's start (``time.time()``).

    Returns:
      The report with ``audit``.
    """
    report["wall_time_s"] = time.time() - t0
    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    atomic_write_text(audit_dir / "NOT_DP_README.txt", AUDIT_NOTICE)
    atomic_write_text(
        audit_dir / "audit.json", json.dumps(audit, indent=2, default=float)
    )
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    report["audit"] = audit
    from privrl_jax.pipelines.select.report import render_markdown  # noqa: PLC0415

    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report


def run(cfg: SelectRunConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) a private selection into ``run_dir``.

    Every candidate's config is loaded and checked, and the whole selection's epsilon
    is checked against ``privacy.epsilon``, before any candidate runs. A rerun with the
    same config resumes: the ledger entry is found (nothing is charged twice) and the
    same release is replayed.

    Args:
      cfg: the selection's config.
      run_dir: the run directory (module doc: what it gets).

    Returns:
      The report (+ ``audit``).

    Raises:
      ValueError: a bad grid (unknown key, candidates reading different data).
      BudgetExceededError: the selection does not fit the budget; nothing ran.
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: SelectRunConfig, run_dir: Path, topo: Any) -> dict[str, Any]:
    if cfg.candidates.pipeline == "privorl_n":
        from privrl_jax.pipelines.select import privorl_n  # noqa: PLC0415

        return privorl_n.run(cfg, run_dir, topo)
    if cfg.candidates.pipeline == "maze_agent":
        from privrl_jax.pipelines.select import maze_policies  # noqa: PLC0415

        return maze_policies.run(cfg, run_dir, topo)
    if not topo.is_primary:
        raise ValueError("privrl select runs in one process; drop the launcher.")
    t0 = time.time()
    resolved = to_dict(cfg)
    refuse_other_run(run_dir, resolved, "select")
    configs = candidate_configs(cfg)
    plans = [gpope.make_plan(c) for c in configs]
    events = [run_event(cfg, p) for p in plans]
    ids = {gpope.dataset_id(c) for c in configs}
    if len(ids) > 1:
        raise ValueError(
            "the candidates read different data sets; a grid may vary only the "
            "method's hyper-parameters."
        )
    reps = repetitions(cfg)
    # One event for a homogeneous grid; else the pointwise max of the candidates'
    # RDP curves (privacy.Repetitions.event), which Papernot-Steinke's theorems take.
    selection_event = reps.event(events)
    release_file = run_dir / RELEASE_FILE
    ledger = open_ledger(
        cfg, run_dir, resolved, ids.pop(), plans[0].dataset_size, selection_event
    )
    if cfg.score.kind == "value" and configs[0].env.name != "chain":
        raise ValueError(
            "score.kind=value needs the chain (its public start distribution); "
            f"the candidates' env is {configs[0].env.name}."
        )
    secret = _secret(run_dir, cfg)
    tasks, datas = _tasks_and_data(configs)
    cache = private_dir(run_dir / "checkpoints" / "select" / "runs")
    cands = [
        make_candidate(c, q, d, cfg, cache, t)
        for c, q, d, t in zip(configs, plans, datas, tasks, strict=True)
    ]
    result, runs = select_recorded(
        cands, events, reps, secret, ledger, lambda r: {"theta": r["theta"]}
    )
    write_selected(
        release_file,
        cfg,
        result,
        ledger,
        "private selection over GPOPE",
        result.release,
        {"features": gpope.features_name(configs[0])},
    )
    mixed = heterogeneous(events)
    run_section = {
        "gpope": [q.describe() for q in plans] if mixed else plans[0].describe(),
        "score": score_mechanism(cfg, plans[0]).describe()
        | {"l2_clip_norm": cfg.score.l2_clip_norm},
    }
    report = selection_report(
        cfg,
        resolved,
        reps,
        events,
        selection_event,
        result,
        ledger,
        run_section,
        [RELEASE_FILE, "ledger.json", "report.json", "config.yaml"],
    )
    audit = _audit(cfg, configs, plans, datas, tasks, result, runs, secret)
    return write_report(run_dir, report, audit, t0)


def _tasks_and_data(
    configs: list[gpope.GPOPERunConfig],
) -> tuple[list[gpope.GPOPETask], list[ope.TrajectoryData]]:
    """Each candidate's public task and data, built once per distinct env section.

    A policy grid changes the target, hence the importance ratios; the trajectories
    are the same, from the same public seed.
    """
    built: dict[str, tuple[gpope.GPOPETask, ope.TrajectoryData]] = {}
    tasks, datas = [], []
    for c in configs:
        key = json.dumps(to_dict(c.env), sort_keys=True)
        if key not in built:
            task = gpope.build_task(c)
            built[key] = (task, gpope.collect_data(task))
        tasks.append(built[key][0])
        datas.append(built[key][1])
    return tasks, datas


def _audit(
    cfg: SelectRunConfig,
    configs: list[gpope.GPOPERunConfig],
    plans: list[privacy.DPPlan],
    datas: list[ope.TrajectoryData],
    tasks: list[gpope.GPOPETask],
    result: privacy.SelectionResult,
    runs: list[dict[str, Any]],
    secret: privacy.DPSecret,
) -> dict[str, Any]:
    """The audit (NOT DP): K, every run, and the chosen release's true error.

    With ``audit.every_candidate``, also the true error of one audit run of every
    candidate, and the oracle: the least true MSE (for a value score, the candidate
    policy of highest true value).
    """
    value = cfg.score.kind == "value"

    def truth(i: int, theta: Any) -> dict[str, float]:
        audit = gpope.audit_release(tasks[i], np.asarray(theta), datas[i])
        out = {"mse": float(audit["mse_vs_exact"])}
        if value:
            out["true_value"] = true_policy_value(tasks[i])
        return out

    history = [
        {
            "candidate": r["candidate"],
            "score": r["score"],
            **truth(r["candidate"], r["theta"]),
        }
        for r in runs
    ]
    chosen = result.candidate
    out: dict[str, Any] = {
        "notice": AUDIT_NOTICE.strip(),
        "runs": result.audit["runs"],
        "history": history,
        "chosen_mse": None
        if chosen is None
        else truth(chosen, result.release["theta"])["mse"],
    }
    if value:
        values = [true_policy_value(t) for t in tasks]
        best = int(np.argmax(values))
        out["true_values"] = values
        out["oracle"] = {"candidate": best, "true_value": values[best]}
        # The non-data baselines: a uniformly random candidate (its expected value)
        # and the grid's last one.
        out["random_true_value"] = float(np.mean(values))
        out["last_true_value"] = values[-1]
        if chosen is not None:
            out["chosen_true_value"] = values[chosen]
            out["regret"] = values[best] - values[chosen]
    if cfg.audit.every_candidate:
        # Keys apart from the selection's (AUDIT_STREAM): another draw of each one.
        audit_key = jax.random.fold_in(secret.noise_key, AUDIT_STREAM)
        mses = []
        for i, (c, plan) in enumerate(zip(configs, plans, strict=True)):
            fn = make_candidate(c, plan, datas[i], cfg, None, tasks[i])
            release, score = fn(jax.random.fold_in(audit_key, i))
            mses.append({**truth(i, release["theta"]), "score": score})
        out["every_candidate"] = mses
        out["mean_mse_over_candidates"] = float(np.mean([m["mse"] for m in mses]))
        if value:
            # The scorer's quality apart from the random number of runs: the true
            # value of the best-scoring candidate when each ran once.
            top = int(np.argmax([m["score"] for m in mses]))
            out["every_candidate_choice"] = {
                "candidate": top,
                "true_value": out["true_values"][top],
            }
        if not value:
            best = int(np.argmin([m["mse"] for m in mses]))
            out["oracle"] = {"candidate": best, "mse": mses[best]["mse"]}
            if out["chosen_mse"] is not None:
                out["gap_to_oracle"] = out["chosen_mse"] - mses[best]["mse"]
    return out
