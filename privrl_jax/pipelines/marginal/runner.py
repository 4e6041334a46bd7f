"""The marginal baselines' run: the measurements and the fit.

Each measurement is recorded in the ledger before it is drawn, inside the run the
baselines share (`_synth.baseline`).

See :mod:`privrl_jax.pipelines.marginal` for what a run writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from privrl_jax import data, privacy, synth
from privrl_jax.pipelines._marginal_config import MarginalConfig
from privrl_jax.pipelines._rundir import run_in_dir
from privrl_jax.pipelines._synth.baseline import (
    ReleaseRecorder,
    privacy_labels,
    run_baseline,
)
from privrl_jax.pipelines.marginal.report import render_markdown
from privrl_jax.pipelines.marginal.task import GENERATORS, MarginalTask, build_task
from privrl_jax.pipelines.privorl_n import (
    load_data,  # the same public/sensitive/holdout split
)


def run(cfg: MarginalConfig, run_dir: str | Path) -> dict[str, Any]:
    """Run PGM, MST, AIM or PrivSyn (``model.name``) into ``run_dir``.

    Returns the report (release + ``audit``).
    """
    return run_in_dir(
        Path(run_dir),
        lambda d, topo: run_baseline(
            cfg,
            d,
            topo,
            method=GENERATORS[cfg.model.name],
            load_data=load_data,
            build_task=_checked_task,
            synthesize=_synthesize,
            dp_info=_dp_info,
            render_markdown=render_markdown,
        ),
    )


def _checked_task(
    cfg: MarginalConfig, public: data.Transitions, sensitive: data.Transitions
) -> MarginalTask:
    task = build_task(cfg, public, sensitive)
    if cfg.model.name != "privsyn":  # PrivSyn fits no graphical model: no mbi
        synth.require_mbi()  # fail before anything is written when it is missing
    return task


def _synthesize(
    task: MarginalTask,
    sensitive: data.Transitions,
    record: ReleaseRecorder,
    secret: privacy.DPSecret,
    key: jax.Array,
    fit_info: dict[str, Any],
) -> data.Transitions:
    """The measurements, the fit and the sampled table, decoded with the public key.

    Each measurement is recorded in the ledger (or replayed from it) before it is drawn.
    """
    cfg = task.cfg
    delta = bool(cfg.model.next_obs_delta_bound)
    disc = task.disc
    codes = disc.discretise(synth.transition_table(sensitive, next_obs_delta=delta))

    common_kw = dict(
        noise_multiplier=task.sigma,
        num_rows=cfg.synthesis.num_samples,
        iters=cfg.model.iters,
        sample_seed=cfg.synthesis.sample_seed,
        on_release=record,
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
            on_release=record,
        )
    elif cfg.model.name == "aim":
        m = cfg.model
        fit = synth.fit_aim(
            secret.noise_key,
            codes,
            disc,
            max_clique_size=m.aim_max_clique_size,
            max_model_size=m.aim_max_model_size,
            rounds=m.aim_rounds,
            round_iters=m.aim_round_iters,
            **common_kw,
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


_SELECTED_CLIQUES = {
    "mst": "1-way + selected tree",
    "aim": "1-way + cliques selected by AIM's exponential mechanism",
    "privsyn": "1-way + pairs selected by DenseMarg",
}
_SELECTED_KEY = {"aim": "selected_cliques"}  # AIM's selection is not a tree


def _dp_info(
    task: MarginalTask,
    secret: privacy.DPSecret,
    ledger: privacy.Ledger,
    fit_info: dict[str, Any],
    private: bool,
) -> dict[str, Any]:
    """The report's ``finetune`` section: the releases as run.

    ``finetune`` is the name the shared report keeps.
    """
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
        else _SELECTED_CLIQUES[cfg.model.name],
        **(
            {_SELECTED_KEY.get(cfg.model.name, "selected_tree"): fit_info["selected"]}
            if fit_info.get("selected")
            else {}
        ),
        **privacy_labels(cfg, secret, private),
    }
