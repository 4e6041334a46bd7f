"""GPOPE's run: the plan, Algorithm 1 through the DP loop, the release and the report.

See :mod:`privrl_jax.pipelines.gpope` for what a run writes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml

from privrl_jax import ope, privacy
from privrl_jax.pipelines._audit_run import audit_into_report
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._dp_loop import DPSecret, run_dp_loop
from privrl_jax.pipelines._gpope_config import GPOPEConfig, GPOPERunConfig
from privrl_jax.pipelines._rundir import (
    atomic_write_text,
    not_private_mark,
    refuse_other_run,
    run_in_dir,
    wait_for_primary,
)
from privrl_jax.pipelines.gpope.audit import AUDIT_NOTICE, audit_release
from privrl_jax.pipelines.gpope.report import (
    AUDIT_PLOT,
    VALUES_PLOT,
    plot_audit_values,
    plot_release_values,
    render_markdown,
)
from privrl_jax.pipelines.gpope.task import (
    build_task,
    collect_data,
    dataset_id,
    features_name,
)

DP_STEP = "GPOPE iteration"
WEIGHTS_FILE = "weights.json"
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the DP noise and the sampled trajectories. Use this run for tests and "
    "reproduction only."
)


def make_plan(cfg: GPOPERunConfig) -> privacy.DPPlan:
    """GPOPE's plan: the configured trajectory sampler, clip norm h, N steps, sigma."""
    g, p = cfg.gpope, cfg.privacy
    batch = g.batch_size if g.sampler == "poisson" else 1.0
    return _calibrated_plan(
        g.sampler,
        cfg.env.num_trajectories,
        batch,
        g.microbatch_size,
        g.l2_clip_norm,
        g.steps,
        p.epsilon,
        p.delta,
        p.accountant,
    )


@functools.lru_cache(maxsize=32)
def _calibrated_plan(
    sampler_name: str,
    m: int,
    batch: float,
    microbatch: int,
    clip: float,
    steps: int,
    epsilon: float,
    delta: float,
    accountant: str,
) -> privacy.DPPlan:
    # Cached: calibration is a deterministic search of seconds, and a rerun (resume)
    # asks for the same plan again.
    if sampler_name == "uniform_one":
        sampler = privacy.UniformOneSampler(dataset_size=m)
    else:
        sampler = privacy.PoissonSampler(
            dataset_size=m, sampling_rate=batch / m, microbatch_size=microbatch
        )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=clip, steps=steps)
    return plan.calibrate(epsilon, delta, accountant)


def _step_size(g: GPOPEConfig) -> ope.StepSize:
    return ope.StepSize(g.step_size, g.decay_steps, g.decay_power)


def _gpope_steps(
    cfg: GPOPERunConfig,
    plan: privacy.DPPlan,
    data: ope.TrajectoryData,
    run_dir: Path,
    ledger: privacy.Ledger | None,
    topo: privacy.Topology,
) -> tuple[ope.GPOPEState, DPSecret]:
    """Algorithm 1 through the DP loop; returns the final state and the run's secret.

    The method is the library's (``ope.gpope_method``): with the run's secret, the
    release equals ``ope.gpope(plan, data, ope.sample_schedule(plan,
    secret.sampling_seed), secret.noise_key, ...)`` bit for bit.
    """
    g, p = cfg.gpope, cfg.privacy
    method = ope.gpope_method(plan, _step_size(g))
    units = ope.gpope_units(data, g.normalization)
    secret = (
        DPSecret.fresh() if p.noise_seed is None else DPSecret.from_seed(p.noise_seed)
    )
    return run_dp_loop(
        plan,
        method,
        ope.gpope_init(data.transitions.phi_tm1.shape[-1]),
        topo.local_block(units),
        ckpt=Checkpoints(run_dir / "checkpoints" / "dp"),
        ledger=ledger,
        what=DP_STEP,
        secret=secret,
        loss_key=jax.random.key(cfg.seed),
        item_mask=topo.local_block(data.mask),
        checkpoint_every=g.checkpoint_every,
        accountant=p.accountant,
        desc=f"GPOPE (eps={p.epsilon:g})",
        divergence_hint="lower gpope.step_size (or use gpope.decay_steps)",
        topology=topo,
        budget_hint=(
            "Raise privacy.epsilon (it calibrates less noise), take fewer steps "
            "(gpope.steps), or start a new run directory with a larger budget."
        ),
    )


def _theorem1(cfg: GPOPERunConfig, plan: privacy.DPPlan) -> dict[str, Any]:
    p = cfg.privacy
    out: dict[str, Any] = {
        "assumes": "one trajectory drawn uniformly per step; replace-one neighbours "
        "(sensitivity 2h); moments accountant with the paper's Lemma-1 bound",
    }
    if math.isinf(p.epsilon):
        return out | {"paper_sigma": None, "noise_multiplier": None}
    t1 = ope.theorem1_sigma(
        p.epsilon, p.delta, steps=plan.steps, dataset_size=plan.dataset_size
    )
    if cfg.gpope.sampler == "uniform_one":
        # The theorem's own mode and relation: what dp-accounting's accountant says
        # its sigma spends (an upper bound; above the target, the accountant cannot
        # certify the theorem's sigma). experiments/gpope_theorem1.yaml reads it.
        at_t1 = dataclasses.replace(plan, noise_multiplier=(t1.noise_multiplier,))
        spent = at_t1.epsilon(p.delta, p.accountant).epsilon
        out |= {
            "accountant_epsilon": spent,
            "accountant_epsilon_ratio": spent / p.epsilon,
        }
    return out | {
        "paper_sigma": t1.paper_sigma,  # noise std / h, the paper's unit
        "noise_multiplier": t1.noise_multiplier,  # noise std / 2h: comparable with ours
        "noise_std": t1.paper_sigma * plan.l2_clip_norms[0],
        "asymptotic_paper_sigma": t1.asymptotic_paper_sigma,
        # The proof's Lemma-1 bound holds only for sigma^2 >= 1 / ln 2 (see
        # ope.theorem1_sigma); below it the theorem's sigma is not a guarantee.
        "lemma1_condition_holds": t1.paper_sigma**2 >= 1 / math.log(2),
    }


def run(cfg: GPOPERunConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) GPOPE into ``run_dir``; returns the report (+ ``audit``).

    The directory is locked while the run is alive; every input is checked before
    anything is written; a rerun with a different config is refused. Under
    ``jax.distributed``
    every process runs it with the same config and directory: each clips the
    trajectories of its own block, process 0 alone locks the directory and writes the
    ledger, the weights and the reports; the others return ``{"process_id": p}``
    (docs/multihost.md).
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: GPOPERunConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = to_dict(cfg)
    cfg_file = run_dir / "config.yaml"
    if topo.is_primary:  # process 0 checks and owns the directory
        refuse_other_run(run_dir, resolved, "GPOPE", mutable=("audit",))
    t0 = time.time()
    plan = make_plan(cfg)  # validates delta against m before anything is written
    if topo.is_primary:
        atomic_write_text(cfg_file, yaml.safe_dump(resolved, sort_keys=False))

    task = build_task(
        cfg
    )  # public: model or env, policies, features, evaluation states
    data = collect_data(task)

    weights_file = run_dir / WEIGHTS_FILE
    ledger = None
    if topo.is_primary:
        ledger = privacy.Ledger.open(
            run_dir,
            dataset_id=dataset_id(cfg),
            dataset_size=plan.dataset_size,
            target_epsilon=cfg.privacy.epsilon,
            target_delta=cfg.privacy.delta,
            artifacts=[run_dir / "checkpoints" / "dp", weights_file],
            not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
        )
        if weights_file.exists():
            head = json.loads(weights_file.read_text()).get("ledger_head", "")
            ledger.require_head(str(head), f"the release {weights_file}")
    # The others create their part of checkpoints/dp only once process 0 has set the
    # directory up (config.yaml, ledger.json).
    wait_for_primary(topo, "privrl-run-dir-ready")
    state, secret = _gpope_steps(cfg, plan, data, run_dir, ledger, topo)
    if not topo.is_primary:
        return {"process_id": topo.process_id}
    theta, w = np.asarray(state.theta), np.asarray(state.w)
    private = plan.private and not secret.fixed
    atomic_write_text(
        weights_file,
        json.dumps(
            {
                "method": "GPOPE",
                "env": cfg.env.name,
                "features": features_name(cfg),
                "theta": theta.tolist(),
                "w": w.tolist(),
                "private": private,
                "epsilon": cfg.privacy.epsilon,
                "delta": cfg.privacy.delta,
                "ledger_head": ledger.head,
            },
            indent=2,
        ),
    )

    acc = cfg.privacy.accountant
    spent = ledger.report()
    report: dict[str, Any] = {
        "config": resolved,
        "gpope": {
            **plan.describe(),
            "noise_multiplier": plan.noise_multipliers[0],
            "noise_std": plan.noise_stds[0],
            "private": private,
            "noise_secret": "fixed by privacy.noise_seed (not private)"
            if secret.fixed
            else "drawn from os.urandom; stored only in checkpoints/",
            "dataset_size_source": "env.num_trajectories (declared, public)",
        },
        "theorem1": _theorem1(cfg, plan),
        # From the ledger's own report: one accountant pass (about 0.4 s each for the
        # sampled-without-replacement event).
        "epsilon_spent": spent[acc].get("epsilon", math.inf)
        if plan.private
        else math.inf,
        "accountant": acc,
        "privacy": spent,
        "weights": {"theta": theta.tolist(), "w": w.tolist()},
        "release": {
            "publishable": [WEIGHTS_FILE, "ledger.json", "report.json", "config.yaml"]
            + ([VALUES_PLOT] if cfg.plots else []),
            "never_publish": ["audit/", "checkpoints/"],
        },
        "plots": {"release": [VALUES_PLOT], "audit": [AUDIT_PLOT]}
        if cfg.plots
        else {"release": [], "audit": []},
    }
    if not private:
        report["warning"] = (
            NOT_PRIVATE_SEED
            if secret.fixed
            else ("NOT PRIVATE: privacy.epsilon = inf runs without noise.")
        )
    audit_into_report(cfg.audit, run_dir, ledger, report, accountant=acc)
    report["wall_time_s"] = time.time() - t0

    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    atomic_write_text(audit_dir / "NOT_DP_README.txt", AUDIT_NOTICE)
    audit = audit_release(task, theta, data)
    if cfg.plots:
        # Release first, from theta and public features only; the audit plot reads
        # the audit dict (truth and the data's LSTD).
        plot_release_values(task, theta, report["gpope"], run_dir / VALUES_PLOT)
        plot_audit_values(cfg, audit, run_dir / AUDIT_PLOT)
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    atomic_write_text(
        audit_dir / "audit.json", json.dumps(audit, indent=2, default=float)
    )
    report["audit"] = audit
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report
