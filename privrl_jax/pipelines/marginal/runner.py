"""The marginal baselines' run: inputs checked, the measurements recorded in the ledger
before each is drawn, the release, its report and the audit.

See :mod:`privrl_jax.pipelines.marginal` for what a run writes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax

from privrl_jax import diffusion, privacy, synth
from privrl_jax.pipelines._marginal_config import MarginalConfig
from privrl_jax.pipelines._rundir import run_in_dir
from privrl_jax.pipelines._synth.inputs import (
    begin_run,
    check_dataset_size,
    dataset_id,
    encode,
)
from privrl_jax.pipelines._synth.release import (
    noise_secret,
    open_audit,
    open_ledger,
    release,
    release_report,
    write_config,
    write_reports,
)
from privrl_jax.pipelines._synth.scores import agent_scores, transition_audit
from privrl_jax.pipelines.marginal.report import render_markdown
from privrl_jax.pipelines.marginal.task import GENERATORS, MarginalTask, build_task
from privrl_jax.pipelines.privorl_n import (
    load_data,  # the same public/sensitive/holdout split
)


def _recorder(ledger: privacy.Ledger, accountant: str):
    """The ``on_release`` hook: checks the budget, then records the release, before it
    is drawn."""

    def on_release(what: str, mech: privacy.GaussianMechanism | None) -> None:
        if mech is None:  # epsilon = inf: exact counts, accounted as what they are
            ledger.check(dp_accounting.NonPrivateDpEvent(), accountant=accountant)
            ledger.record(
                dp_accounting.NonPrivateDpEvent(),
                what=what,
                params={"mechanism": "none"},
            )
        else:
            ledger.check(mech.event(), accountant=accountant)
            ledger.record(mech.event(), what=what, params=mech.describe())

    return on_release


def run(cfg: MarginalConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs PGM or MST (``model.name``) into ``run_dir``; returns the report (release +
    ``audit``)."""
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: MarginalConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    if not topo.is_primary:
        raise ValueError(
            "the marginal baselines run in one process; start them without "
            "jax.distributed."
        )
    method = GENERATORS[cfg.model.name]
    resolved = begin_run(cfg, run_dir, topo, method)
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only: data split, decoding

    public, sensitive, holdout = load_data(cfg)
    n = len(sensitive)
    check_dataset_size(cfg, n, "transitions", f"{cfg.data.holdout_size}-row holdout")
    task = build_task(cfg, public, sensitive)
    if cfg.model.name != "privsyn":  # PrivSyn fits no graphical model: no mbi
        synth.require_mbi()  # fail before anything is written when it is missing
    write_config(run_dir, resolved, topo)

    ledger = open_ledger(cfg, run_dir, dataset_id(cfg.data, cfg.seed), n, topo)
    secret = noise_secret(cfg)
    fit_info: dict[str, Any] = {}

    def synthesize():
        delta = bool(cfg.model.next_obs_delta_bound)
        disc = task.disc
        codes = disc.discretise(synth.transition_table(sensitive, next_obs_delta=delta))
        common_kw = dict(
            noise_multiplier=task.sigma,
            num_rows=cfg.synthesis.num_samples,
            iters=cfg.model.iters,
            sample_seed=cfg.synthesis.sample_seed,
            on_release=_recorder(ledger, cfg.privacy.accountant),
        )
        if cfg.model.name == "pgm":
            fit = synth.fit_pgm(
                secret.noise_key, codes, disc, cliques=task.cliques, **common_kw
            )
        elif cfg.model.name == "privsyn":
            fit = synth.fit_privsyn(
                secret.noise_key,
                codes,
                disc,
                noise_multiplier=task.sigma,
                num_rows=cfg.synthesis.num_samples,
                update_iterations=cfg.model.update_iterations,
                sample_seed=cfg.synthesis.sample_seed,
                on_release=common_kw["on_release"],
            )
        else:
            fit = synth.fit_mst(
                secret.noise_key, codes, disc, split=cfg.model.mst_split, **common_kw
            )
        fit_info["selected"] = [list(c) for c in fit.selected]
        table = disc.undiscretise(jax.random.fold_in(key, 300), fit.codes)
        return synth.table_transitions(
            table, task.obs_dim, task.act_dim, next_obs_delta=delta
        )

    private = task.sigma > 0 and not secret.fixed
    synthetic = release(
        cfg,
        run_dir,
        ledger,
        synthesize,
        generator=method,
        private=private,
        model=cfg.model.name,
    )
    info = _dp_info(task, secret, ledger, fit_info, private)
    report = release_report(cfg, resolved, info, ledger)
    if cfg.eval.agents:
        report["agents_synthetic"] = agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = open_audit(run_dir)
    # PrivORL-n's default encoding (s' - s) and its public normaliser, so the scores sit
    # beside its own.
    layout = diffusion.TransitionLayout(
        obs_dim=task.obs_dim, act_dim=task.act_dim, next_obs_delta=True
    )
    pub_flat = encode(public, layout)
    norm = diffusion.fit_normaliser_on_public(
        pub_flat, one_hot_mask=layout.one_hot_mask()
    )
    audit.update(
        transition_audit(cfg, sensitive, holdout, synthetic, layout, norm, key)
    )
    return write_reports(run_dir, report, audit, t0, render_markdown)


def _dp_info(
    task: MarginalTask,
    secret: privacy.DPSecret,
    ledger: privacy.Ledger,
    fit_info: dict[str, Any],
    private: bool,
) -> dict[str, Any]:
    """The report's ``finetune`` section (the name the shared report keeps): the
    releases as run."""
    cfg = task.cfg
    releases = ledger.groups()
    return {
        "model": cfg.model.name,
        "unit": "transition",
        "neighboring": "ADD_OR_REMOVE_ONE",
        "noise_multiplier": task.sigma,
        "steps": ledger.num_releases,  # one-shot releases of the full table (q = 1)
        "sampling_rate": 1.0,
        "releases": [{"what": g["what"], **g["params"]} for g in releases],
        "columns": {c.name: c.size for c in task.disc.columns},
        "cliques": [list(c) for c in task.cliques]
        if cfg.model.name == "pgm"
        else "1-way + selected tree"
        if cfg.model.name == "mst"
        else "1-way + pairs selected by DenseMarg",
        **({"selected_tree": fit_info["selected"]} if fit_info.get("selected") else {}),
        "private": private,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; never stored",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if cfg.privacy.dataset_size is not None
        else "read from the sensitive data and treated as public",
    }
