"""The release of a synthesis run and its report files.

The ledger, ``synthetic.hdf5``, the release report, the audit folder and the writing of
report.json, audit.json and report.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml

from privrl_jax import data, privacy
from privrl_jax.pipelines._audit_run import audit_into_report
from privrl_jax.pipelines._rundir import (
    atomic_write_text,
    not_private_mark,
    wait_for_primary,
)

NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can "
    "recompute the DP "
    "noise and the batches. Use this run for tests and reproduction only."
)
AUDIT_NOTICE = (
    "NOT DIFFERENTIALLY PRIVATE. Everything in this folder was computed from the "
    "sensitive data "
    "without a DP mechanism (fidelity against sensitive rows, agents trained on real "
    "data, the "
    "membership-inference attack, plots of real rows). It audits the release for the "
    "data owner; "
    "never publish it.\n"
)
RELEASE_FILES = ["synthetic.hdf5", "ledger.json", "report.json", "config.yaml"]


def open_ledger(
    cfg: Any, run_dir: Path, dataset_id: str, n: int, topo: privacy.Topology
) -> privacy.Ledger | None:
    """Process 0's ledger of the run over ``n`` units.

    Its artifacts are the DP checkpoints and the release. The other processes write none
    (None); they return once process 0 has opened it, so nothing of theirs is in the
    directory before.
    """
    if not topo.is_primary:
        wait_for_primary(topo, "privrl-run-dir-ready")
        return None
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id=dataset_id,
        dataset_size=n,
        target_epsilon=cfg.privacy.epsilon,
        target_delta=cfg.privacy.delta,
        artifacts=[run_dir / "checkpoints" / "dp", run_dir / "synthetic.hdf5"],
        not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
    )
    wait_for_primary(topo, "privrl-run-dir-ready")
    return ledger


def noise_secret(cfg: Any) -> privacy.DPSecret:
    """The run's noise secret: from the OS, or fixed by ``privacy.noise_seed``.

    A fixed secret makes the run not private.
    """
    seed = cfg.privacy.noise_seed
    if seed is None:
        return privacy.DPSecret.fresh()
    return privacy.DPSecret.from_seed(seed)


def write_config(
    run_dir: Path, resolved: dict[str, Any], topo: privacy.Topology
) -> None:
    """Write ``config.yaml`` (part of the release).

    Process 0 writes it once every input is checked.
    """
    if topo.is_primary:
        atomic_write_text(
            run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
        )


def release(
    cfg: Any,
    run_dir: Path,
    ledger: privacy.Ledger,
    synthesize: Callable[[], data.Transitions],
    *,
    generator: str,
    private: bool,
    **metadata: Any,
) -> data.Transitions:
    """Write or reuse ``synthetic.hdf5``.

    Reused when it exists (after checking it was made after the ledger's last step),
    else ``synthesize()`` written with its metadata (``metadata`` after the common
    keys).
    """
    syn_file = run_dir / "synthetic.hdf5"
    if syn_file.exists():
        ledger.require_head(
            str(data.read_hdf5_metadata(syn_file).get("ledger_head", "")),
            f"the release {syn_file}",
        )
        return jax.tree_util.tree_map(np.asarray, data.load_hdf5(syn_file))
    synthetic = synthesize()
    data.save_hdf5(
        syn_file,
        synthetic,
        metadata={
            "generator": generator,
            "epsilon": cfg.privacy.epsilon,
            "delta": cfg.privacy.delta,
            "private": private,
            "ledger_head": ledger.head,
            **metadata,
        },
    )
    return synthetic


def release_report(
    cfg: Any,
    resolved: dict[str, Any],
    info: dict[str, Any],
    ledger: privacy.Ledger,
    **sections: Any,
) -> dict[str, Any]:
    """The release's report.

    Config, DP plan (``info``), ledger report, the pipeline's own ``sections``, what may
    be published, and a warning when the run is not private.
    """
    report: dict[str, Any] = {
        "config": resolved,
        "finetune": info,
        "privacy": ledger.report(),
        **sections,
        "release": {
            "publishable": list(RELEASE_FILES),
            "never_publish": ["audit/", "checkpoints/"],
        },
    }
    if not info["private"]:
        report["warning"] = (
            NOT_PRIVATE_SEED
            if cfg.privacy.noise_seed is not None
            else ("NOT PRIVATE: privacy.epsilon = inf trains without noise.")
        )
    return report


def epsilon_audit(
    cfg: Any, run_dir: Path, ledger: privacy.Ledger, report: dict[str, Any]
) -> None:
    """The run's ``audit`` section carried out (see `_audit_run.audit_into_report`)."""
    audit_into_report(
        cfg.audit,
        run_dir,
        ledger,
        report,
        accountant=getattr(cfg.privacy, "accountant", "rdp"),
    )


def open_audit(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Open ``audit/`` with its NOT_DP_README.txt.

    Returns the directory and the audit report's first entry (the notice).
    """
    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    atomic_write_text(audit_dir / "NOT_DP_README.txt", AUDIT_NOTICE)
    return audit_dir, {"notice": AUDIT_NOTICE.strip()}


def write_reports(
    run_dir: Path,
    report: dict[str, Any],
    audit: dict[str, Any],
    t0: float,
    render_markdown: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """Write report.json (the release), audit/audit.json and report.md.

    report.md holds both, labelled. Returns the report with the audit under ``audit``.
    """
    report["wall_time_s"] = time.time() - t0
    atomic_write_text(
        run_dir / "report.json", json.dumps(report, indent=2, default=float)
    )
    atomic_write_text(
        run_dir / "audit" / "audit.json", json.dumps(audit, indent=2, default=float)
    )
    report["audit"] = audit
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report
