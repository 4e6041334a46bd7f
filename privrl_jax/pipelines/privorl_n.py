"""PrivORL-n end to end: data, curiosity-driven pre-training, DP fine-tuning, synthesis, evaluation.

``run(config, run_dir)`` writes into ``run_dir``: ``config.yaml`` (resolved), ``ledger.json``,
``checkpoints/`` (orbax), ``synthetic.hdf5``, ``report.json``, ``report.md`` and PNG plots. Rerunning
the same command after an interruption resumes from the last checkpoint: every DP step is recorded in
the ledger before its checkpoint is written, so no budget is spent twice unnoticed, and the sampler,
loss keys and noise keys are addressed by step, so the result equals an uninterrupted run's.

Privacy (DESIGN.md contracts 2-6): the unit is one sensitive transition; Poisson sampling with
q = B / N accounted as ``PoissonSampledDpEvent``; sigma calibrated to the target (epsilon, delta) for
the planned number of steps; the normaliser is fitted on public data only; the agent trained on
synthetic data normalises with synthetic statistics. Evaluation against the real sensitive data
(fidelity, real-data agents, membership inference) is measurement for the report, not a release.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import yaml
from tqdm.auto import tqdm

from privrl_jax import agents, data, diffusion, envs, eval as evaluation, privacy, synth
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._config import load_config, to_dict
from privrl_jax.synth import _privorl_n as core


# ---------------------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the public and sensitive transitions come from.

    Without files, both are collected from our JAX mazes with the noisy waypoint expert
    (public = medium + large, sensitive = umaze, as in the paper).
    """

    sensitive_env: str = "maze2d-umaze-dense"
    public_envs: tuple[str, ...] = ("maze2d-medium-dense", "maze2d-large-dense")
    sensitive_size: int = 20_000
    public_size: int = 20_000
    holdout_size: int = 2_000
    action_noise: float = 0.5
    sensitive_file: str | None = None
    public_files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Residual-MLP denoiser (paper scale: width 1024, depth 6)."""

    width: int = 256
    depth: int = 3
    fourier_dim: int = 16
    layer_norm: bool = False
    # Model s' - s rather than s' (see `diffusion.TransitionLayout`). Not in the paper; on umaze, at equal
    # training, it cut the synthetic transitions' position error 4.6-6x non-private (2.6x under DP at
    # eps = 10) and their velocity error 1.3-1.7x.
    next_obs_delta: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    """Non-private pre-training on public data (``steps = 0`` disables it: the DPDM ablation)."""

    steps: int = 4_000
    batch_size: int = 256
    learning_rate: float = 3e-4
    curiosity_rate: float = 0.3
    pool_size: int = 4_096
    steps_per_epoch: int = 1_000
    chunk_steps: int = 250
    num_sampling_steps: int = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """DP-SGD fine-tuning on the sensitive data (paper: 5 epochs, C = 1, Opacus defaults)."""

    epochs: float = 5.0
    batch_size: int = 256
    learning_rate: float = 3e-4
    l2_clip_norm: float = 1.0
    microbatch_size: int = 64
    num_noise: int = 1
    clip_method: str = "vmap"
    checkpoint_every: int = 50
    # FineCur ablation (PrivORL Fig. 4): > 0 adds round(rate * batch_size) of the most curious
    # synthetic samples to every DP batch. They come from the model being released, so they cost no
    # budget; the real Poisson batch is kept whole (dropping sampled rows would only waste budget).
    curiosity_rate: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig:
    """Target (epsilon, delta); epsilon = inf trains without noise (the non-private ablation)."""

    epsilon: float = 10.0
    delta: float = 1e-6
    accountant: str = "rdp"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    num_samples: int = 20_000
    batch_size: int = 5_000
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    # Declared action bounds (public: the env's action space); synthetic actions are clipped to them,
    # as the env would clip them. An empty list leaves them as sampled.
    action_bounds: tuple[float, ...] = (-1.0, 1.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How the release is audited.

    Agent scores follow Fujimoto & Gu (TD3+BC, NeurIPS 2021, Sec. 5): the average normalised score
    of the final evaluations over several training seeds. Here a policy is evaluated after each of
    the last ``final_evals`` chunks of ``agent_chunk`` updates; those scores are averaged per seed,
    then over ``agent_seeds`` seeds. One final evaluation of one seed swings by tens of points on
    maze2d, which would drown the synthetic-vs-real comparison.
    """

    agents: tuple[str, ...] = ("td3bc",)
    agent_updates: int = 10_000
    agent_chunk: int = 1_000
    agent_seeds: int = 1
    final_evals: int = 1
    eval_episodes: int = 50
    train_real_agents: bool = True
    mia: bool = True
    mia_size: int = 1_000
    plots: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLNConfig:
    """Everything a PrivORL-n run needs; YAML files in ``configs/privorl_n/`` load into it."""

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    pretrain: PretrainConfig = PretrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        p, f = self.privacy, self.finetune
        if not p.epsilon > 0:
            raise ValueError(f"privacy.epsilon must be > 0 (inf for no DP); got {p.epsilon}.")
        privacy.validate_delta(p.delta)
        if f.batch_size % f.microbatch_size:
            raise ValueError(
                f"finetune.microbatch_size={f.microbatch_size} should divide finetune.batch_size="
                f"{f.batch_size} so a typical Poisson batch fills whole microbatches."
            )
        for name, rate in (("pretrain", self.pretrain.curiosity_rate), ("finetune", f.curiosity_rate)):
            if not 0 <= rate <= 1:
                raise ValueError(f"{name}.curiosity_rate must be in [0, 1]; got {rate}.")
        if self.pretrain.steps % self.pretrain.chunk_steps or self.pretrain.steps_per_epoch % self.pretrain.chunk_steps:
            raise ValueError("pretrain.steps and pretrain.steps_per_epoch must be multiples of pretrain.chunk_steps.")
        if self.eval.agent_updates % self.eval.agent_chunk:
            raise ValueError("eval.agent_updates must be a multiple of eval.agent_chunk.")
        if self.eval.agent_seeds < 1:
            raise ValueError(f"eval.agent_seeds={self.eval.agent_seeds}: expected >= 1.")
        if not 1 <= self.eval.final_evals <= self.eval.agent_updates // self.eval.agent_chunk:
            raise ValueError(
                f"eval.final_evals={self.eval.final_evals}: expected between 1 and "
                "eval.agent_updates / eval.agent_chunk (the number of chunks)."
            )
        bounds = self.synthesis.action_bounds
        if bounds and (len(bounds) != 2 or not bounds[0] < bounds[1]):
            raise ValueError(f"synthesis.action_bounds must be [low, high] with low < high, or []; got {list(bounds)}.")
        if f.clip_method not in ("vmap", "ghost"):
            raise ValueError(f"finetune.clip_method must be 'vmap' or 'ghost'; got {f.clip_method!r}.")


def load(path: str | Path | None = None, overrides: list[str] = ()) -> PrivORLNConfig:
    """Loads a PrivORL-n config (YAML + ``section.key=value`` overrides)."""
    return load_config(PrivORLNConfig, path, overrides)


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
    let anyone test a guessed dataset, outside any DP mechanism (DESIGN.md contract 5).
    """
    d = cfg.data
    if d.sensitive_file:
        return f"file:{Path(d.sensitive_file).resolve()}"
    return f"collected:{d.sensitive_env}:seed={cfg.seed}:size={d.sensitive_size}:noise={d.action_noise}"


# ---------------------------------------------------------------------------------------- checkpoints
def _key_leaves_to_data(tree):
    return jax.tree_util.tree_map(
        lambda x: jax.random.key_data(x) if jnp.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key) else x,
        tree,
    )


def _data_to_keys(tree, like):
    return jax.tree_util.tree_map(
        lambda x, l: jax.random.wrap_key_data(x) if jnp.issubdtype(l.dtype, jax.dtypes.prng_key) else x,
        tree,
        like,
    )


class _Checkpoints:
    """Orbax manager over ``run_dir/checkpoints``; one checkpoint per global update count."""

    def __init__(self, run_dir: Path):
        self.mgr = ocp.CheckpointManager(
            (run_dir / "checkpoints").absolute(),
            options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=False),
        )

    def latest(self) -> int | None:
        return self.mgr.latest_step()

    def save(self, step: int, tree: Any) -> None:
        self.mgr.save(step, args=ocp.args.StandardSave(_key_leaves_to_data(tree)), force=True)
        self.mgr.wait_until_finished()

    def restore(self, step: int, like: Any) -> Any:
        raw = self.mgr.restore(step, args=ocp.args.StandardRestore(_key_leaves_to_data(like)))
        return _data_to_keys(raw, like)


# ---------------------------------------------------------------------------------------- phases
def _pretrain(cfg, denoise, params, public_x, ckpt, latest, key, dim):
    """Curiosity-driven pre-training (resumed from checkpoint ``latest``); returns the final SynthState."""
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
    if latest is not None:
        if latest > pc.steps:
            # Fine-tuning has started; it restores its own state, initialised from this structure.
            return state
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


def _finetune(cfg, denoise, pre_state, sens_x, ckpt, ledger, key, dim):
    """DP-SGD fine-tuning on the sensitive transitions; returns (state, privacy info)."""
    fc, pc = cfg.finetune, cfg.privacy
    n = sens_x.shape[0]
    q = min(1.0, fc.batch_size / n)
    steps = max(1, math.ceil(fc.epochs / q))
    private = math.isfinite(pc.epsilon)
    if private:
        sigma = privacy.calibrate_noise_multiplier(pc.epsilon, pc.delta, q, steps, accountant=pc.accountant)
        step_event = privacy.dpsgd_event(sigma, q, 1)
        step_event = step_event.event  # one step: PoissonSampled(Gaussian)
    else:
        sigma, step_event = 0.0, None
    sampler = privacy.PoissonSampler(dataset_size=n, sampling_rate=q, microbatch_size=fc.microbatch_size)
    num_curious = synth.num_replaced(fc.batch_size, fc.curiosity_rate)
    fns = core.make_dp_finetune(
        denoise,
        learning_rate=fc.learning_rate,
        l2_clip_norm=fc.l2_clip_norm,
        noise_multiplier=sigma,
        # FineCur's synthetic rows are a public count: the mean is over qN real + those rows.
        expected_batch_size=sampler.expected_batch_size + num_curious,
        noise_key=jax.random.fold_in(key, 2),
        microbatch_size=None,
        ema_decay=cfg.synthesis.ema_decay,
        num_noise=fc.num_noise,
        clip_method=fc.clip_method,
    )
    what = "PrivORL-n DP-SGD step"
    state = core.SynthState(pre_state.params, pre_state.params, fns.tx.init(pre_state.params), jnp.zeros([], jnp.int32))
    tree: dict[str, Any] = {"state": state}
    if num_curious:
        pool_size = max(cfg.pretrain.pool_size, fc.batch_size)
        tree |= {"rnd": synth.init_rnd(jax.random.fold_in(key, 4), dim), "pool": jnp.zeros((pool_size, dim)), "scores": jnp.zeros(pool_size)}
    offset = cfg.pretrain.steps
    start = 0
    latest = ckpt.latest()
    if latest is not None and latest > offset:
        tree = ckpt.restore(latest, tree)
        start = latest - offset
    state = tree["state"]
    steps_per_epoch = max(1, round(1 / q))
    done_in_ledger = sum(r.count for r in ledger.releases if r.what == what)
    if private:
        if done_in_ledger < start:
            raise privacy.LedgerError(
                f"the checkpoint is at DP step {start} but the ledger records only {done_in_ledger} DP "
                "steps: the ledger and the checkpoint disagree, so the privacy spend is unknown. Start a "
                "new run directory."
            )
        # Refuse to start (or continue) a run whose remaining steps would exceed the budget.
        ledger.check(step_event, steps - done_in_ledger, accountant=pc.accountant)
    loss_key = jax.random.fold_in(key, 3)
    unrecorded = 0
    with tqdm(total=steps, initial=start, desc=f"DP fine-tune (eps={pc.epsilon:g})", unit="step") as bar:
        for t in range(start, steps):
            batch = sampler.sample(np.random.default_rng([cfg.seed, 11, t]))
            acc = jax.tree_util.tree_map(jnp.zeros_like, state.params)  # donated below
            kt = jax.random.fold_in(loss_key, t)
            for j in range(batch.indices.shape[0]):
                x = jnp.asarray(sens_x[batch.indices[j]])[:, None]
                acc, _ = fns.accumulate(acc, state.params, x, jnp.asarray(batch.mask[j])[:, None], jax.random.fold_in(kt, j))
            if num_curious:
                acc, tree = _add_curious_rows(cfg, denoise, fns, acc, state, tree, t, steps_per_epoch, num_curious, key, dim)
            state = fns.apply(state, acc)
            tree["state"] = state
            unrecorded += 1
            if unrecorded == fc.checkpoint_every or t == steps - 1:
                if private and t + 1 > done_in_ledger:
                    # Record before the checkpoint: a crash in between over-counts, never under-counts.
                    new = min(unrecorded, t + 1 - done_in_ledger)
                    ledger.record(step_event, what=what, count=new, params={"noise_multiplier": sigma, "sampling_rate": q, "l2_clip_norm": fc.l2_clip_norm})
                    done_in_ledger += new
                ckpt.save(offset + t + 1, tree)
                unrecorded = 0
            bar.update(1)
    if not private and not any(r.what == "non-private fine-tuning" for r in ledger.releases):
        # epsilon = inf is a release too: the ledger must say the data were used without DP.
        ledger.record(dp_accounting.NonPrivateDpEvent(), what="non-private fine-tuning")
    info = {"noise_multiplier": sigma, "sampling_rate": q, "steps": steps, "dataset_size": n, "private": private}
    return state, info


def _add_curious_rows(cfg, denoise, fns, acc, state, tree, t, steps_per_epoch, num_curious, key, dim):
    """FineCur: adds the clipped gradients of the most curious synthetic rows to step t's sum."""
    fc = cfg.finetune
    if t % steps_per_epoch == 0:  # a fresh pool per epoch (Appendix F-B), from the current EMA model
        pool = diffusion.edm_sample(
            jax.random.fold_in(key, 20_000 + t), denoise, state.ema_params,
            num_samples=tree["pool"].shape[0], dim=dim, num_steps=cfg.pretrain.num_sampling_steps,
        )
        tree = {**tree, "pool": pool, "scores": synth.curiosity_score(tree["rnd"], pool)}
    rows, rnd = core.pick_curious(
        tree["rnd"], tree["pool"], tree["scores"], jax.random.fold_in(key, 30_000 + t),
        num_candidates=fc.batch_size, num_picked=num_curious,
    )
    mb = fc.microbatch_size
    padded = -(-num_curious // mb) * mb
    rows = jnp.zeros((padded, dim)).at[:num_curious].set(rows)[:, None]
    mask = (jnp.arange(padded) < num_curious)[:, None]
    kt = jax.random.fold_in(jax.random.fold_in(key, 40_000), t)
    for j in range(padded // mb):
        acc, _ = fns.accumulate(acc, state.params, rows[j * mb : (j + 1) * mb], mask[j * mb : (j + 1) * mb], jax.random.fold_in(kt, j))
    return acc, {**tree, "rnd": rnd}


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
    env, env_params = envs.make(cfg.data.sensitive_env)
    ec = cfg.eval
    first_eval = ec.agent_updates - (ec.final_evals - 1) * ec.agent_chunk
    dataset = jax.tree_util.tree_map(jnp.asarray, dataset)
    out = {}
    for i, name in enumerate(ec.agents):
        agent = make_run_agent(name, ec.agent_updates)

        def eval_fn(state, k, agent=agent):
            ev = agents.evaluate(k, state, act=agent.act, env=env, env_params=env_params,
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
    """Runs (or resumes) PrivORL-n into ``run_dir``; returns the report dict.

    A finished or interrupted run may be resumed with a different ``eval`` section: the evaluation
    reads the release and the sensitive data but changes neither, so the release is reused and only
    the report is recomputed. Any other difference is refused.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resolved = to_dict(cfg)
    cfg_file = run_dir / "config.yaml"
    if cfg_file.exists():
        previous = yaml.safe_load(cfg_file.read_text()) or {}
        if {k: v for k, v in previous.items() if k != "eval"} != {k: v for k, v in resolved.items() if k != "eval"}:
            raise ValueError(
                f"{run_dir} holds a run with a different config ({cfg_file}); resume it with the same "
                "config (only the eval section may change) or choose a new --out directory."
            )
    cfg_file.write_text(yaml.safe_dump(resolved, sort_keys=False))
    t0 = time.time()
    key = jax.random.key(cfg.seed)

    public, sensitive, holdout = _load_or_collect(cfg)
    obs_dim, act_dim = public.observations.shape[1], public.actions.shape[1]
    if sensitive.observations.shape[1] != obs_dim or sensitive.actions.shape[1] != act_dim:
        raise ValueError("public and sensitive data must have the same observation and action dimensions.")
    layout = diffusion.TransitionLayout(obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=cfg.model.next_obs_delta)
    pub_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, public), layout))
    sens_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, sensitive), layout))
    hold_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, holdout), layout))
    # Contract 5: the normaliser sees public data only.
    norm = diffusion.fit_normaliser_on_public(pub_flat, one_hot_mask=layout.one_hot_mask())
    dim = pub_flat.shape[1]
    pub_x = np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat)))
    sens_x = np.asarray(diffusion.normalise(norm, jnp.asarray(sens_flat)))

    ledger = privacy.Ledger.open(
        run_dir,
        dataset_id=_dataset_id(cfg),
        dataset_size=len(sensitive),
        target_epsilon=cfg.privacy.epsilon,
        target_delta=cfg.privacy.delta,
    )
    m = cfg.model
    net = diffusion.ResidualMLP(width=m.width, depth=m.depth, fourier_dim=m.fourier_dim, layer_norm=m.layer_norm)
    denoise = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.fold_in(key, 0), jnp.zeros(dim), jnp.zeros(()))
    ckpt = _Checkpoints(run_dir)
    latest = ckpt.latest()

    tx_pre = optax.adam(cfg.pretrain.learning_rate)  # only its state's structure is used
    if cfg.pretrain.steps > 0:
        pre_state = _pretrain(cfg, denoise, params, pub_x, ckpt, latest, jax.random.fold_in(key, 100), dim)
    else:
        pre_state = core.init_synth_state(params, tx_pre)
    # Fine-tuning starts from the pre-trained EMA weights (what pre-training would sample with).
    pre_state = pre_state.replace(params=pre_state.ema_params)
    state, dp_info = _finetune(cfg, denoise, pre_state, sens_x, ckpt, ledger, jax.random.fold_in(key, 200), dim)

    syn_file = run_dir / "synthetic.hdf5"
    if syn_file.exists():
        synthetic = jax.tree_util.tree_map(np.asarray, data.load_hdf5(syn_file))
    else:
        synthetic = _synthesize(cfg, denoise, state.ema_params, layout, norm, jax.random.fold_in(key, 300), dim)
        data.save_hdf5(syn_file, synthetic, metadata={"generator": "PrivORL-n", "epsilon": cfg.privacy.epsilon, "delta": cfg.privacy.delta})
    syn_flat = np.asarray(diffusion.flatten_transitions(jax.tree_util.tree_map(jnp.asarray, synthetic), layout))

    report: dict[str, Any] = {
        "config": resolved,
        "finetune": dp_info,
        "privacy": ledger.report(),
        # Only synthetic.hdf5 (and the model) are DP releases. Fidelity, real-data agent scores and the
        # membership-inference numbers below read the sensitive data without DP: they are the data
        # owner's audit of the release, not something to publish with it.
        "release": {"dp": ["synthetic.hdf5"], "not_dp": ["fidelity", "agents_real", "mia"]},
    }
    report["fidelity"] = {
        "marginal": evaluation.marginal_score(sens_flat, syn_flat),
        "correlation": evaluation.correlation_score(sens_flat, syn_flat),
    }
    if cfg.eval.plots:
        evaluation.plot_tsne(sens_flat, syn_flat, seed=cfg.seed, path=run_dir / "tsne.png")
        evaluation.plot_marginals(sens_flat, syn_flat, path=run_dir / "marginals.png")
    if cfg.eval.agents:
        report["agents_synthetic"] = _agent_scores(cfg, synthetic, jax.random.fold_in(key, 400))
        if cfg.eval.train_real_agents:
            report["agents_real"] = _agent_scores(cfg, sensitive, jax.random.fold_in(key, 400))
    if cfg.eval.mia:
        k = min(cfg.eval.mia_size, len(holdout), len(sensitive))
        mkey = jax.random.fold_in(key, 500)
        mem = evaluation.mia_loss_scores(denoise, state.ema_params, jnp.asarray(sens_x[:k]), mkey)
        non = evaluation.mia_loss_scores(denoise, state.ema_params, jnp.asarray(np.asarray(diffusion.normalise(norm, jnp.asarray(hold_flat)))[:k]), mkey)
        mia = evaluation.loss_threshold_attack(np.asarray(mem), np.asarray(non))
        report["mia"] = {k2: v for k2, v in mia.items() if k2 != "per_sigma"}
    report["wall_time_s"] = time.time() - t0
    (run_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (run_dir / "report.md").write_text(render_markdown(report))
    return report


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-n report."""
    p = report["privacy"]
    lines = ["# PrivORL-n report", ""]
    budget = p["budget"]
    eps_rdp = p.get("rdp", {}).get("epsilon")
    eps_pld = p.get("pld", {}).get("epsilon")
    lines += [
        "| quantity | value |",
        "|---|---|",
        f"| budget (epsilon, delta) | ({budget['epsilon']:g}, {budget['delta']:g}) |",
        f"| epsilon spent (RDP / PLD) | {eps_rdp if eps_rdp is None else f'{eps_rdp:.3f}'} / {eps_pld if eps_pld is None else f'{eps_pld:.3f}'} |",
        f"| DP steps, noise multiplier, q | {p['num_releases']}, {report['finetune']['noise_multiplier']:.3f}, {report['finetune']['sampling_rate']:.4f} |",
        f"| fidelity: marginal / correlation | {report['fidelity']['marginal']:.3f} / {report['fidelity']['correlation']:.3f} |",
    ]
    for name, res in report.get("agents_synthetic", {}).items():
        real = report.get("agents_real", {}).get(name, {})
        lines.append(
            f"| {name} normalised score, mean ± std over {len(res.get('per_seed', [])) or 1} agent seed(s): synthetic / real | {res.get('score_mean', float('nan')):.1f} ± {res.get('score_std', float('nan')):.1f} / "
            f"{real.get('score_mean', float('nan')):.1f} ± {real.get('score_std', float('nan')):.1f} |"
        )
    if "mia" in report:
        lines.append(f"| MIA TPR@10%FPR / TPR@1%FPR / AUC | {report['mia']['tpr_at_10_fpr']:.3f} / {report['mia']['tpr_at_1_fpr']:.3f} / {report['mia']['auc']:.3f} |")
    lines += [
        "",
        "Only `synthetic.hdf5` is a DP release. Fidelity, the real-data agent scores and the membership-"
        "inference numbers read the sensitive data without DP: they audit the release for its owner and "
        "must not be published with it.",
        "",
        f"Wall time: {report['wall_time_s']:.0f} s.",
        "",
    ]
    return "\n".join(lines)
