"""The marginal-based baselines of PrivORL's Table I (PGM, MST) end to end, through
``mbi``.

``run(config, run_dir)`` writes the layout PrivORL-n writes, through the same helpers
(``pipelines._synth``): the **release** ``synthetic.hdf5`` (D4RL format), ``ledger.json``,
``report.json``, ``config.yaml``; the **audit** ``audit/`` (fidelity against the
sensitive rows, never publish); ``report.md`` (both, labelled). There are no
checkpoints: the measurements are a few one-shot releases, each recorded in the ledger
(and checked against the budget) before it is drawn. A rerun reuses a finished release;
a run interrupted between a measurement and the release would measure again, and the
ledger, which kept the first measurement, refuses what would exceed the budget.

Privacy: the unit is one sensitive transition under add/remove-one. The bins come from
public bounds (the env's spaces, the declared reward range), never from the rows. The
noise multiplier sigma is calibrated by dp-accounting for one Gaussian release at the
target (epsilon, delta); PGM releases its k marginals as that one mechanism (sensitivity
sqrt(k)), MST splits it into three Gaussian releases whose composition is the same
Gaussian (`synth.mst_noise_multipliers`). The noise key comes from a ``DPSecret`` (the
OS, or ``privacy.noise_seed``: then the run is labelled not private).

Requires the optional extra ``pip install -e ".[baselines]"`` (mbi 2.0).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import numpy as np
import yaml

from privrl_jax import diffusion, envs, privacy, synth
from privrl_jax.pipelines._dp_loop import DPSecret
from privrl_jax.pipelines._marginal_config import (
    MODELS,
    EvalConfig,
    MarginalConfig,
    ModelConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._rundir import atomic_write_text, run_in_dir
from privrl_jax.pipelines._synth.inputs import (
    begin_run,
    check_same_dims,
    dataset_id,
    encode,
)
from privrl_jax.pipelines._synth.release import (
    open_audit,
    open_ledger,
    release,
    release_report,
    write_reports,
)
from privrl_jax.pipelines._synth.report import agent_rows, markdown_head, markdown_tail
from privrl_jax.pipelines._synth.scores import agent_scores, fidelity_scorer
from privrl_jax.pipelines.privorl_n import (
    load_data,  # the same public/sensitive/holdout split
)

__all__ = [
    "MODELS",
    "EvalConfig",
    "MarginalConfig",
    "ModelConfig",
    "SynthesisConfig",
    "load",
    "noise_multiplier",
    "public_discretisation",
    "render_markdown",
    "run",
]

GENERATORS = {"pgm": "PGM (mbi)", "mst": "MST (mbi)"}


def public_discretisation(
    cfg: MarginalConfig, obs_dim: int, act_dim: int
) -> synth.PublicDiscretisation:
    """The bins from the config's declared bounds, else the sensitive env's spaces
    (public)."""
    m = cfg.model
    if m.obs_low and m.act_low:
        obs_low, obs_high, act_low, act_high = (
            m.obs_low,
            m.obs_high,
            m.act_low,
            m.act_high,
        )
    else:
        if envs.is_mujoco_task_name(cfg.data.sensitive_env):
            raise ValueError(
                f"{cfg.data.sensitive_env} has no JAX env whose spaces bound the "
                "columns; declare "
                "model.obs_low, model.obs_high, model.act_low and model.act_high."
            )
        env, params = envs.make(cfg.data.sensitive_env)
        o, a = env.observation_space(params), env.action_space(params)
        obs_low, obs_high = (
            (m.obs_low, m.obs_high)
            if m.obs_low
            else (np.asarray(o.low), np.asarray(o.high))
        )
        act_low, act_high = (
            (m.act_low, m.act_high)
            if m.act_low
            else (
                np.broadcast_to(np.asarray(a.low, float), (act_dim,)),
                np.broadcast_to(np.asarray(a.high, float), (act_dim,)),
            )
        )
    if len(obs_low) != obs_dim or len(act_low) != act_dim:
        raise ValueError(
            f"the bounds give {len(obs_low)} observation and {len(act_low)} action "
            "coordinates; the "
            f"data have {obs_dim} and {act_dim}."
        )
    return synth.transition_discretisation(
        obs_low=obs_low,
        obs_high=obs_high,
        act_low=act_low,
        act_high=act_high,
        reward_range=m.reward_range,
        obs_bins=m.obs_bins,
        act_bins=m.act_bins,
        reward_bins=m.reward_bins,
        next_obs_delta_bound=m.next_obs_delta_bound or None,
    )


def noise_multiplier(cfg: MarginalConfig) -> float:
    """sigma of one Gaussian release at (epsilon, delta), by dp-accounting; 0 at epsilon
    = inf."""
    pc = cfg.privacy
    if math.isinf(pc.epsilon):
        return 0.0
    return (
        privacy.GaussianMechanism(l2_sensitivity=1.0)
        .calibrate(pc.epsilon, pc.delta, pc.accountant)
        .noise_multiplier
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
    declared = cfg.privacy.dataset_size
    if declared is not None and declared != n:
        raise ValueError(
            f"privacy.dataset_size={declared} is declared, but the sensitive data hold "
            f"{n} "
            f"transitions (after the {cfg.data.holdout_size}-row holdout)."
        )
    obs_dim, act_dim = check_same_dims(public, sensitive)
    disc = public_discretisation(cfg, obs_dim, act_dim)
    cliques = tuple(
        tuple(c) for c in cfg.model.cliques
    ) or synth.default_transition_cliques(obs_dim, act_dim)
    unknown = sorted({c for cl in cliques for c in cl} - set(disc.names))
    if unknown:
        raise ValueError(
            f"model.cliques names unknown columns {unknown}; the columns are "
            f"{list(disc.names)}."
        )
    synth.require_mbi()  # fail before anything is written when the extra is missing
    atomic_write_text(
        run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
    )

    ledger = open_ledger(cfg, run_dir, dataset_id(cfg.data, cfg.seed), n, topo)
    secret = (
        DPSecret.fresh()
        if cfg.privacy.noise_seed is None
        else DPSecret.from_seed(cfg.privacy.noise_seed)
    )
    sigma = noise_multiplier(cfg)
    fit_info: dict[str, Any] = {}

    def synthesize():
        delta = bool(cfg.model.next_obs_delta_bound)
        codes = disc.discretise(synth.transition_table(sensitive, next_obs_delta=delta))
        common_kw = dict(
            noise_multiplier=sigma,
            num_rows=cfg.synthesis.num_samples,
            iters=cfg.model.iters,
            sample_seed=cfg.synthesis.sample_seed,
            on_release=_recorder(ledger, cfg.privacy.accountant),
        )
        if cfg.model.name == "pgm":
            fit = synth.fit_pgm(
                secret.noise_key, codes, disc, cliques=cliques, **common_kw
            )
        else:
            fit = synth.fit_mst(
                secret.noise_key, codes, disc, split=cfg.model.mst_split, **common_kw
            )
        fit_info["selected"] = [list(c) for c in fit.selected]
        table = disc.undiscretise(jax.random.fold_in(key, 300), fit.codes)
        return synth.table_transitions(table, obs_dim, act_dim, next_obs_delta=delta)

    private = sigma > 0 and not secret.fixed
    synthetic = release(
        cfg,
        run_dir,
        ledger,
        synthesize,
        generator=method,
        private=private,
        model=cfg.model.name,
    )
    info = _dp_info(cfg, sigma, secret, ledger, disc, cliques, fit_info, private)
    report = release_report(cfg, resolved, info, ledger)
    if cfg.eval.agents:
        report["agents_synthetic"] = agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = open_audit(run_dir)
    # PrivORL-n's default encoding (s' - s) and its public normaliser, so the scores sit
    # beside its own.
    layout = diffusion.TransitionLayout(
        obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=True
    )
    pub_flat = encode(public, layout)
    norm = diffusion.fit_normaliser_on_public(
        pub_flat, one_hot_mask=layout.one_hot_mask()
    )
    score = fidelity_scorer(
        sensitive,
        layout,
        norm,
        cfg.data.sensitive_env,
        rows=len(holdout),
        seed=cfg.seed,
    )
    audit["fidelity"] = score(synthetic)
    if cfg.eval.anchors:
        audit["anchors"] = {"real_holdout": score(holdout)}
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = agent_scores(
            cfg, sensitive, jax.random.fold_in(key, 400)
        )
    return write_reports(run_dir, report, audit, t0, render_markdown)


def _dp_info(
    cfg, sigma, secret, ledger, disc, cliques, fit_info, private
) -> dict[str, Any]:
    """The report's ``finetune`` section (the name the shared report keeps): the
    releases as run."""
    releases = ledger.groups()
    return {
        "model": cfg.model.name,
        "unit": "transition",
        "neighboring": "ADD_OR_REMOVE_ONE",
        "noise_multiplier": sigma,
        "steps": ledger.num_releases,  # one-shot releases of the full table (q = 1)
        "sampling_rate": 1.0,
        "releases": [{"what": g["what"], **g["params"]} for g in releases],
        "columns": {c.name: c.size for c in disc.columns},
        "cliques": [list(c) for c in cliques]
        if cfg.model.name == "pgm"
        else "1-way + selected tree",
        **({"selected_tree": fit_info["selected"]} if fit_info.get("selected") else {}),
        "private": private,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; never stored",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if cfg.privacy.dataset_size is not None
        else "read from the sensitive data and treated as public",
    }


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PGM / MST report."""
    name = GENERATORS[report["finetune"]["model"]]
    audit = report.get("audit", {})
    lines = markdown_head(report, f"# {name} report") + agent_rows(
        report, describe_seeds=True
    )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        cols = [
            ("release", fid),
            *(
                [("real holdout", audit["anchors"]["real_holdout"])]
                if "anchors" in audit
                else []
            ),
        ]
        for k, what in (
            ("marginal", "marginal score (1 - mean KS)"),
            ("correlation", "correlation score"),
            (
                "sliced_wasserstein",
                "sliced Wasserstein to the sensitive rows (0 = same law)",
            ),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if k in fid:
                lines.append(
                    f"| {what} (audit): {' / '.join(c for c, _ in cols)} | "
                    f"{' / '.join(f'{v[k]:.3f}' for _, v in cols)} |"
                )
    return markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): the fidelity "
            "scores read the sensitive data without DP."
        ),
    )
