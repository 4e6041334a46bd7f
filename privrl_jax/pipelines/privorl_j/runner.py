"""PrivORL-j's run: inputs, pre-training, trajectory-level DP fine-tuning, release.

Inputs are checked first; then the release, its report and the audit.

See :mod:`privrl_jax.pipelines.privorl_j` for what a run writes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from privrl_jax import data, privacy
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._privorl_j_config import PrivORLJConfig
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
from privrl_jax.pipelines.privorl_j.audit import audit_release
from privrl_jax.pipelines.privorl_j.report import render_markdown
from privrl_jax.pipelines.privorl_j.task import build_task, dataset_id, load_data
from privrl_jax.pipelines.privorl_j.train import (
    finetune,
    make_synthesizer,
    pretrain,
    synthesize,
)


def run(cfg: PrivORLJConfig, run_dir: str | Path) -> dict[str, Any]:
    """Run (or resume) PrivORL-j into ``run_dir``.

    Returns the report (release + ``audit``).

    Same contract as ``privorl_n.run``: locked directory, inputs checked before anything
    is written, resume from checkpoints without spending twice, only the ``eval``
    section may change on a rerun (the release is reused and re-audited). Under
    ``jax.distributed`` every process runs it: each clips the trajectories of its own
    block, process 0 alone locks the directory, writes the ledger and the release; the
    others return ``{"process_id": p}`` (docs/multihost.md).
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: PrivORLJConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = begin_run(cfg, run_dir, topo, "PrivORL-j")
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only
    d = cfg.data

    # The holdout is kept out of training; the audit scores it as a release (anchor).
    public, sensitive, holdout = load_data(cfg)
    n = len(sensitive)
    check_units(cfg, n, "trajectories", f"{d.holdout_trajectories}-trajectory holdout")
    task = build_task(cfg, public, sensitive)
    write_config(run_dir, resolved, topo)
    items = task.items(sensitive)

    ledger = open_ledger(cfg, run_dir, dataset_id(cfg), n, topo)
    model = make_synthesizer(task, jax.random.fold_in(key, 0))
    params = model.params
    pre_params = None
    if cfg.pretrain.steps > 0:
        pre = pretrain(
            task,
            model,
            Checkpoints(run_dir / "checkpoints" / "pretrain"),
            jax.random.fold_in(key, 100),
        )
        params = pre_params = pre.ema_params
    state, dp_info = finetune(
        task, model, params, items, run_dir, ledger, jax.random.fold_in(key, 200), topo
    )
    if not topo.is_primary:
        return {"process_id": topo.process_id}

    synthetic = release(
        cfg,
        run_dir,
        ledger,
        lambda: synthesize(task, model, state.ema_params, jax.random.fold_in(key, 300)),
        generator=model.name,
        private=dp_info["private"],
        horizon=d.horizon,
    )
    _, syn_lengths = data.episode_boundaries(synthetic)
    report = release_report(
        cfg,
        resolved,
        dp_info,
        ledger,
        synthetic={
            "num_trajectories": len(syn_lengths),
            "num_transitions": len(synthetic),
            "mean_length": float(np.mean(syn_lengths)),
            "stitching": evaluation.stitching_gaps(synthetic, d.horizon),
        },
    )
    epsilon_audit(cfg, run_dir, ledger, report)
    if cfg.eval.agents:
        report["agents_synthetic"] = agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = open_audit(run_dir)
    audit |= audit_release(
        task,
        synthetic=synthetic,
        sensitive=sensitive,
        holdout=holdout,
        model=model,
        pre_params=pre_params,
        key=key,
    )
    return write_reports(run_dir, report, audit, t0, render_markdown)
