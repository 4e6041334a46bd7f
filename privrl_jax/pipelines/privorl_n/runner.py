"""PrivORL-n's run: inputs, pre-training, DP fine-tuning, release, report, audit.

Inputs are checked before anything is written.

See :mod:`privrl_jax.pipelines.privorl_n` for what a run writes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax

from privrl_jax import privacy
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._privorl_n_config import PrivORLNConfig
from privrl_jax.pipelines._rundir import run_in_dir
from privrl_jax.pipelines._synth.inputs import begin_run, check_units
from privrl_jax.pipelines._synth.release import (
    epsilon_audit,
    open_audit,
    open_ledger,
    release,
    release_report,
    write_config,
    write_reports,
)
from privrl_jax.pipelines._synth.scores import agent_scores
from privrl_jax.pipelines.privorl_n.audit import audit_release
from privrl_jax.pipelines.privorl_n.report import render_markdown
from privrl_jax.pipelines.privorl_n.task import build_task, dataset_id, load_data
from privrl_jax.pipelines.privorl_n.train import (
    finetune,
    pretrain,
    pretrain_dir,
    synthesize,
)


def run(cfg: PrivORLNConfig, run_dir: str | Path) -> dict[str, Any]:
    """Run (or resume) PrivORL-n into ``run_dir``.

    Returns the report dict (release + ``audit``).

    A finished or interrupted run may be resumed with a different ``eval`` section: the
    evaluation reads the release and the sensitive data but changes neither, so the
    release is reused and only the reports are recomputed. Any other difference is
    refused. The directory is locked while the run is alive (a second run into it fails
    at once), and every input is checked before anything is written into it.

    Under ``jax.distributed`` every process calls ``run`` with the same config and
    directory (on a filesystem all see): each trains on its block of the sensitive
    transitions, process 0 alone locks the directory, writes the ledger, samples the
    release and evaluates it; the others return ``{"process_id": p}``.
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: PrivORLNConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = begin_run(cfg, run_dir, topo, "PrivORL-n")
    t0 = time.time()
    # Public randomness only: data split, pre-training, losses.
    key = jax.random.key(cfg.seed)

    public, sensitive, holdout = load_data(cfg)
    check_units(
        cfg, len(sensitive), "transitions", f"{cfg.data.holdout_size}-row holdout"
    )
    task = build_task(cfg, public, sensitive)
    pre_dir = pretrain_dir(cfg, run_dir) if cfg.pretrain.steps > 0 else None
    # Everything is validated: from here on the run writes into its directory.
    write_config(run_dir, resolved, topo)
    sens_x = task.normalise(task.encode(sensitive))
    ledger = open_ledger(cfg, run_dir, dataset_id(cfg), len(sensitive), topo)

    params = task.init_params
    pre_params = None
    if pre_dir is not None:
        pre_state = pretrain(
            task, params, Checkpoints(pre_dir), jax.random.fold_in(key, 100)
        )
        # Fine-tuning starts from the pre-trained EMA weights (what pre-training would
        # sample with).
        params = pre_params = pre_state.ema_params
    state, dp_info = finetune(
        task, params, sens_x, run_dir, ledger, jax.random.fold_in(key, 200), topo
    )
    if not topo.is_primary:
        return {"process_id": topo.process_id}

    synthetic = release(
        cfg,
        run_dir,
        ledger,
        lambda: synthesize(task, state.ema_params, jax.random.fold_in(key, 300)),
        generator="PrivORL-n",
        private=dp_info["private"],
    )
    report = release_report(cfg, resolved, dp_info, ledger)
    epsilon_audit(cfg, run_dir, ledger, report)
    if cfg.eval.agents:
        report["agents_synthetic"] = agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    audit_dir, audit = open_audit(run_dir)
    audit |= audit_release(
        task,
        audit_dir,
        synthetic=synthetic,
        sensitive=sensitive,
        holdout=holdout,
        params=state.ema_params,
        pre_params=pre_params,
        key=key,
    )
    return write_reports(run_dir, report, audit, t0, render_markdown)
