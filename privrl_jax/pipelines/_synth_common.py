"""What the PrivORL-n and PrivORL-j pipelines share: input checks, the public encoding,
the
curiosity pre-training loop, the DP fine-tuning wiring around ``run_dp_loop``, the
release, the agent scores and the report's common parts.

Each pipeline keeps its own unit of privacy (a transition or a trajectory), data layout,
models and audit; the helpers here take those as arguments. The privacy contract is the
one of ``_dp_loop.run_dp_loop`` (docs/design.md, contracts 2-6 and 8): noise only from a
`DPSecret`, every step in the ledger before its checkpoint, the normaliser fitted on
public data only.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from privrl_jax import agents, data, diffusion, envs, privacy, synth
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._audit_run import audit_into_report, markdown_rows
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._dp_loop import DPProgram, DPSecret, run_dp_loop
from privrl_jax.pipelines._rundir import (
    atomic_write_text,
    not_private_mark,
    refuse_other_run,
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


# ------------------------------------------------------------------------------- inputs
def validate_data_sources(d: Any) -> None:
    """The env names and data files of a synthesis config's ``data`` section (PrivORL-n
    and -j).

    Env names must exist (MuJoCo-only tasks need data files); files must exist. One line
    each.
    """
    for name, has_file in (
        (d.sensitive_env, bool(d.sensitive_file)),
        *((n, bool(d.public_files)) for n in d.public_envs),
    ):
        if has_file and name != d.sensitive_env:
            continue
        if not envs.is_mujoco_task_name(name):
            envs.make(
                name
            )  # an unknown name raises a ValueError that lists the valid ones
        elif not has_file:
            raise ValueError(
                f"{name} is a MuJoCo task with no JAX env to collect from; give its "
                "D4RL or Minari data "
                "as data.sensitive_file and data.public_files (it is scored with "
                "eval.backend: mujoco)."
            )
    for f in (*([d.sensitive_file] if d.sensitive_file else []), *d.public_files):
        if not Path(f).is_file():
            raise ValueError(
                f"data file {f} does not exist; give the path of a D4RL-format HDF5 "
                "file."
            )


def begin_run(
    cfg: Any, run_dir: Path, topo: privacy.Topology, method: str
) -> dict[str, Any]:
    """The resolved config, after process 0 has checked that ``run_dir`` is empty or
    holds this
    run (only ``eval`` may change on a rerun) and the data sources exist; nothing is
    written yet."""
    resolved = to_dict(cfg)
    if topo.is_primary:  # process 0 checks and owns the directory
        refuse_other_run(run_dir, resolved, method, mutable=("eval", "audit"))
    validate_data_sources(cfg.data)
    return resolved


def dataset_id(d: Any, seed: int, collector: str = "") -> str:
    """Names the sensitive dataset by its source, never by a hash of its contents.

    A content hash is a deterministic function of the private data: published with a
    report it would let anyone test a guessed dataset, outside any DP mechanism
    (docs/design.md, contract 5). ``collector`` appends the pipeline's own collection
    settings.
    """
    if d.sensitive_file:
        return f"file:{Path(d.sensitive_file).resolve()}"
    return (
        f"collected:{d.sensitive_env}:seed={seed}:size={d.sensitive_size}:"
        f"noise={d.action_noise}{collector}"
    )


def check_units(cfg: Any, n: int, units: str, holdout: str) -> None:
    """The declared dataset size and the batch size against the ``n`` sensitive units
    the run
    trains on (``units``: their plural name; ``holdout``: what was held out, for the
    message)."""
    declared = cfg.privacy.dataset_size
    if declared is not None and declared != n:
        raise ValueError(
            f"privacy.dataset_size={declared} is declared, but the sensitive data hold "
            f"{n} {units} "
            f"(after the {holdout}); declare the size of the data you train on, or "
            "leave it empty."
        )
    if cfg.finetune.batch_size > n:
        raise ValueError(
            f"finetune.batch_size={cfg.finetune.batch_size} exceeds the {n} sensitive "
            f"{units} "
            "(the sampling rate q = batch / N would exceed 1); lower "
            "finetune.batch_size."
        )


def check_same_dims(public: Any, sensitive: Any) -> tuple[int, int]:
    """(obs_dim, act_dim), the same in the public and the sensitive data (last axis)."""
    obs_dim, act_dim = public.observations.shape[-1], public.actions.shape[-1]
    if (
        sensitive.observations.shape[-1] != obs_dim
        or sensitive.actions.shape[-1] != act_dim
    ):
        raise ValueError(
            "public and sensitive data must have the same observation and action "
            "dimensions."
        )
    return obs_dim, act_dim


# ----------------------------------------------------------------------------- encoding
def encode(
    transitions: data.Transitions, layout: diffusion.TransitionLayout
) -> np.ndarray:
    """Flat encoded transitions [N, d] (not normalised)."""
    return np.asarray(
        diffusion.flatten_transitions(
            jax.tree_util.tree_map(jnp.asarray, transitions), layout
        )
    )


def public_encoding(cfg: Any, public: data.Transitions, obs_dim: int, act_dim: int):
    """(layout, flat public rows, normaliser). Contract 5: the normaliser sees public
    data only."""
    layout = diffusion.TransitionLayout(
        obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=cfg.model.next_obs_delta
    )
    pub_flat = encode(public, layout)
    norm = diffusion.fit_normaliser_on_public(
        pub_flat, one_hot_mask=layout.one_hot_mask()
    )
    return layout, pub_flat, norm


# ------------------------------------------------------------------------- pre-training
def pretrain(
    pc: Any,
    make_chunk: Callable,
    params: Any,
    rows: np.ndarray,
    ckpt: Checkpoints,
    key: jax.Array,
    *,
    sample_pool: Callable | None,
    desc: str,
):
    """Curiosity-driven pre-training on public ``rows`` (resumed from ``ckpt``); returns
    the SynthState.

    ``make_chunk(tx)`` builds the method's jitted chunk of ``pc.chunk_steps`` steps;
    ``sample_pool(key, ema_params, rows_on_device)`` draws a fresh curiosity pool every
    ``pc.steps_per_epoch`` steps (None: no curiosity).
    """
    # Cosine decay to 0: on a 2-D mixture it took the trained EDM's KS from 0.12 to
    # 0.02.
    tx = optax.adam(optax.cosine_decay_schedule(pc.learning_rate, pc.steps))
    chunk = make_chunk(tx)
    width = rows.shape[1]
    tree = {
        "state": synth.init_synth_state(params, tx),
        "rnd": synth.init_rnd(jax.random.fold_in(key, 1), width),
        "pool": jnp.zeros((pc.pool_size, width)),
        "scores": jnp.zeros(pc.pool_size),
    }
    start = 0
    latest = ckpt.latest()
    if latest is not None:
        tree, start = ckpt.restore(latest, tree), latest
    rows_dev = jnp.asarray(rows)
    with tqdm(total=pc.steps, initial=start, desc=desc, unit="step") as bar:
        for s in range(start, pc.steps, pc.chunk_steps):
            if sample_pool is not None and s % pc.steps_per_epoch == 0:
                pool = sample_pool(
                    jax.random.fold_in(key, 10_000 + s),
                    tree["state"].ema_params,
                    rows_dev,
                )
                tree = {
                    **tree,
                    "pool": pool,
                    "scores": synth.curiosity_score(tree["rnd"], pool),
                }
            st, rnd, m = chunk(
                tree["state"],
                tree["rnd"],
                rows_dev,
                tree["pool"],
                tree["scores"],
                jax.random.fold_in(key, s),
            )
            tree = {**tree, "state": st, "rnd": rnd}
            ckpt.save(s + pc.chunk_steps, tree)
            bar.update(pc.chunk_steps)
            bar.set_postfix(loss=f"{float(m.loss):.3f}")
    return tree["state"]


# ----------------------------------------------------------------------- DP fine-tuning
def make_plan(cfg: Any, num_units: int) -> privacy.DPPlan:
    """Poisson over the ``num_units`` sensitive units with q = batch / N, C, steps =
    ceil(epochs /
    q), sigma calibrated for (epsilon, delta) under ``privacy.accountant``."""
    fc, pc = cfg.finetune, cfg.privacy
    q = min(1.0, fc.batch_size / num_units)
    sampler = privacy.PoissonSampler(
        dataset_size=num_units, sampling_rate=q, microbatch_size=fc.microbatch_size
    )
    plan = privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=fc.l2_clip_norm,
        steps=max(1, math.ceil(fc.epochs / q)),
    )
    return plan.calibrate(pc.epsilon, pc.delta, pc.accountant)


def run_finetune(
    cfg: Any,
    plan: privacy.DPPlan,
    fns: Any,
    tree: dict[str, Any],
    units: Any,
    *,
    run_dir: Path,
    ledger: privacy.Ledger | None,
    key: jax.Array,
    topo: privacy.Topology,
    what: str,
    desc: str,
    item_mask: jax.Array | None = None,
    public_rows: Callable | None = None,
):
    """Runs (or resumes) the plan's DP steps on ``units`` (leading axis: the privacy
    units) in the one
    DP loop; returns (tree, secret). ``tree["state"]`` is the method's state, updated by
    ``fns.update`` from the noisy mean; the secret comes from the OS unless
    ``privacy.noise_seed`` fixes it (then the run is not private)."""
    fc, pc = cfg.finetune, cfg.privacy
    secret = (
        DPSecret.fresh() if pc.noise_seed is None else DPSecret.from_seed(pc.noise_seed)
    )

    def update(tree, noisy_mean):
        return {**tree, "state": fns.update(tree["state"], noisy_mean)}

    return run_dp_loop(
        plan,
        fns.clip,
        DPProgram(lambda t: t["state"].params, update, public_rows),
        tree,
        topo.local_block(units),
        item_mask=None if item_mask is None else topo.local_block(item_mask),
        ckpt=Checkpoints(run_dir / "checkpoints" / "dp"),
        ledger=ledger,
        what=what,
        secret=secret,
        loss_key=jax.random.fold_in(key, 3),
        checkpoint_every=fc.checkpoint_every,
        accountant=pc.accountant,
        desc=desc,
        divergence_hint=(
            "lower finetune.learning_rate or finetune.l2_clip_norm, or raise "
            "finetune.batch_size"
        ),
        topology=topo,
    )


def dp_info(
    plan: privacy.DPPlan,
    secret: DPSecret,
    pc: Any,
    *,
    size_source: str,
    unit: str | None = None,
    clip_method: str | None = None,
) -> dict[str, Any]:
    """The report's ``finetune`` section: the plan, flat copies of its fields that
    reports and
    scripts read, and whether the run is private. ``size_source`` says where N came from
    when ``privacy.dataset_size`` is not declared; ``unit`` and ``clip_method`` are
    written when given."""
    return {
        **plan.describe(),
        **({"unit": unit} if unit is not None else {}),
        "noise_multiplier": plan.noise_multipliers[0],
        **({"clip_method": clip_method} if clip_method is not None else {}),
        "private": plan.private and not secret.fixed,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; stored only in checkpoints/",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if pc.dataset_size is not None
        else size_source,
    }


# ------------------------------------------------------------------------------ release
def open_ledger(
    cfg: Any, run_dir: Path, dataset_id: str, n: int, topo: privacy.Topology
) -> privacy.Ledger | None:
    """Process 0's ledger of the run over ``n`` units; its artifacts are the DP
    checkpoints and the
    release. The other processes write none (None)."""
    if not topo.is_primary:
        return None
    return privacy.Ledger.open(
        run_dir,
        dataset_id=dataset_id,
        dataset_size=n,
        target_epsilon=cfg.privacy.epsilon,
        target_delta=cfg.privacy.delta,
        artifacts=[run_dir / "checkpoints" / "dp", run_dir / "synthetic.hdf5"],
        not_private=not_private_mark(NOT_PRIVATE_SEED, cfg.privacy.noise_seed),
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
    """``synthetic.hdf5``: reused when it exists (after checking it was made after the
    ledger's
    last step), else ``synthesize()`` written with its metadata (``metadata`` after the
    common keys)."""
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
    """The release's report: config, DP plan (``info``), ledger report, the pipeline's
    own
    ``sections``, what may be published, and a warning when the run is not private."""
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
    audit_into_report(cfg.audit, run_dir, ledger, report)


def open_audit(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """``audit/`` with its NOT_DP_README.txt, and the audit report's first entry (the
    notice)."""
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
    """Writes report.json (the release), audit/audit.json and report.md (both,
    labelled); returns
    the report with the audit under ``audit``."""
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


# ----------------------------------------------------------------------------- fidelity
def fidelity_scorer(
    sensitive: data.Transitions,
    layout: diffusion.TransitionLayout,
    norm: Any,
    env_name: str,
    *,
    rows: int,
    seed: int,
) -> Callable[[data.Transitions], dict[str, float]]:
    """A function scoring transitions against the ``sensitive`` ones (audit: it reads
    them).

    Scores: the marginal and correlation scores of the encoded columns; the sliced
    Wasserstein distance in the public normaliser's scale (every column on one scale);
    for a maze, the share of observed positions in the sensitive maze's free cells (real
    data: 1.0). The distance compares ``rows`` rows of each table (fixed draws without
    replacement; e.g. the holdout's size), since its finite-sample floor depends on the
    sizes: the scores of a release, of the pre-training-only samples and of the real
    holdout are then comparable.
    """
    sens = encode(sensitive, layout)
    sens_x = np.asarray(diffusion.normalise(norm, jnp.asarray(sens)))
    walls = (
        None
        if envs.is_mujoco_task_name(env_name)
        else getattr(envs.make(env_name)[1], "walls", None)
    )

    def score(other: data.Transitions) -> dict[str, float]:
        flat = encode(other, layout)
        x = np.asarray(diffusion.normalise(norm, jnp.asarray(flat)))
        n = min(rows, len(x), len(sens_x))
        rng = np.random.default_rng([seed, 11])
        a, b = (
            sens_x[rng.choice(len(sens_x), n, replace=False)],
            x[rng.choice(len(x), n, replace=False)],
        )
        out = {
            "marginal": evaluation.marginal_score(sens, flat),
            "correlation": evaluation.correlation_score(sens, flat),
            "sliced_wasserstein": evaluation.sliced_wasserstein(a, b, seed=seed),
            "rows_compared": n,
        }
        if walls is not None:
            out["free_cell_share"] = evaluation.free_cell_share(
                np.asarray(other.observations)[:, :2], walls
            )
        return out

    return score


# ------------------------------------------------------------------------------- agents
def agent_scores(cfg: Any, dataset: data.Transitions, key: jax.Array) -> dict[str, Any]:
    """Trains each of ``cfg.eval.agents`` on ``dataset`` and scores it as `EvalConfig`
    says."""
    # MuJoCo-only tasks (locomotion, kitchen) have no JAX env: they are scored by the
    # mujoco backend.
    mujoco_only = envs.is_mujoco_task_name(cfg.data.sensitive_env)
    env, env_params = (None, None) if mujoco_only else envs.make(cfg.data.sensitive_env)
    ec = cfg.eval
    if ec.backend == "mujoco":
        envs.require_mujoco()  # fail before any agent is trained
    first_eval = ec.agent_updates - (ec.final_evals - 1) * ec.agent_chunk
    dataset = jax.tree_util.tree_map(jnp.asarray, dataset)
    out = {}
    for i, name in enumerate(ec.agents):
        agent = make_run_agent(name, ec.agent_updates)

        def eval_fn(state, k, agent=agent):
            if ec.backend == "mujoco":  # D4RL's MuJoCo point maze (the mujoco extra)
                ev = envs.evaluate_mujoco(
                    envs.batch_policy(agent.act, state),
                    cfg.data.sensitive_env,
                    num_episodes=ec.eval_episodes,
                    seed=envs.seed_from_key(k),
                )
            else:
                ev = agents.evaluate(
                    k,
                    state,
                    act=agent.act,
                    env=env,
                    env_params=env_params,
                    num_episodes=ec.eval_episodes,
                    env_name=cfg.data.sensitive_env,
                )
            return {m: float(ev[m]) for m in ("return_mean", "score_mean") if m in ev}

        seeds = []
        for s in range(ec.agent_seeds):
            res = agents.train(
                agent,
                dataset,
                key=jax.random.fold_in(jax.random.fold_in(key, i), s),
                num_updates=ec.agent_updates,
                chunk_size=ec.agent_chunk,
                eval_fn=eval_fn,
                eval_every=ec.agent_chunk,
            )
            final = [e for e in res.evals if e["step"] >= first_eval]
            seeds.append(
                {
                    m: float(np.mean([e[m] for e in final]))
                    for m in final[0]
                    if m != "step"
                }
                | {"curve": res.evals}
            )
        out[name] = {"per_seed": seeds}
        for m in ("return_mean", "score_mean"):
            if m in seeds[0]:
                vals = np.array([r[m] for r in seeds])
                out[name][m] = float(vals.mean())
                # The sample std over agent seeds (ddof = 1: with 2-3 seeds ddof = 0
                # understates it by 18-29%); one seed measures no spread.
                out[name][m.replace("_mean", "_std")] = (
                    float(vals.std(ddof=1)) if len(vals) > 1 else None
                )
    return out


# ---------------------------------------------------------------------------- report.md
def sigma_text(sigma: float) -> str:
    return "0 (no noise: not private)" if sigma == 0 else f"{sigma:.3f}"


def score_text(res: dict[str, Any], seeds: int) -> str:
    mean = res.get("score_mean", float("nan"))
    return (
        f"{mean:.1f} ± {res.get('score_std', float('nan')):.1f}"
        if seeds > 1
        else f"{mean:.1f}"
    )


def markdown_head(report: dict[str, Any], title: str, q_of: str = "") -> list[str]:
    """The title, the warnings, and the table's first rows: budget, epsilon spent, DP
    steps
    (``q_of``: what q samples, e.g. `` (trajectories)``)."""
    p, fin = report["privacy"], report["finetune"]
    budget = p["budget"]
    fmt = lambda e: "n/a" if e is None else f"{e:.3f}"
    lines = [title, ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    if p.get("over_budget"):
        lines += [
            "**OVER BUDGET: the ledger records more than the budget's epsilon.**",
            "",
        ]
    return lines + [
        "| quantity | value |",
        "|---|---|",
        f"| budget (epsilon, delta) | ({budget['epsilon']:g}, {budget['delta']:g}) |",
        f"| epsilon spent (RDP / PLD) | {fmt(p.get('rdp', {}).get('epsilon'))} / "
        f"{fmt(p.get('pld', {}).get('epsilon'))} |",
        f"| DP steps, noise multiplier, q{q_of} | {fin['steps']}, "
        f"{sigma_text(fin['noise_multiplier'])}, {fin['sampling_rate']:.4f} |",
        *markdown_rows(report),
    ]


def agent_rows(report: dict[str, Any], describe_seeds: bool) -> list[str]:
    """One row per agent: its score on the synthetic data / on the real data (audit);
    ``describe_seeds`` names the seed count in the row's label."""
    real_agents = report.get("audit", {}).get("agents_real", {})
    rows = []
    for name, res in report.get("agents_synthetic", {}).items():
        real = real_agents.get(name, {})
        seeds = len(res.get("per_seed", [])) or 1
        what = (
            (
                f" (mean ± std over {seeds} agent seeds)"
                if seeds > 1
                else " (one agent seed)"
            )
            if describe_seeds
            else ""
        )
        rows.append(
            f"| {name} normalised score{what}: synthetic / real (audit) | "
            f"{score_text(res, seeds)} / "
            f"{score_text(real, seeds) if real else 'not trained'} |"
        )
    return rows


def markdown_tail(
    lines: list[str], report: dict[str, Any], *, release: str, audit: str
) -> str:
    """``lines`` and the closing paragraphs (what the release and the audit are, the
    wall time)
    as one markdown text."""
    return "\n".join(
        [
            *lines,
            "",
            release,
            "",
            audit,
            "",
            f"Wall time: {report['wall_time_s']:.0f} s.",
            "",
        ]
    )
