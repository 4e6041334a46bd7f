"""PrivORL-n end to end: data, curiosity-driven pre-training, DP fine-tuning, synthesis,
evaluation.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``synthetic.hdf5``, ``ledger.json``,
  ``report.json`` (the DP plan, the privacy spent, scores of agents trained on the
  synthetic data) and ``config.yaml``;
- the **audit** (reads the sensitive data without DP; never publish): ``audit/`` with
  fidelity against the sensitive rows, agents trained on the real data, the
  membership-inference attack and the t-SNE / marginal plots of real rows;
- ``checkpoints/`` (holds the secret noise key: never publish) and ``report.md`` (both
  parts, labelled).

Rerunning the same command after an interruption resumes from the last checkpoint: the
DP steps run in the library's one DP loop (``_dp_loop.run_dp_loop``), which records
every step in the ledger before the checkpoint that contains it and replays batches and
noise from the checkpointed secret.

Privacy (docs/design.md, contracts 2-6 and 8): the unit is one sensitive transition;
Poisson sampling with q = B / N, sigma calibrated for the target (epsilon, delta) over
the planned steps, all bound in one ``privacy.DPPlan``; the normaliser is fitted on
public data only; the agent trained on synthetic data normalises with synthetic
statistics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, envs, privacy, synth
from privrl_jax import eval as evaluation
from privrl_jax.pipelines import _synth_common as common
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._privorl_n_config import (
    DataConfig,
    EvalConfig,
    FinetuneConfig,
    ModelConfig,
    PretrainConfig,
    PrivacyConfig,
    PrivORLNConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._rundir import atomic_write_text, run_in_dir
from privrl_jax.pipelines._synth_common import (  # noqa: F401 -- the names PrivORL-n always had
    AUDIT_NOTICE,
    NOT_PRIVATE_SEED,
    validate_data_sources,
)

__all__ = [
    "DataConfig",
    "EvalConfig",
    "FinetuneConfig",
    "ModelConfig",
    "PretrainConfig",
    "PrivacyConfig",
    "PrivORLNConfig",
    "SynthesisConfig",
    "load",
    "render_markdown",
    "run",
    "to_dict",
]

DP_STEP = "PrivORL-n DP-SGD step"
# The agent protocol under the name benchmarks/agents_vs_d3rlpy.py cites.
_agent_scores = common.agent_scores


# --------------------------------------------------------------------------------- data
def _collect(env_name: str, size: int, seed: int, noise: float) -> data.Transitions:
    return envs.collect_dataset(
        jax.random.key(seed), env_name, size, action_noise=noise
    )


def _load_or_collect(
    cfg: PrivORLNConfig,
) -> tuple[data.Transitions, data.Transitions, data.Transitions]:
    """(public, sensitive members, sensitive holdout). The holdout is never trained on."""
    d = cfg.data
    # The sensitive data first: a file with missing keys or too few rows is refused
    # before minutes of public collection (every collection has its own key, so the
    # order changes no data).
    if d.sensitive_file:
        full = data.load_hdf5(d.sensitive_file)
    else:
        full = _collect(
            d.sensitive_env,
            d.sensitive_size + d.holdout_size,
            cfg.seed * 1000,
            d.action_noise,
        )
    full = jax.tree_util.tree_map(np.asarray, full)
    n = len(full)
    if n <= d.holdout_size + 1:
        raise ValueError(
            f"the sensitive dataset has {n} transitions, too few for a holdout of "
            f"{d.holdout_size}."
        )
    if d.public_files:
        parts = [data.load_hdf5(f) for f in d.public_files]
    else:
        parts = [
            _collect(e, d.public_size, cfg.seed * 1000 + 1 + i, d.action_noise)
            for i, e in enumerate(d.public_envs)
        ]
    public = jax.tree_util.tree_map(
        lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts
    )
    # The holdout split is a fixed function of the seed, not of the data.
    perm = np.random.default_rng([cfg.seed, 7]).permutation(n)
    hold, mem = perm[: d.holdout_size], np.sort(perm[d.holdout_size :])
    take = lambda idx: jax.tree_util.tree_map(lambda x: x[idx], full)  # noqa: E731
    return public, take(mem), take(hold)


def _dataset_id(cfg: PrivORLNConfig) -> str:
    return common.dataset_id(cfg.data, cfg.seed)


# ------------------------------------------------------------------------- pre-training
def _pretrain(cfg, denoise, params, public_x, ckpt, key, dim):
    """Curiosity-driven pre-training on public transitions (resumed from ``ckpt``);
    returns the SynthState."""
    pc = cfg.pretrain

    def sample_pool(k, ema_params, _rows):  # unconditional: a pool of fresh transitions
        return diffusion.edm_sample(
            k,
            denoise,
            ema_params,
            num_samples=pc.pool_size,
            dim=dim,
            num_steps=pc.num_sampling_steps,
        )

    return common.pretrain(
        pc,
        lambda tx: synth.make_transition_pretrain_chunk(
            denoise,
            tx,
            batch_size=pc.batch_size,
            chunk_steps=pc.chunk_steps,
            ema_decay=cfg.synthesis.ema_decay,
            curiosity_rate=pc.curiosity_rate,
        ),
        params,
        public_x,
        ckpt,
        key,
        sample_pool=sample_pool if pc.curiosity_rate > 0 else None,
        desc="pre-train (public)",
    )


def _pretrain_dir(cfg: PrivORLNConfig, run_dir: Path) -> Path:
    """This run's pre-training checkpoints, or those of ``pretrain.reuse_from`` once
    checked to be a
    finished pre-training this run would have trained (public inputs only)."""
    if cfg.pretrain.reuse_from is None:
        return run_dir / "checkpoints" / "pretrain"
    src = Path(cfg.pretrain.reuse_from)
    try:
        other = yaml.safe_load((src / "config.yaml").read_text()) or {}
    except OSError:
        raise ValueError(
            f"pretrain.reuse_from={src}: no config.yaml there; name a PrivORL-n run "
            "directory."
        ) from None
    mine = to_dict(cfg)
    public = lambda c: (
        c.get("seed"),
        c.get("model"),
        {k: v for k, v in c.get("pretrain", {}).items() if k != "reuse_from"},  # noqa: E731
        {
            k: c.get("data", {}).get(k)
            for k in ("public_envs", "public_files", "public_size", "action_noise")
        },
        c.get("synthesis", {}).get("ema_decay"),
    )
    if public(other) != public(mine):
        raise ValueError(
            f"pretrain.reuse_from={src} pre-trained with another seed, model, pretrain "
            "section or public "
            "data than this run; reuse a run of the same public settings or leave "
            "reuse_from empty."
        )
    ckpt = src / "checkpoints" / "pretrain"
    if Checkpoints(ckpt).latest() != cfg.pretrain.steps:
        raise ValueError(
            f"pretrain.reuse_from={src} has not finished pre-training ({ckpt}); finish "
            "that run first."
        )
    return ckpt


# ----------------------------------------------------------------------- DP fine-tuning
def make_plan(cfg: PrivORLNConfig, dataset_size: int) -> privacy.DPPlan:
    """PrivORL-n's DP plan: Poisson q = B / N over the transitions, C, steps, calibrated
    sigma."""
    return common.make_plan(cfg, dataset_size)


def _finetune(
    cfg,
    denoise,
    pre_params,
    sens_x,
    run_dir: Path,
    ledger,
    key,
    dim,
    topo: privacy.Topology,
):
    """DP-SGD fine-tuning on the sensitive transitions; returns (SynthState, DP info)."""
    fc = cfg.finetune
    plan = make_plan(cfg, sens_x.shape[0])
    num_curious = synth.num_replaced(fc.batch_size, fc.curiosity_rate)
    fns = synth.make_transition_dp_finetune(
        denoise,
        plan,
        learning_rate=fc.learning_rate,
        ema_decay=cfg.synthesis.ema_decay,
        num_noise=fc.num_noise,
        clip_method=fc.clip_method,
        # FineCur's synthetic rows are a public count: the mean is over qN real + those
        # rows.
        mean_scale=plan.expected_batch_size / (plan.expected_batch_size + num_curious),
    )
    tree: dict[str, Any] = {"state": fns.init(pre_params)}
    public_rows = None
    if num_curious:
        pool_size = max(cfg.pretrain.pool_size, fc.batch_size)
        tree |= {
            "rnd": synth.init_rnd(jax.random.fold_in(key, 4), dim),
            "pool": jnp.zeros((pool_size, dim)),
            "scores": jnp.zeros(pool_size),
        }
        public_rows = _finecur_rows(cfg, denoise, fns, num_curious, plan, key, dim)
    # One unit = one transition: each is its own single item.
    tree, secret = common.run_finetune(
        cfg,
        plan,
        fns,
        tree,
        sens_x[:, None],
        run_dir=run_dir,
        ledger=ledger,
        key=key,
        topo=topo,
        what=DP_STEP,
        desc=f"DP fine-tune (eps={cfg.privacy.epsilon:g})",
        public_rows=public_rows,
    )
    info = common.dp_info(
        plan,
        secret,
        cfg.privacy,
        size_source="read from the sensitive data and treated as public",
    )
    return tree["state"], info


def _finecur_rows(cfg, denoise, fns, num_curious, plan, key, dim):
    """FineCur: a hook adding the clipped gradients of the most curious synthetic rows
    to a step."""
    fc = cfg.finetune
    steps_per_epoch = max(1, round(1 / plan.sampling_rate))
    mb = fc.microbatch_size
    padded = -(-num_curious // mb) * mb
    mask = (jnp.arange(padded) < num_curious)[:, None]

    @jax.jit
    def add(acc, params, rows, mask, k):
        clipped, _ = fns.clip(params, rows, mask, k)
        return jax.tree_util.tree_map(jnp.add, acc, clipped)

    def hook(tree, acc, t):
        state = tree["state"]
        if (
            t % steps_per_epoch == 0
        ):  # a fresh pool per epoch (Appendix F-B), from the EMA model
            pool = diffusion.edm_sample(
                jax.random.fold_in(key, 20_000 + t),
                denoise,
                state.ema_params,
                num_samples=tree["pool"].shape[0],
                dim=dim,
                num_steps=cfg.pretrain.num_sampling_steps,
            )
            tree = {
                **tree,
                "pool": pool,
                "scores": synth.curiosity_score(tree["rnd"], pool),
            }
        rows, rnd = synth.pick_curious(
            tree["rnd"],
            tree["pool"],
            tree["scores"],
            jax.random.fold_in(key, 30_000 + t),
            num_candidates=fc.batch_size,
            num_picked=num_curious,
        )
        rows = jnp.zeros((padded, dim)).at[:num_curious].set(rows)[:, None]
        kt = jax.random.fold_in(jax.random.fold_in(key, 40_000), t)
        for j in range(padded // mb):
            sl = slice(j * mb, (j + 1) * mb)
            acc = add(acc, state.params, rows[sl], mask[sl], jax.random.fold_in(kt, j))
        return {**tree, "rnd": rnd}, acc

    return hook


# ----------------------------------------------------------------- synthesis and agents
def _synthesize(cfg, denoise, params, layout, norm, key, dim) -> data.Transitions:
    sc = cfg.synthesis
    out = []
    with tqdm(total=sc.num_samples, desc="synthesize", unit="transition") as bar:
        for i, start in enumerate(range(0, sc.num_samples, sc.batch_size)):
            n = min(sc.batch_size, sc.num_samples - start)
            x = diffusion.edm_sample(
                jax.random.fold_in(key, i),
                denoise,
                params,
                num_samples=sc.batch_size,
                dim=dim,
                num_steps=sc.num_sampling_steps,
            )[:n]
            out.append(np.asarray(diffusion.denormalise(norm, x)))
            bar.update(n)
    flat = jnp.asarray(np.concatenate(out))
    synthetic = diffusion.unflatten_transitions(flat, layout)
    if sc.action_bounds:
        synthetic = synthetic.replace(
            actions=jnp.clip(synthetic.actions, *sc.action_bounds)
        )
    return jax.tree_util.tree_map(np.asarray, synthetic)


# ---------------------------------------------------------------------------------- run
def run(cfg: PrivORLNConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) PrivORL-n into ``run_dir``; returns the report dict (release +
    ``audit``).

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


def _column_names(layout: diffusion.TransitionLayout, dim: int) -> list[str] | None:
    """Names of the encoded transition columns for plots (None when discrete dims are
    one-hot)."""
    nxt = "s'-s" if layout.next_obs_delta else "s'"
    names = (
        [f"obs s[{i}]" for i in range(layout.obs_dim)]
        + [f"action a[{i}]" for i in range(layout.act_dim)]
        + ["reward r"]
        + [f"next obs {nxt}[{i}]" for i in range(layout.obs_dim)]
        + (
            ["terminal = 0", "terminal = 1"]
            if layout.one_hot_terminals
            else ["terminal"]
        )
    )
    return names if len(names) == dim else None


def _run(cfg: PrivORLNConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = common.begin_run(cfg, run_dir, topo, "PrivORL-n")
    t0 = time.time()
    key = jax.random.key(
        cfg.seed
    )  # public randomness only: data split, pre-training, losses

    public, sensitive, holdout = _load_or_collect(cfg)
    common.check_units(
        cfg, len(sensitive), "transitions", f"{cfg.data.holdout_size}-row holdout"
    )
    obs_dim, act_dim = common.check_same_dims(public, sensitive)
    pre_dir = _pretrain_dir(cfg, run_dir) if cfg.pretrain.steps > 0 else None
    # Everything is validated: from here on the run writes into its directory.
    if topo.is_primary:
        atomic_write_text(
            run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
        )
    layout, pub_flat, norm = common.public_encoding(cfg, public, obs_dim, act_dim)
    sens_flat, hold_flat = (
        common.encode(sensitive, layout),
        common.encode(holdout, layout),
    )
    dim = pub_flat.shape[1]
    pub_x = np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat)))
    sens_x = np.asarray(diffusion.normalise(norm, jnp.asarray(sens_flat)))

    ledger = common.open_ledger(cfg, run_dir, _dataset_id(cfg), len(sensitive), topo)
    m = cfg.model
    net = diffusion.ResidualMLP(
        width=m.width, depth=m.depth, fourier_dim=m.fourier_dim, layer_norm=m.layer_norm
    )
    denoise = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.fold_in(key, 0), jnp.zeros(dim), jnp.zeros(()))

    pre_params = None
    if cfg.pretrain.steps > 0:
        pre_ckpt = Checkpoints(pre_dir)
        pre_state = _pretrain(
            cfg, denoise, params, pub_x, pre_ckpt, jax.random.fold_in(key, 100), dim
        )
        # Fine-tuning starts from the pre-trained EMA weights (what pre-training would
        # sample with).
        params = pre_params = pre_state.ema_params
    state, dp_info = _finetune(
        cfg,
        denoise,
        params,
        sens_x,
        run_dir,
        ledger,
        jax.random.fold_in(key, 200),
        dim,
        topo,
    )
    if not topo.is_primary:
        return {"process_id": topo.process_id}

    synthetic = common.release(
        cfg,
        run_dir,
        ledger,
        lambda: _synthesize(
            cfg,
            denoise,
            state.ema_params,
            layout,
            norm,
            jax.random.fold_in(key, 300),
            dim,
        ),
        generator="PrivORL-n",
        private=dp_info["private"],
    )
    syn_flat = common.encode(synthetic, layout)
    report = common.release_report(cfg, resolved, dp_info, ledger)
    common.epsilon_audit(cfg, run_dir, ledger, report)
    if cfg.eval.agents:
        report["agents_synthetic"] = _agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    audit_dir, audit = common.open_audit(run_dir)
    score = common.fidelity_scorer(
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
        if pre_params is not None:
            # The same sampler, key and size as the release, from the model before any
            # DP step.
            pre_only = _synthesize(
                cfg,
                denoise,
                pre_params,
                layout,
                norm,
                jax.random.fold_in(key, 300),
                dim,
            )
            audit["anchors"]["pretrain_only"] = score(pre_only)
            if cfg.eval.agents and cfg.eval.anchor_agents:
                audit["anchors"]["agents_pretrain_only"] = _agent_scores(
                    cfg, pre_only, jax.random.fold_in(key, 400)
                )
    if cfg.eval.plots:
        evaluation.plot_tsne(
            sens_flat, syn_flat, seed=cfg.seed, path=audit_dir / "tsne.png"
        )
        evaluation.plot_marginals(
            sens_flat,
            syn_flat,
            path=audit_dir / "marginals.png",
            names=_column_names(layout, dim),
        )
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = _agent_scores(
            cfg, sensitive, jax.random.fold_in(key, 400)
        )
    if cfg.eval.mia:
        k = min(cfg.eval.mia_size, len(holdout), len(sensitive))
        mkey = jax.random.fold_in(key, 500)
        draws = cfg.eval.mia_noise_draws
        mem = evaluation.mia_loss_scores(
            denoise, state.ema_params, jnp.asarray(sens_x[:k]), mkey, num_noise=draws
        )
        non = evaluation.mia_loss_scores(
            denoise,
            state.ema_params,
            jnp.asarray(
                np.asarray(diffusion.normalise(norm, jnp.asarray(hold_flat)))[:k]
            ),
            mkey,
            num_noise=draws,
        )
        mia = evaluation.loss_threshold_attack(np.asarray(mem), np.asarray(non))
        audit["mia"] = {k2: v for k2, v in mia.items() if k2 != "per_sigma"}
        # The black-box attack a reader of the release can run: distance to the closest
        # synthetic row.
        syn_x = np.asarray(diffusion.normalise(norm, jnp.asarray(syn_flat)))
        hold_x = np.asarray(diffusion.normalise(norm, jnp.asarray(hold_flat)))
        audit["mia_distance"] = evaluation.mia_metrics(
            evaluation.distance_to_closest_record_scores(sens_x[:k], syn_x),
            evaluation.distance_to_closest_record_scores(hold_x[:k], syn_x),
        )
    return common.write_reports(run_dir, report, audit, t0, render_markdown)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-n report."""
    audit = report.get("audit", {})
    lines = common.markdown_head(report, "# PrivORL-n report") + common.agent_rows(
        report, describe_seeds=True
    )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        lines.append(
            "| fidelity (audit; 1 = identical, 0 = disjoint): marginal (1 - mean KS) "
            "/ correlation "
            f"(1 - mean abs. Pearson gap / 2) | {fid['marginal']:.3f} / "
            f"{fid['correlation']:.3f} |"
        )
        anchors = audit.get("anchors", {})
        cols = [
            ("release", fid),
            *[
                (name, anchors[k])
                for k, name in (
                    ("pretrain_only", "pre-training only"),
                    ("real_holdout", "real holdout"),
                )
                if k in anchors
            ],
        ]
        for key, what in (
            (
                "sliced_wasserstein",
                "sliced Wasserstein to the sensitive rows (0 = same law)",
            ),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if key in fid:
                lines.append(
                    f"| {what} (audit): {' / '.join(n for n, _ in cols)} | "
                    f"{' / '.join(f'{c[key]:.3f}' for _, c in cols)} |"
                )
        pre_agents = anchors.get("agents_pretrain_only", {})
        for name, res in pre_agents.items():
            seeds = len(res.get("per_seed", [])) or 1
            lines.append(
                f"| {name} normalised score on the pre-training-only samples (audit "
                "anchor) | "
                f"{common.score_text(res, seeds)} |"
            )
    if "mia" in audit:
        mia = audit["mia"]
        lines.append(
            f"| MIA (audit) TPR@10%FPR / TPR@1%FPR / AUC | {mia['tpr_at_10_fpr']:.3f} "
            f"/ {mia['tpr_at_1_fpr']:.3f} / {mia['auc']:.3f} |"
        )
    if "mia_distance" in audit:
        mia = audit["mia_distance"]
        lines.append(
            "| MIA, distance to the closest synthetic row (audit; black-box) "
            "TPR@10%FPR / TPR@1%FPR / AUC | "
            f"{mia['tpr_at_10_fpr']:.3f} / {mia['tpr_at_1_fpr']:.3f} / "
            f"{mia['auc']:.3f} |"
        )
    return common.markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`; "
            "the synthetic-data agent scores read only the release and the environment."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): "
            "fidelity, the real-data agent "
            "scores (the second number in the agent rows), the membership-inference "
            "attack and the plots "
            "read the sensitive data without DP. `checkpoints/` hold the secret noise "
            "key: never publish them."
        ),
    )
