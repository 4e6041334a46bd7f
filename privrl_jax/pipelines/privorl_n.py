"""PrivORL-n end to end: data, curiosity-driven pre-training, DP fine-tuning, synthesis, evaluation.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``synthetic.hdf5``, ``ledger.json``, ``report.json`` (the DP
  plan, the privacy spent, scores of agents trained on the synthetic data) and ``config.yaml``;
- the **audit** (reads the sensitive data without DP; never publish): ``audit/`` with fidelity
  against the sensitive rows, agents trained on the real data, the membership-inference attack
  and the t-SNE / marginal plots of real rows;
- ``checkpoints/`` (holds the secret noise key: never publish) and ``report.md`` (both parts,
  labelled).

Rerunning the same command after an interruption resumes from the last checkpoint: the DP steps run
in the library's one DP loop (``_dp_loop.run_dp_loop``), which records every step in the ledger
before the checkpoint that contains it and replays batches and noise from the checkpointed secret.

Privacy (docs/design.md, contracts 2-6 and 8): the unit is one sensitive transition; Poisson
sampling with q = B / N, sigma calibrated for the target (epsilon, delta) over the planned steps,
all bound in one ``privacy.DPPlan``; the normaliser is fitted on public data only; the agent trained
on synthetic data normalises with synthetic statistics.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import yaml
from tqdm.auto import tqdm

from privrl_jax import agents, data, diffusion, envs, eval as evaluation, privacy, synth
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.privacy import _distributed as dist
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._dp_loop import DPProgram, DPSecret, run_dp_loop
from privrl_jax.pipelines._rundir import atomic_write_text, refuse_other_run, run_in_dir
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
from privrl_jax.synth import _privorl_n as core

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
NOT_PRIVATE_SEED = (
    "NOT PRIVATE: privacy.noise_seed is set, so anyone who reads config.yaml can recompute the DP "
    "noise and the batches. Use this run for tests and reproduction only."
)
AUDIT_NOTICE = (
    "NOT DIFFERENTIALLY PRIVATE. Everything in this folder was computed from the sensitive data "
    "without a DP mechanism (fidelity against sensitive rows, agents trained on real data, the "
    "membership-inference attack, plots of real rows). It audits the release for the data owner; "
    "never publish it.\n"
)


# ---------------------------------------------------------------------------------------- data
def _collect(env_name: str, size: int, seed: int, noise: float) -> data.Transitions:
    return envs.collect_dataset(jax.random.key(seed), env_name, size, action_noise=noise)


def _load_or_collect(cfg: PrivORLNConfig) -> tuple[data.Transitions, data.Transitions, data.Transitions]:
    """(public, sensitive members, sensitive holdout). The holdout is never trained on."""
    d = cfg.data
    if d.public_files:
        parts = [data.load_hdf5(f) for f in d.public_files]
    else:
        parts = [_collect(e, d.public_size, cfg.seed * 1000 + 1 + i, d.action_noise) for i, e in enumerate(d.public_envs)]
    public = jax.tree_util.tree_map(lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts)
    if d.sensitive_file:
        full = data.load_hdf5(d.sensitive_file)
    else:
        full = _collect(d.sensitive_env, d.sensitive_size + d.holdout_size, cfg.seed * 1000, d.action_noise)
    full = jax.tree_util.tree_map(np.asarray, full)
    n = len(full)
    if n <= d.holdout_size + 1:
        raise ValueError(f"the sensitive dataset has {n} transitions, too few for a holdout of {d.holdout_size}.")
    # The holdout split is a fixed function of the seed, not of the data.
    perm = np.random.default_rng([cfg.seed, 7]).permutation(n)
    hold, mem = perm[: d.holdout_size], np.sort(perm[d.holdout_size :])
    take = lambda idx: jax.tree_util.tree_map(lambda x: x[idx], full)  # noqa: E731
    return public, take(mem), take(hold)


def _dataset_id(cfg: PrivORLNConfig) -> str:
    """Names the sensitive dataset by its source, never by a hash of its contents.

    A content hash is a deterministic function of the private data: published with a report it would
    let anyone test a guessed dataset, outside any DP mechanism (docs/design.md, contract 5).
    """
    d = cfg.data
    if d.sensitive_file:
        return f"file:{Path(d.sensitive_file).resolve()}"
    return f"collected:{d.sensitive_env}:seed={cfg.seed}:size={d.sensitive_size}:noise={d.action_noise}"


# ---------------------------------------------------------------------------------------- pre-training
def _pretrain(cfg, denoise, params, public_x, ckpt: Checkpoints, key, dim):
    """Curiosity-driven pre-training on public data (resumed from ``ckpt``); returns the SynthState."""
    pc = cfg.pretrain
    # Cosine decay to 0: on a 2-D mixture it took the trained EDM's KS from 0.12 to 0.02.
    tx = optax.adam(optax.cosine_decay_schedule(pc.learning_rate, pc.steps))
    chunk = core.make_pretrain_chunk(
        denoise,
        tx,
        batch_size=pc.batch_size,
        chunk_steps=pc.chunk_steps,
        ema_decay=cfg.synthesis.ema_decay,
        curiosity_rate=pc.curiosity_rate,
    )
    state = core.init_synth_state(params, tx)
    rnd = synth.init_rnd(jax.random.fold_in(key, 1), dim)
    tree = {"state": state, "rnd": rnd, "pool": jnp.zeros((pc.pool_size, dim)), "scores": jnp.zeros(pc.pool_size)}
    start = 0
    latest = ckpt.latest()
    if latest is not None:
        tree, start = ckpt.restore(latest, tree), latest
    data_dev = jnp.asarray(public_x)
    with tqdm(total=pc.steps, initial=start, desc="pre-train (public)", unit="step") as bar:
        for s in range(start, pc.steps, pc.chunk_steps):
            if pc.curiosity_rate > 0 and s % pc.steps_per_epoch == 0:
                pool = diffusion.edm_sample(
                    jax.random.fold_in(key, 10_000 + s), denoise, tree["state"].ema_params,
                    num_samples=pc.pool_size, dim=dim, num_steps=pc.num_sampling_steps,
                )
                tree = {**tree, "pool": pool, "scores": synth.curiosity_score(tree["rnd"], pool)}
            st, rnd, m = chunk(tree["state"], tree["rnd"], data_dev, tree["pool"], tree["scores"], jax.random.fold_in(key, s))
            tree = {**tree, "state": st, "rnd": rnd}
            ckpt.save(s + pc.chunk_steps, tree)
            bar.update(pc.chunk_steps)
            bar.set_postfix(loss=f"{float(m.loss):.3f}")
    return tree["state"]


# ---------------------------------------------------------------------------------------- DP fine-tuning
def make_plan(cfg: PrivORLNConfig, dataset_size: int) -> privacy.DPPlan:
    """PrivORL-n's DP plan: Poisson q = B / N over the transitions, C, steps, calibrated sigma."""
    fc, pc = cfg.finetune, cfg.privacy
    q = min(1.0, fc.batch_size / dataset_size)
    sampler = privacy.PoissonSampler(
        dataset_size=dataset_size, sampling_rate=q, microbatch_size=fc.microbatch_size
    )
    steps = max(1, math.ceil(fc.epochs / q))
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=fc.l2_clip_norm, steps=steps)
    return plan.calibrate(pc.epsilon, pc.delta, pc.accountant)


def _finetune(cfg, denoise, pre_params, sens_x, run_dir: Path, ledger, key, dim, topo: dist.Topology):
    """DP-SGD fine-tuning on the sensitive transitions; returns (SynthState, DP info)."""
    fc, pc = cfg.finetune, cfg.privacy
    plan = make_plan(cfg, sens_x.shape[0])
    num_curious = synth.num_replaced(fc.batch_size, fc.curiosity_rate)
    fns = core.make_dp_finetune(
        denoise,
        plan,
        learning_rate=fc.learning_rate,
        ema_decay=cfg.synthesis.ema_decay,
        num_noise=fc.num_noise,
        clip_method=fc.clip_method,
        # FineCur's synthetic rows are a public count: the mean is over qN real + those rows.
        mean_scale=plan.expected_batch_size / (plan.expected_batch_size + num_curious),
    )
    tree: dict[str, Any] = {"state": fns.init(pre_params)}
    public_rows = None
    if num_curious:
        pool_size = max(cfg.pretrain.pool_size, fc.batch_size)
        tree |= {"rnd": synth.init_rnd(jax.random.fold_in(key, 4), dim),
                 "pool": jnp.zeros((pool_size, dim)), "scores": jnp.zeros(pool_size)}
        public_rows = _finecur_rows(cfg, denoise, fns, num_curious, plan, key, dim)

    def update(tree, noisy_mean):
        return {**tree, "state": fns.update(tree["state"], noisy_mean)}

    secret = DPSecret.fresh() if pc.noise_seed is None else DPSecret.from_seed(pc.noise_seed)
    tree, secret = run_dp_loop(
        plan, fns.clip, DPProgram(lambda t: t["state"].params, update, public_rows), tree,
        topo.local_block(sens_x[:, None]),
        ckpt=Checkpoints(run_dir / "checkpoints" / "dp"), ledger=ledger, what=DP_STEP,
        secret=secret, loss_key=jax.random.fold_in(key, 3), checkpoint_every=fc.checkpoint_every,
        accountant=pc.accountant, desc=f"DP fine-tune (eps={pc.epsilon:g})",
        divergence_hint="lower finetune.learning_rate or finetune.l2_clip_norm, or raise "
        "finetune.batch_size",
        topology=topo,
    )
    info = {
        **plan.describe(),
        # Flat copies of the plan's fields that reports and scripts read.
        "noise_multiplier": plan.noise_multipliers[0],
        "private": plan.private and not secret.fixed,
        "noise_secret": "fixed by privacy.noise_seed (not private)" if secret.fixed
        else "drawn from os.urandom; stored only in checkpoints/",
        "dataset_size_source": "privacy.dataset_size (declared)" if pc.dataset_size is not None
        else "read from the sensitive data and treated as public",
    }
    return tree["state"], info


def _finecur_rows(cfg, denoise, fns, num_curious, plan, key, dim):
    """FineCur: a hook adding the clipped gradients of the most curious synthetic rows to a step."""
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
        if t % steps_per_epoch == 0:  # a fresh pool per epoch (Appendix F-B), from the EMA model
            pool = diffusion.edm_sample(
                jax.random.fold_in(key, 20_000 + t), denoise, state.ema_params,
                num_samples=tree["pool"].shape[0], dim=dim, num_steps=cfg.pretrain.num_sampling_steps,
            )
            tree = {**tree, "pool": pool, "scores": synth.curiosity_score(tree["rnd"], pool)}
        rows, rnd = core.pick_curious(
            tree["rnd"], tree["pool"], tree["scores"], jax.random.fold_in(key, 30_000 + t),
            num_candidates=fc.batch_size, num_picked=num_curious,
        )
        rows = jnp.zeros((padded, dim)).at[:num_curious].set(rows)[:, None]
        kt = jax.random.fold_in(jax.random.fold_in(key, 40_000), t)
        for j in range(padded // mb):
            sl = slice(j * mb, (j + 1) * mb)
            acc = add(acc, state.params, rows[sl], mask[sl], jax.random.fold_in(kt, j))
        return {**tree, "rnd": rnd}, acc

    return hook


# ---------------------------------------------------------------------------------------- synthesis and agents
def _synthesize(cfg, denoise, params, layout, norm, key, dim) -> data.Transitions:
    sc = cfg.synthesis
    out = []
    with tqdm(total=sc.num_samples, desc="synthesize", unit="transition") as bar:
        for i, start in enumerate(range(0, sc.num_samples, sc.batch_size)):
            n = min(sc.batch_size, sc.num_samples - start)
            x = diffusion.edm_sample(jax.random.fold_in(key, i), denoise, params, num_samples=sc.batch_size, dim=dim, num_steps=sc.num_sampling_steps)[:n]
            out.append(np.asarray(diffusion.denormalise(norm, x)))
            bar.update(n)
    flat = jnp.asarray(np.concatenate(out))
    synthetic = diffusion.unflatten_transitions(flat, layout)
    if sc.action_bounds:
        synthetic = synthetic.replace(actions=jnp.clip(synthetic.actions, *sc.action_bounds))
    return jax.tree_util.tree_map(np.asarray, synthetic)


def _agent_scores(cfg, dataset: data.Transitions, key) -> dict[str, Any]:
    """Trains each of ``cfg.eval.agents`` on ``dataset`` and scores it as `EvalConfig` says."""
    # MuJoCo-only tasks (locomotion, kitchen) have no JAX env: they are scored by the mujoco backend.
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
                    envs.batch_policy(agent.act, state), cfg.data.sensitive_env,
                    num_episodes=ec.eval_episodes, seed=envs.seed_from_key(k))
            else:
                ev = agents.evaluate(
                    k, state, act=agent.act, env=env, env_params=env_params,
                    num_episodes=ec.eval_episodes, env_name=cfg.data.sensitive_env)
            return {m: float(ev[m]) for m in ("return_mean", "score_mean") if m in ev}

        seeds = []
        for s in range(ec.agent_seeds):
            res = agents.train(agent, dataset, key=jax.random.fold_in(jax.random.fold_in(key, i), s),
                               num_updates=ec.agent_updates, chunk_size=ec.agent_chunk,
                               eval_fn=eval_fn, eval_every=ec.agent_chunk)
            final = [e for e in res.evals if e["step"] >= first_eval]
            seeds.append({m: float(np.mean([e[m] for e in final])) for m in final[0] if m != "step"}
                         | {"curve": res.evals})
        out[name] = {"per_seed": seeds}
        for m in ("return_mean", "score_mean"):
            if m in seeds[0]:
                vals = np.array([r[m] for r in seeds])
                out[name][m] = float(vals.mean())
                out[name][m.replace("_mean", "_std")] = float(vals.std())
    return out


# ---------------------------------------------------------------------------------------- run
def run(cfg: PrivORLNConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) PrivORL-n into ``run_dir``; returns the report dict (release + ``audit``).

    A finished or interrupted run may be resumed with a different ``eval`` section: the evaluation
    reads the release and the sensitive data but changes neither, so the release is reused and only
    the reports are recomputed. Any other difference is refused. The directory is locked while the
    run is alive (a second run into it fails at once), and every input is checked before anything
    is written into it.

    Under ``jax.distributed`` every process calls ``run`` with the same config and directory (on a
    filesystem all see): each trains on its block of the sensitive transitions, process 0 alone
    locks the directory, writes the ledger, samples the release and evaluates it; the others return
    ``{"process_id": p}``.
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _column_names(layout: diffusion.TransitionLayout, dim: int) -> list[str] | None:
    """Names of the encoded transition columns for plots (None when discrete dims are one-hot)."""
    nxt = "s'-s" if layout.next_obs_delta else "s'"
    names = ([f"obs s[{i}]" for i in range(layout.obs_dim)]
             + [f"action a[{i}]" for i in range(layout.act_dim)] + ["reward r"]
             + [f"next obs {nxt}[{i}]" for i in range(layout.obs_dim)]
             + (["terminal = 0", "terminal = 1"] if layout.one_hot_terminals else ["terminal"]))
    return names if len(names) == dim else None


def _validate_inputs(cfg: PrivORLNConfig) -> None:
    """Checks what can be checked before any data is loaded or written (one clear line each)."""
    validate_data_sources(cfg.data)


def validate_data_sources(d: Any) -> None:
    """The env names and data files of a synthesis config's ``data`` section (PrivORL-n and -j).

    Env names must exist (MuJoCo-only tasks need data files); files must exist. One line each.
    """
    for name, has_file in ((d.sensitive_env, bool(d.sensitive_file)),
                           *((n, bool(d.public_files)) for n in d.public_envs)):
        if has_file and name != d.sensitive_env:
            continue
        if not envs.is_mujoco_task_name(name):
            envs.make(name)  # an unknown name raises a ValueError that lists the valid ones
        elif not has_file:
            raise ValueError(
                f"{name} is a MuJoCo task with no JAX env to collect from; give its D4RL or Minari data "
                "as data.sensitive_file and data.public_files (it is scored with eval.backend: mujoco)."
            )
    for f in (*([d.sensitive_file] if d.sensitive_file else []), *d.public_files):
        if not Path(f).is_file():
            raise ValueError(f"data file {f} does not exist; give the path of a D4RL-format HDF5 file.")


def _run(cfg: PrivORLNConfig, run_dir: Path, topo: dist.Topology) -> dict[str, Any]:
    resolved = to_dict(cfg)
    cfg_file = run_dir / "config.yaml"
    if topo.is_primary:  # process 0 checks and owns the directory
        refuse_other_run(run_dir, resolved, "PrivORL-n", mutable=("eval",))
    _validate_inputs(cfg)
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only: data split, pre-training, losses

    public, sensitive, holdout = _load_or_collect(cfg)
    if cfg.privacy.dataset_size is not None and cfg.privacy.dataset_size != len(sensitive):
        raise ValueError(
            f"privacy.dataset_size={cfg.privacy.dataset_size} is declared, but the sensitive data "
            f"hold {len(sensitive)} transitions (after the {cfg.data.holdout_size}-row holdout); "
            "declare the size of the data you train on, or leave it empty."
        )
    if cfg.finetune.batch_size > len(sensitive):
        raise ValueError(
            f"finetune.batch_size={cfg.finetune.batch_size} exceeds the {len(sensitive)} sensitive "
            "transitions (the sampling rate q = batch / N would exceed 1); lower finetune.batch_size."
        )
    obs_dim, act_dim = public.observations.shape[1], public.actions.shape[1]
    if sensitive.observations.shape[1] != obs_dim or sensitive.actions.shape[1] != act_dim:
        raise ValueError("public and sensitive data must have the same observation and action dimensions.")
    # Everything is validated: from here on the run writes into its directory.
    if topo.is_primary:
        atomic_write_text(cfg_file, yaml.safe_dump(resolved, sort_keys=False))
    layout = diffusion.TransitionLayout(obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=cfg.model.next_obs_delta)
    pub_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, public), layout))
    sens_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, sensitive), layout))
    hold_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, holdout), layout))
    # Contract 5: the normaliser sees public data only.
    norm = diffusion.fit_normaliser_on_public(pub_flat, one_hot_mask=layout.one_hot_mask())
    dim = pub_flat.shape[1]
    pub_x = np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat)))
    sens_x = np.asarray(diffusion.normalise(norm, jnp.asarray(sens_flat)))

    syn_file = run_dir / "synthetic.hdf5"
    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id=_dataset_id(cfg),
        dataset_size=len(sensitive),
        target_epsilon=cfg.privacy.epsilon,
        target_delta=cfg.privacy.delta,
        artifacts=[run_dir / "checkpoints" / "dp", syn_file],
    ) if topo.is_primary else None
    m = cfg.model
    net = diffusion.ResidualMLP(width=m.width, depth=m.depth, fourier_dim=m.fourier_dim, layer_norm=m.layer_norm)
    denoise = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.fold_in(key, 0), jnp.zeros(dim), jnp.zeros(()))

    if cfg.pretrain.steps > 0:
        pre_ckpt = Checkpoints(run_dir / "checkpoints" / "pretrain")
        pre_state = _pretrain(cfg, denoise, params, pub_x, pre_ckpt, jax.random.fold_in(key, 100), dim)
        # Fine-tuning starts from the pre-trained EMA weights (what pre-training would sample with).
        params = pre_state.ema_params
    state, dp_info = _finetune(cfg, denoise, params, sens_x, run_dir, ledger, jax.random.fold_in(key, 200), dim,
                               topo)
    if not topo.is_primary:
        return {"process_id": topo.process_id}

    if syn_file.exists():
        head = data.read_hdf5_metadata(syn_file).get("ledger_head", "")
        ledger.require_head(str(head), f"the release {syn_file}")
        synthetic = jax.tree_util.tree_map(np.asarray, data.load_hdf5(syn_file))
    else:
        synthetic = _synthesize(cfg, denoise, state.ema_params, layout, norm, jax.random.fold_in(key, 300), dim)
        data.save_hdf5(syn_file, synthetic, metadata={
            "generator": "PrivORL-n", "epsilon": cfg.privacy.epsilon, "delta": cfg.privacy.delta,
            "private": dp_info["private"], "ledger_head": ledger.head,
        })
    syn_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, synthetic), layout))

    report: dict[str, Any] = {
        "config": resolved,
        "finetune": dp_info,
        "privacy": ledger.report(),
        "release": {
            "publishable": ["synthetic.hdf5", "ledger.json", "report.json", "config.yaml"],
            "never_publish": ["audit/", "checkpoints/"],
        },
    }
    if not dp_info["private"]:
        report["warning"] = NOT_PRIVATE_SEED if cfg.privacy.noise_seed is not None else (
            "NOT PRIVATE: privacy.epsilon = inf trains without noise."
        )
    if cfg.eval.agents:
        report["agents_synthetic"] = _agent_scores(cfg, synthetic, jax.random.fold_in(key, 400))

    audit_dir = run_dir / "audit"
    audit_dir.mkdir(exist_ok=True)
    atomic_write_text(audit_dir / "NOT_DP_README.txt", AUDIT_NOTICE)
    audit: dict[str, Any] = {"notice": AUDIT_NOTICE.strip()}
    audit["fidelity"] = {
        "marginal": evaluation.marginal_score(sens_flat, syn_flat),
        "correlation": evaluation.correlation_score(sens_flat, syn_flat),
    }
    if cfg.eval.plots:
        evaluation.plot_tsne(sens_flat, syn_flat, seed=cfg.seed, path=audit_dir / "tsne.png")
        evaluation.plot_marginals(sens_flat, syn_flat, path=audit_dir / "marginals.png",
                                  names=_column_names(layout, dim))
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = _agent_scores(cfg, sensitive, jax.random.fold_in(key, 400))
    if cfg.eval.mia:
        k = min(cfg.eval.mia_size, len(holdout), len(sensitive))
        mkey = jax.random.fold_in(key, 500)
        mem = evaluation.mia_loss_scores(denoise, state.ema_params, jnp.asarray(sens_x[:k]), mkey)
        non = evaluation.mia_loss_scores(denoise, state.ema_params, jnp.asarray(np.asarray(diffusion.normalise(norm, jnp.asarray(hold_flat)))[:k]), mkey)
        mia = evaluation.loss_threshold_attack(np.asarray(mem), np.asarray(non))
        audit["mia"] = {k2: v for k2, v in mia.items() if k2 != "per_sigma"}
    report["wall_time_s"] = time.time() - t0
    atomic_write_text(run_dir / "report.json", json.dumps(report, indent=2, default=float))
    atomic_write_text(audit_dir / "audit.json", json.dumps(audit, indent=2, default=float))
    report["audit"] = audit
    atomic_write_text(run_dir / "report.md", render_markdown(report))
    return report


def _sigma_text(sigma: float) -> str:
    return "0 (no noise: not private)" if sigma == 0 else f"{sigma:.3f}"


def _score_text(res: dict[str, Any], seeds: int) -> str:
    mean = res.get("score_mean", float("nan"))
    return f"{mean:.1f} ± {res.get('score_std', float('nan')):.1f}" if seeds > 1 else f"{mean:.1f}"


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-n report."""
    p = report["privacy"]
    audit = report.get("audit", {})
    lines = ["# PrivORL-n report", ""]
    budget = p["budget"]
    eps_rdp = p.get("rdp", {}).get("epsilon")
    eps_pld = p.get("pld", {}).get("epsilon")
    lines += [
        "| quantity | value |",
        "|---|---|",
        f"| budget (epsilon, delta) | ({budget['epsilon']:g}, {budget['delta']:g}) |",
        f"| epsilon spent (RDP / PLD) | {eps_rdp if eps_rdp is None else f'{eps_rdp:.3f}'} / {eps_pld if eps_pld is None else f'{eps_pld:.3f}'} |",
        f"| DP steps, noise multiplier, q | {report['finetune']['steps']}, {_sigma_text(report['finetune']['noise_multiplier'])}, {report['finetune']['sampling_rate']:.4f} |",
    ]
    if p.get("over_budget"):
        lines[2:2] = ["**OVER BUDGET: the ledger records more than the budget's epsilon.**", ""]
    if "warning" in report:
        lines[2:2] = [f"**{report['warning']}**", ""]
    for name, res in report.get("agents_synthetic", {}).items():
        real = audit.get("agents_real", {}).get(name, {})
        seeds = len(res.get("per_seed", [])) or 1
        what = f"mean ± std over {seeds} agent seeds" if seeds > 1 else "one agent seed"
        real_text = _score_text(real, seeds) if real else "not trained"
        lines.append(
            f"| {name} normalised score ({what}): synthetic / real (audit) | "
            f"{_score_text(res, seeds)} / {real_text} |"
        )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        lines.append(
            f"| fidelity (audit; 1 = identical, 0 = disjoint): marginal (1 - mean KS) / correlation "
            f"(1 - mean abs. Pearson gap / 2) | {fid['marginal']:.3f} / {fid['correlation']:.3f} |"
        )
    if "mia" in audit:
        mia = audit["mia"]
        lines.append(f"| MIA (audit) TPR@10%FPR / TPR@1%FPR / AUC | {mia['tpr_at_10_fpr']:.3f} / {mia['tpr_at_1_fpr']:.3f} / {mia['auc']:.3f} |")
    lines += [
        "",
        "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, `report.json`, `config.yaml`; "
        "the synthetic-data agent scores read only the release and the environment.",
        "",
        "**Audit** (`audit/`, NOT differentially private, never publish): fidelity, the real-data agent "
        "scores (the second number in the agent rows), the membership-inference attack and the plots "
        "read the sensitive data without DP. `checkpoints/` hold the secret noise key: never publish them.",
        "",
        f"Wall time: {report['wall_time_s']:.0f} s.",
        "",
    ]
    return "\n".join(lines)
