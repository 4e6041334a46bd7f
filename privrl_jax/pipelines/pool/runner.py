"""POOL's run: the ledger (a rho budget), the secret, the release, evaluation, report.

See :mod:`privrl_jax.pipelines.pool` for what a run writes.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import jax
import yaml

from privrl_jax import privacy
from privrl_jax.envs import collect_inventory_data
from privrl_jax.pipelines._audit_run import audit_into_report
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._pool_config import PoolRunConfig
from privrl_jax.pipelines._rundir import (
    RunLock,
    atomic_write_text,
    clean_stale_temp_files,
    not_private_mark,
    refuse_other_run,
)
from privrl_jax.pipelines.pool.evaluate import evaluate
from privrl_jax.pipelines.pool.release import (
    POLICY_FILE,
    POLICY_META,
    load_policy,
    plan,
    write_policy,
    write_policy_meta,
)
from privrl_jax.pipelines.pool.report import render_markdown, write_plots
from privrl_jax.pipelines.pool.task import (
    PoolTask,
    build_task,
    dataset_id,
    make_mechanism,
)

SECRET_DIR = "checkpoints/dp"  # the secret store (privacy.load_or_create_secret)
# Where runs before the shared store kept their secret: never read, never replaced.
OLD_SECRET_FILE = "checkpoints/secret.npz"
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the DP noise. Use this run for tests and reproduction only."
)
WHAT = {
    "pool": "POOL statistics (counts, next-value sums, squares)",
    "grid": "grid statistics (counts, next-value sums, squares)",
    "input_perturbation": "input perturbation (noisy episodes)",
    "output_perturbation": "output perturbation (noisy Q tables)",
}
PUBLISHABLE = (
    POLICY_FILE,
    POLICY_META,
    "ledger.json",
    "report.json",
    "report.md",
    "config.yaml",
    "plots/",
)


def run(cfg: PoolRunConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs POOL (or a baseline) into ``run_dir``; returns the report.

    The directory is locked while the run is alive and a rerun with another config is
    refused; a rerun of a finished run spends nothing.
    """
    run_dir = Path(run_dir)
    with RunLock(run_dir):
        clean_stale_temp_files(run_dir)
        return _run(cfg, run_dir)


def open_ledger(cfg: PoolRunConfig, run_dir: Path) -> privacy.Ledger:
    """The run directory's ledger, its budget ``cfg.rho_budget`` in zCDP rho."""
    return privacy.Ledger.open(
        run_dir,
        dataset_id=dataset_id(cfg),
        dataset_size=cfg.env.num_episodes,
        rho_budget=cfg.rho_budget,
        target_delta=cfg.privacy.delta,
        artifacts=[run_dir / POLICY_FILE, run_dir / SECRET_DIR],
        not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
    )


def release_secret(
    cfg: PoolRunConfig,
    run_dir: Path,
    ledger: privacy.Ledger,
    mechanism: privacy.GaussianMechanism,
) -> privacy.DPSecret:
    """The release's secret, its budget checked and its one ledger entry recorded.

    In this order: the budget before any secret or noise exists, the secret on disk
    before the entry, the entry before the release is computed, so a run killed at any
    point reruns to the same release and records it once.
    """
    if (run_dir / OLD_SECRET_FILE).exists() and not (run_dir / SECRET_DIR).exists():
        # A new secret here could recompute a recorded release with other noise.
        raise privacy.LedgerError(
            f"{run_dir / OLD_SECRET_FILE} holds this run's secret in the format of an "
            "older privrl_jax, which this one does not read; finish the run with that "
            "version or start a new run directory."
        )
    released = any(r.what == WHAT[cfg.pool.method] for r in ledger.releases)
    if not released:
        ledger.check(mechanism.event())
    secret = privacy.load_or_create_secret(
        privacy.Checkpoints(run_dir / SECRET_DIR),
        ledger,
        noise_seed=cfg.privacy.noise_seed,
    )
    if not released:
        ledger.record(
            mechanism.event(), what=WHAT[cfg.pool.method], params=mechanism.describe()
        )
    return secret


def _stage(t0: float, what: str) -> None:
    # POOL's stages are single jitted calls, with no loop to put a bar on: say each as
    # it ends (stderr, so --json output stays one object).
    print(f"POOL: {what} ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)


def _run(cfg: PoolRunConfig, run_dir: Path) -> dict[str, Any]:
    resolved = to_dict(cfg)
    refuse_other_run(run_dir, resolved, "POOL", mutable=("audit",))
    t0 = time.time()
    task = build_task(cfg)  # validates the demand file first
    mechanism = make_mechanism(cfg, task.geom)
    e = cfg.env
    privacy.validate_delta(cfg.privacy.delta, dataset_size=e.num_episodes)
    atomic_write_text(
        run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
    )
    # Simulated sensitive data from a public seed (a data holder loads its records).
    data = collect_inventory_data(
        jax.random.fold_in(jax.random.key(cfg.seed), 0),
        task.params,
        task.behaviour,
        e.num_episodes,
    )
    policy_file, meta_file = run_dir / POLICY_FILE, run_dir / POLICY_META
    ledger = open_ledger(cfg, run_dir)
    if meta_file.exists():
        ledger.require_head(
            str(json.loads(meta_file.read_text()).get("ledger_head", "")),
            f"the release {meta_file}",
        )
    secret = None
    key = jax.random.key(0)  # unused without a mechanism: no noise
    if mechanism is not None:
        secret = release_secret(cfg, run_dir, ledger, mechanism)
        key = secret.noise_key
    if policy_file.exists():
        q_tables = load_policy(policy_file)
    else:
        _stage(
            t0,
            f"collected {e.num_episodes} episodes; planning (the first call compiles)",
        )
        q_tables = plan(cfg, data, task.params, task.geom, task.actions, mechanism, key)
        _stage(t0, "planned")
        write_policy(
            policy_file, q_tables, task.actions, task.params.boundary, task.geom
        )
    private = mechanism is not None and not (secret is not None and secret.fixed)
    write_policy_meta(
        meta_file, cfg, task.geom, private=private, ledger_head=ledger.head
    )

    _stage(t0, "evaluating the policy")
    evaluation = evaluate(task, q_tables)
    _stage(t0, "evaluated")
    report: dict[str, Any] = {
        "config": resolved,
        "privacy": _privacy_section(cfg, ledger, mechanism, secret, private),
        "evaluation": evaluation,
        "release": {
            "publishable": list(PUBLISHABLE),
            "never_publish": ["checkpoints/"],
        },
    }
    if not private:
        report["warning"] = (
            NOT_PRIVATE_SEED
            if secret is not None and secret.fixed
            else "NOT PRIVATE: pool.method=non_private adds no noise."
        )
    audit_into_report(cfg.audit, run_dir, ledger, report)
    report["wall_time_s"] = time.time() - t0
    _write_reports(run_dir, task, q_tables, report)
    return report


def _privacy_section(
    cfg: PoolRunConfig,
    ledger: privacy.Ledger,
    mechanism: privacy.GaussianMechanism | None,
    secret: privacy.DPSecret | None,
    private: bool,
) -> dict[str, Any]:
    spent = ledger.report()
    if mechanism is None:
        rho = epsilon = epsilon_of_rho = math.inf
    else:
        rho = ledger.rho()
        epsilon = spent["rdp"].get("epsilon", math.inf)
        epsilon_of_rho = privacy.zcdp_epsilon(rho, cfg.privacy.delta)
    return {
        "rho": rho,
        "rho_budget": cfg.rho_budget,
        "delta": cfg.privacy.delta,
        "epsilon": epsilon,
        "epsilon_of_rho_zcdp": epsilon_of_rho,
        "mechanism": mechanism.describe() if mechanism is not None else None,
        "noise_std": mechanism.noise_std if mechanism is not None else 0.0,
        "private": private,
        "noise_secret": (
            "fixed by privacy.noise_seed (not private)"
            if secret is not None and secret.fixed
            else "drawn from os.urandom; stored only in checkpoints/"
        ),
        "ledger": spent,
    }


def _write_reports(
    run_dir: Path, task: PoolTask, q_tables: jax.Array, report: dict[str, Any]
) -> None:
    write_plots(run_dir, task, q_tables, report["evaluation"])
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    atomic_write_text(run_dir / "report.md", render_markdown(report))
