"""PrivORL-j end to end: fragments, curiosity pre-training on public trajectories,
trajectory-level
DP fine-tuning, stitched trajectory synthesis, evaluation.

``run(config, run_dir)`` writes the same run directory as PrivORL-n (``privorl_n.py``):

- the **release** (may be published): ``synthetic.hdf5`` (D4RL format, whole
  trajectories with ``timeouts``), ``ledger.json``, ``report.json`` (DP plan, spend,
  agents trained on the synthetic data, stitching quality of the synthetic trajectories)
  and ``config.yaml``;
- the **audit** (``audit/``, reads the sensitive data without DP; never publish):
  fidelity against the sensitive steps, agents trained on the real trajectories,
  stitching quality of the real ones;
- ``checkpoints/`` (hold the secret noise key: never publish) and ``report.md``.

Privacy (docs/design.md, contracts 2-6 and 8; PrivORL Sec. VII): the unit is one
sensitive trajectory. Its fragments are the unit's items; ``run_dp_loop``
Poisson-samples trajectories with q = batch trajectories / N trajectories, the plan
clips each trajectory's whole gradient (summed over its fragments) once, noise is added
once, every step is in the ledger before its checkpoint. The normaliser is fitted on
public data only; ``max_fragments`` and ``horizon`` are config values.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, envs, privacy, synth
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._privorl_j_config import (
    DataConfig,
    EvalConfig,
    FinetuneConfig,
    ModelConfig,
    PretrainConfig,
    PrivORLJConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._rundir import atomic_write_text, run_in_dir
from privrl_jax.pipelines._synth import train as synth_train
from privrl_jax.pipelines._synth.inputs import (
    begin_run,
    check_same_dims,
    check_units,
    dataset_id,
    encode,
    public_encoding,
)
from privrl_jax.pipelines._synth.release import (
    NOT_PRIVATE_SEED,  # noqa: F401
    epsilon_audit,
    open_audit,
    open_ledger,
    release,
    release_report,
    write_reports,
)
from privrl_jax.pipelines._synth.report import agent_rows, markdown_head, markdown_tail
from privrl_jax.pipelines._synth.scores import agent_scores
from privrl_jax.pipelines._synth.train import dp_info, pretrain, run_finetune

__all__ = [
    "DataConfig",
    "EvalConfig",
    "FinetuneConfig",
    "ModelConfig",
    "PretrainConfig",
    "PrivORLJConfig",
    "SynthesisConfig",
    "load",
    "make_plan",
    "reference_scores",
    "render_markdown",
    "run",
]

DP_STEP = "PrivORL-j DP-SGD step (one unit = one trajectory)"


# ---------------------------------------------------------------------------------------- data
def _collect(
    cfg: PrivORLJConfig, env_name: str, size: int, seed: int
) -> data.Transitions:
    d = cfg.data
    t = envs.collect_dataset(
        jax.random.key(seed),
        env_name,
        size,
        action_noise=d.action_noise,
        num_envs=d.num_envs,
    )
    return jax.tree_util.tree_map(np.asarray, t)


def _load(
    cfg: PrivORLJConfig,
) -> tuple[data.Trajectories, data.Trajectories, data.Trajectories]:
    """(public, sensitive members, sensitive holdout) as padded trajectories."""
    d = cfg.data
    # The sensitive data first: a bad file is refused before minutes of public
    # collection (each collection has its own key, so the order changes no data).
    full = (
        jax.tree_util.tree_map(np.asarray, data.load_hdf5(d.sensitive_file))
        if d.sensitive_file
        else _collect(cfg, d.sensitive_env, d.sensitive_size, cfg.seed * 1000)
    )
    sens = data.transitions_to_trajectories(full)
    n = len(sens)
    if n <= d.holdout_trajectories + 1:
        raise ValueError(
            f"the sensitive data hold {n} trajectories, too few for a holdout of "
            f"{d.holdout_trajectories}; collect more or lower "
            "data.holdout_trajectories."
        )
    if d.public_files:
        public = [
            jax.tree_util.tree_map(np.asarray, data.load_hdf5(f))
            for f in d.public_files
        ]
    else:
        public = [
            _collect(cfg, e, d.public_size, cfg.seed * 1000 + 1 + i)
            for i, e in enumerate(d.public_envs)
        ]
    pub = [data.transitions_to_trajectories(p) for p in public]
    # The holdout is a fixed function of the seed, not of the data.
    perm = np.random.default_rng([cfg.seed, 7]).permutation(n)
    hold, mem = (
        np.sort(perm[: d.holdout_trajectories]),
        np.sort(perm[d.holdout_trajectories :]),
    )
    take = lambda t, idx: jax.tree_util.tree_map(lambda x: np.asarray(x)[idx], t)
    return pub, take(sens, mem), take(sens, hold)


def _dataset_id(cfg: PrivORLJConfig) -> str:
    return dataset_id(cfg.data, cfg.seed, f":num_envs={cfg.data.num_envs}")


def _encode_steps(frags: data.Fragments, layout, norm) -> tuple[np.ndarray, np.ndarray]:
    """Normalised encoded steps [U, F, H, d] (zero on padding) and links [U, F, d] (zero
    if none)."""
    u, f, h = frags.step_mask.shape
    flat = data.Transitions(
        **{
            k: np.asarray(getattr(frags, k)).reshape(
                (u * f * h,) + np.asarray(getattr(frags, k)).shape[3:]
            )
            for k in data.STEP_FIELDS
        },
        timeouts=np.zeros(u * f * h, np.float32),
    )
    x = np.asarray(
        diffusion.normalise(
            norm,
            diffusion.flatten_transitions(
                jax.tree_util.tree_map(jnp.asarray, flat), layout
            ),
        )
    )
    x = np.where(np.asarray(frags.step_mask).reshape(-1, 1), x, 0.0).reshape(
        u, f, h, -1
    )
    link = data.Transitions(
        **{
            k: np.asarray(frags.link[k]).reshape(
                (u * f,) + np.asarray(frags.link[k]).shape[2:]
            )
            for k in data.STEP_FIELDS
        },
        timeouts=np.zeros(u * f, np.float32),
    )
    lk = np.asarray(
        diffusion.normalise(
            norm,
            diffusion.flatten_transitions(
                jax.tree_util.tree_map(jnp.asarray, link), layout
            ),
        )
    )
    lk = np.where(np.asarray(frags.has_link).reshape(-1, 1), lk, 0.0).reshape(u, f, -1)
    return x.astype(np.float32), lk.astype(np.float32)


def _items(frags: data.Fragments, layout, norm) -> dict[str, np.ndarray]:
    x, link = _encode_steps(frags, layout, norm)
    u, f, h, d = x.shape
    return {
        "x": x.reshape(u, f, h * d),
        "link": link,
        "has_link": np.asarray(frags.has_link),
        "step_mask": np.asarray(frags.step_mask),
    }


def _public_rows(public: list[data.Trajectories], cfg, layout, norm) -> np.ndarray:
    """Every real public fragment as a packed row (public: its own maximum fragment
    count)."""
    h = cfg.data.horizon
    rows = []
    for traj in public:
        f = -(-int(np.max(traj.lengths)) // h)
        frags = data.trajectories_to_fragments(traj, horizon=h, max_fragments=f)
        items = _items(frags, layout, norm)
        keep = np.asarray(frags.fragment_mask)
        rows.append(
            np.asarray(
                synth.pack_rows({k: jnp.asarray(v[keep]) for k, v in items.items()})
            )
        )
    return np.concatenate(rows)


def _transitions_of(
    trajs: list[data.Trajectories] | data.Trajectories,
) -> data.Transitions:
    trajs = trajs if isinstance(trajs, list) else [trajs]
    parts = [
        jax.tree_util.tree_map(np.asarray, data.trajectories_to_transitions(t))
        for t in trajs
    ]
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *parts)


# ---------------------------------------------------------------------------------------- training
class _Synth(NamedTuple):
    """One synthesizer behind ``model.kind``: the diffusion models (PrivORL-j,
    PrivORL-j-U) or the
    autoregressive DP-Transformer baseline; the pipeline around them is the same."""

    name: str
    params: Any
    pretrain_chunk: Callable  # tx -> chunk(state, rnd, rows, pool, scores, key)
    sample_pool: Callable | None  # (key, params, cond_rows) -> rows; None: no curiosity
    finetune: Callable  # plan -> DPFinetune
    generate: Callable  # (key, params, num, num_fragments) -> GeneratedFragments


def _make_synth(
    cfg: PrivORLJConfig, key, obs_dim: int, act_dim: int, dim: int
) -> _Synth:
    m, h, pc, fc = cfg.model, cfg.data.horizon, cfg.pretrain, cfg.finetune
    ema, ns = cfg.synthesis.ema_decay, cfg.synthesis.num_sampling_steps
    sizes = (obs_dim, act_dim, 1, obs_dim, dim - 2 * obs_dim - act_dim - 1)
    if (
        m.kind == "dp_transformer"
    ):  # the DP-Transformer baseline (Yue et al. 2023's recipe)
        ar = synth.StepTransformer(
            sizes,
            h,
            num_layers=m.num_layers,
            num_heads=m.num_heads,
            embed_dim=m.embed_dim,
        )
        return _Synth(
            "DP-Transformer",
            synth.init_step_transformer(key, ar),
            lambda tx: synth.make_ar_pretrain_chunk(
                ar,
                tx,
                batch_size=pc.batch_size,
                chunk_steps=pc.chunk_steps,
                ema_decay=ema,
            ),
            None,
            lambda plan: synth.make_ar_dp_finetune(
                ar,
                plan,
                learning_rate=fc.learning_rate,
                ema_decay=ema,
                clip_method=fc.clip_method,
            ),
            lambda k, p, num, nf: synth.generate_ar_fragments(
                k, ar, p, num=num, num_fragments=nf
            ),
        )
    if m.kind == "unet":  # the PrivORL-j-U baseline: everything else unchanged
        net = diffusion.FragmentUNet(
            dim,
            h,
            channels=m.unet_channels,
            embed_dim=m.embed_dim,
            fourier_dim=m.fourier_dim,
        )
    else:
        net = diffusion.FragmentTransformer(
            sizes,
            h,
            num_layers=m.num_layers,
            num_heads=m.num_heads,
            embed_dim=m.embed_dim,
            fourier_dim=m.fourier_dim,
            causal=m.causal,
        )
    denoise = diffusion.FragmentDenoiser(net.apply)
    params = jax.jit(net.init)(
        key,
        jnp.zeros(h * dim),
        jnp.zeros(()),
        jnp.zeros(dim),
        jnp.array(False),
        jnp.ones(h, bool),
    )
    return _Synth(
        "PrivORL-j-U" if m.kind == "unet" else "PrivORL-j",
        params,
        lambda tx: synth.make_fragment_pretrain_chunk(
            denoise,
            tx,
            horizon=h,
            dim=dim,
            batch_size=pc.batch_size,
            chunk_steps=pc.chunk_steps,
            ema_decay=ema,
            curiosity_rate=pc.curiosity_rate,
        ),
        (
            lambda k, p, cond: synth.sample_pool_rows(
                k, denoise, p, cond, horizon=h, num_steps=pc.num_sampling_steps
            )
        )
        if pc.curiosity_rate > 0
        else None,
        lambda plan: synth.make_trajectory_dp_finetune(
            denoise,
            plan,
            learning_rate=fc.learning_rate,
            ema_decay=ema,
            clip_method=fc.clip_method,
        ),
        lambda k, p, num, nf: synth.generate_fragments(
            k, denoise, p, num=num, num_fragments=nf, horizon=h, dim=dim, num_steps=ns
        ),
    )


def _pretrain(cfg, model: _Synth, rows, ckpt: Checkpoints, key):
    """Curiosity pre-training on public fragment rows (resumed from ``ckpt``); returns
    the SynthState."""
    pc = cfg.pretrain
    sample_pool = None
    if model.sample_pool is not None:

        def sample_pool(
            k, ema_params, rows_dev
        ):  # a pool conditioned on random real public links
            cond = rows_dev[
                jax.random.randint(k, (pc.pool_size,), 0, rows_dev.shape[0])
            ]
            return model.sample_pool(jax.random.fold_in(k, 1), ema_params, cond)

    return pretrain(
        pc,
        model.pretrain_chunk,
        model.params,
        rows,
        ckpt,
        key,
        sample_pool=sample_pool,
        desc="pre-train (public fragments)",
    )


def make_plan(cfg: PrivORLJConfig, num_trajectories: int) -> privacy.DPPlan:
    """PrivORL-j's plan: Poisson over trajectories, q = batch / N trajectories, steps =
    ceil(epochs / q), C, sigma calibrated for (epsilon, delta) at trajectory level."""
    return synth_train.make_plan(cfg, num_trajectories)


def _finetune(
    cfg,
    model: _Synth,
    pre_params,
    items,
    run_dir: Path,
    ledger,
    key,
    topo: privacy.Topology,
):
    """Trajectory-level DP-SGD: one unit = one trajectory, its fragments the unit's
    items."""
    plan = make_plan(cfg, items["x"].shape[0])
    fns = model.finetune(plan)
    tree, secret = run_finetune(
        cfg,
        plan,
        fns,
        {"state": fns.init(pre_params)},
        {k: jnp.asarray(v) for k, v in items.items()},
        run_dir=run_dir,
        ledger=ledger,
        key=key,
        topo=topo,
        what=DP_STEP,
        desc=f"DP fine-tune {model.name} (eps={cfg.privacy.epsilon:g}, trajectories)",
        item_mask=jnp.asarray(items["step_mask"][:, :, 0]),
    )
    info = dp_info(
        plan,
        secret,
        cfg.privacy,
        unit="trajectory",
        clip_method=cfg.finetune.clip_method,
        size_source="number of sensitive trajectories, read from the data and treated as public",
    )
    return tree["state"], info


# ---------------------------------------------------------------------------------------- synthesis
def _synthesize(cfg, model: _Synth, params, layout, norm, key) -> data.Transitions:
    """Stitched synthetic trajectories as flat D4RL rows (``timeouts`` = 1 at a length
    cut)."""
    sc, h = cfg.synthesis, cfg.data.horizon
    num_fragments = -(-sc.episode_length // h)
    out = []
    with tqdm(total=sc.num_trajectories, desc="synthesize", unit="trajectory") as bar:
        for i, start in enumerate(range(0, sc.num_trajectories, sc.batch_size)):
            n = min(sc.batch_size, sc.num_trajectories - start)
            gen = model.generate(
                jax.random.fold_in(key, i), params, sc.batch_size, num_fragments
            )
            out.append(
                _stitch(
                    gen,
                    n,
                    sc.episode_length,
                    layout,
                    norm,
                    sc.action_bounds,
                    sc.stop_at_terminal,
                )
            )
            bar.update(n)
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *out)


def _stitch(
    gen: synth.GeneratedFragments,
    n: int,
    length: int,
    layout,
    norm,
    bounds,
    stop_at_terminal: bool,
) -> data.Transitions:
    _, f, h, d = gen.fragments.shape
    steps = diffusion.denormalise(norm, gen.fragments[:n].reshape(n * f * h, d))
    t = jax.tree_util.tree_map(
        lambda x: np.asarray(x).reshape((n, f * h) + np.asarray(x).shape[1:]),
        diffusion.unflatten_transitions(steps, layout),
    )
    if not stop_at_terminal:
        t = t.replace(terminals=np.zeros_like(t.terminals))
    lengths, ended = synth.stitched_lengths(
        jnp.asarray(t.terminals), jnp.full((n,), length, jnp.int32)
    )
    lengths, ended = np.asarray(lengths), np.asarray(ended)
    mask = np.arange(f * h)[None, :] < lengths[:, None]
    timeouts = np.zeros((n, f * h), np.float32)
    timeouts[np.arange(n)[~ended], lengths[~ended] - 1] = 1.0
    actions = np.clip(t.actions, *bounds) if bounds else t.actions
    terminals = np.where(mask, t.terminals, 0.0)
    traj = data.Trajectories(
        observations=t.observations,
        actions=actions,
        rewards=t.rewards,
        next_observations=t.next_observations,
        terminals=terminals,
        timeouts=timeouts,
        mask=mask.astype(np.float32),
        lengths=lengths,
    )
    return jax.tree_util.tree_map(np.asarray, data.trajectories_to_transitions(traj))


def _windows(transitions: data.Transitions, layout, norm, window: int) -> np.ndarray:
    """Normalised encoded steps of each trajectory in windows of ``window`` steps
    (TrajScore)."""
    traj = data.transitions_to_trajectories(transitions)
    b, t = np.asarray(traj.mask).shape
    flat = data.Transitions(
        **{
            k: np.asarray(getattr(traj, k)).reshape(
                (b * t,) + np.asarray(getattr(traj, k)).shape[2:]
            )
            for k in data.TRANSITION_FIELDS
        }
    )
    x = np.asarray(
        diffusion.normalise(
            norm,
            diffusion.flatten_transitions(
                jax.tree_util.tree_map(jnp.asarray, flat), layout
            ),
        )
    )
    return evaluation.trajectory_windows(
        x.reshape(b, t, -1), np.asarray(traj.lengths), window
    )


def stitching_gaps(transitions: data.Transitions, horizon: int) -> dict[str, float]:
    """Mean L2 gaps ||s_{t+1} - s'_t|| inside trajectories: at fragment boundaries (t +
    1 a
    multiple of ``horizon``: the stitch) and inside fragments (the rest). Real maze data
    give ~0 for both; a synthesizer whose stitches are worse than its fragments shows a
    larger first."""
    starts, lengths = data.episode_boundaries(transitions)
    obs, nxt = (
        np.asarray(transitions.observations),
        np.asarray(transitions.next_observations),
    )
    at, inside = [], []
    for s, length in zip(starts, lengths):
        gap = np.linalg.norm(obs[s + 1 : s + length] - nxt[s : s + length - 1], axis=-1)
        boundary = (np.arange(1, length) % horizon) == 0
        at.append(gap[boundary])
        inside.append(gap[~boundary])
    cat = lambda x: np.concatenate(x) if x else np.zeros(0)
    a, i = cat(at), cat(inside)
    return {
        "at_fragment_boundaries": float(a.mean()) if a.size else float("nan"),
        "inside_fragments": float(i.mean()) if i.size else float("nan"),
        "num_boundaries": int(a.size),
    }


def reference_scores(
    cfg: PrivORLJConfig, extra: dict[str, data.Transitions] | None = None
) -> dict[str, Any]:
    """Reference TrajScores for reading a run's (NOT DP: reads the sensitive data;
    benchmarks only).

    With the run's data, encoding and TrajScore encoder (same seed, same public
    windows), scores
    two real sets as if they were the release: the public trajectories (what a
    synthesizer that merely reproduced its public pre-training data would get) and the
    held-out sensitive trajectories (real trajectories of the sensitive task never
    trained on: a ceiling). ``extra`` sets (e.g. releases of runs with another horizon)
    are scored with the same encoder and window ``cfg.data.horizon`` as
    ``trajscore_<name>``, so their scores compare.
    """
    public, sensitive, holdout = _load(cfg)
    obs_dim, act_dim = public[0].observations.shape[-1], public[0].actions.shape[-1]
    pub_t = _transitions_of(public)
    layout, _, norm = public_encoding(cfg, pub_t, obs_dim, act_dim)
    h = cfg.data.horizon
    pub_w = _windows(pub_t, layout, norm, h)
    real_w = _windows(_transitions_of(sensitive), layout, norm, h)
    hold_w = _windows(_transitions_of(holdout), layout, norm, h)
    enc = evaluation.fit_trajectory_encoder(
        jax.random.fold_in(jax.random.key(cfg.seed), 600),
        pub_w,
        window=h,
        steps=cfg.eval.trajscore_steps,
    )
    out = {
        "trajscore_public": evaluation.trajscore(enc, real_w, pub_w),
        "trajscore_holdout": evaluation.trajscore(enc, real_w, hold_w)
        if len(hold_w)
        else {"f1": None},
    }
    for name, transitions in (extra or {}).items():
        w = _windows(transitions, layout, norm, h)
        out[f"trajscore_{name}"] = (
            evaluation.trajscore(enc, real_w, w) if len(w) else {"f1": None}
        )
    return out


# ---------------------------------------------------------------------------------------- run
def run(cfg: PrivORLJConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs (or resumes) PrivORL-j into ``run_dir``; returns the report (release +
    ``audit``).

    Same contract as ``privorl_n.run``: locked directory, inputs checked before anything
    is written, resume from checkpoints without spending twice, only the ``eval``
    section may change on a rerun (the release is reused and re-audited). Under
    ``jax.distributed`` every process runs
    it: each clips the trajectories of its own block, process 0 alone locks the
    directory, writes the ledger and the release; the others return ``{"process_id":
    p}`` (docs/multihost.md).
    """
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def _run(cfg: PrivORLJConfig, run_dir: Path, topo: privacy.Topology) -> dict[str, Any]:
    resolved = begin_run(cfg, run_dir, topo, "PrivORL-j")
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only
    d = cfg.data

    public, sensitive, _holdout = _load(
        cfg
    )  # the holdout is kept out of training (no MIA yet)
    n = len(sensitive)
    check_units(cfg, n, "trajectories", f"{d.holdout_trajectories}-trajectory holdout")
    obs_dim, act_dim = check_same_dims(public[0], sensitive)
    if topo.is_primary:
        atomic_write_text(
            run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
        )

    pub_t = _transitions_of(public)
    layout, pub_flat, norm = public_encoding(cfg, pub_t, obs_dim, act_dim)
    dim = pub_flat.shape[1]
    rows = _public_rows(public, cfg, layout, norm)
    frags = data.trajectories_to_fragments(
        sensitive, horizon=d.horizon, max_fragments=d.max_fragments
    )
    items = _items(frags, layout, norm)

    ledger = open_ledger(cfg, run_dir, _dataset_id(cfg), n, topo)
    model = _make_synth(cfg, jax.random.fold_in(key, 0), obs_dim, act_dim, dim)
    params = model.params
    if cfg.pretrain.steps > 0:
        pre = _pretrain(
            cfg,
            model,
            rows,
            Checkpoints(run_dir / "checkpoints" / "pretrain"),
            jax.random.fold_in(key, 100),
        )
        params = pre.ema_params
    state, dp_info = _finetune(
        cfg, model, params, items, run_dir, ledger, jax.random.fold_in(key, 200), topo
    )
    if not topo.is_primary:
        return {"process_id": topo.process_id}

    synthetic = release(
        cfg,
        run_dir,
        ledger,
        lambda: _synthesize(
            cfg, model, state.ema_params, layout, norm, jax.random.fold_in(key, 300)
        ),
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
            "stitching": stitching_gaps(synthetic, d.horizon),
        },
    )
    epsilon_audit(cfg, run_dir, ledger, report)
    if cfg.eval.agents:
        report["agents_synthetic"] = agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = open_audit(run_dir)
    real = _transitions_of(sensitive)
    real_flat, syn_flat = encode(real, layout), encode(synthetic, layout)
    audit |= {
        "fidelity": {
            "marginal": evaluation.marginal_score(real_flat, syn_flat),
            "correlation": evaluation.correlation_score(real_flat, syn_flat),
        },
        "real_stitching": stitching_gaps(real, d.horizon),
        "truncated_trajectories": int(
            np.sum(np.asarray(sensitive.lengths) > d.horizon * d.max_fragments)
        ),
    }
    if cfg.eval.trajscore:
        pub_w = _windows(pub_t, layout, norm, d.horizon)
        real_w, syn_w = (
            _windows(real, layout, norm, d.horizon),
            _windows(synthetic, layout, norm, d.horizon),
        )
        if len(pub_w) and len(real_w) and len(syn_w):
            enc = evaluation.fit_trajectory_encoder(
                jax.random.fold_in(key, 600),
                pub_w,
                window=d.horizon,
                steps=cfg.eval.trajscore_steps,
            )
            audit["trajscore"] = evaluation.trajscore(enc, real_w, syn_w)
        else:
            audit["trajscore"] = {
                "f1": None,
                "note": f"no trajectory of {d.horizon} steps in one of the sets",
            }
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = agent_scores(cfg, real, jax.random.fold_in(key, 400))
    return write_reports(run_dir, report, audit, t0, render_markdown)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-j report."""
    audit = report.get("audit", {})
    syn = report["synthetic"]
    lines = markdown_head(
        report,
        "# PrivORL-j report (unit of privacy: one trajectory)",
        " (trajectories)",
    )
    lines += [
        "| synthetic trajectories / transitions / mean length | "
        f"{syn['num_trajectories']} / {syn['num_transitions']} / "
        f"{syn['mean_length']:.1f} |",
        "| stitching gap, synthetic: at fragment boundaries / inside fragments | "
        f"{syn['stitching']['at_fragment_boundaries']:.4f} / "
        f"{syn['stitching']['inside_fragments']:.4f} |",
    ]
    if "real_stitching" in audit:
        rs = audit["real_stitching"]
        lines.append(
            f"| stitching gap, real (audit) | {rs['at_fragment_boundaries']:.4f} / "
            f"{rs['inside_fragments']:.4f} |"
        )
    lines += agent_rows(report, describe_seeds=False)
    if audit.get("trajscore", {}).get("f1") is not None:
        ts = audit["trajscore"]
        lines.append(
            f"| TrajScore (audit): F1 / precision / recall | {ts['f1']:.3f} / "
            f"{ts['precision']:.3f} / {ts['recall']:.3f} |"
        )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        lines.append(
            f"| fidelity (audit): marginal / correlation | {fid['marginal']:.3f} / "
            f"{fid['correlation']:.3f} |"
        )
    return markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish). "
            "`checkpoints/` hold the secret "
            "noise key: never publish them."
        ),
    )
