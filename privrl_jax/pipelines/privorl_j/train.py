"""PrivORL-j's training: pre-training, trajectory-level DP fine-tuning, synthesis.

The synthesizer behind ``model.kind``, curiosity pre-training on public fragments,
trajectory-level DP fine-tuning and stitched synthesis.

The unit of privacy is one sensitive trajectory: its fragments are the unit's items;
the DP loop Poisson-samples trajectories with q = batch trajectories / N trajectories,
the plan clips each trajectory's whole gradient (summed over its fragments) once, and
noise is added once (PrivORL Sec. VII).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._privorl_j_config import PrivORLJConfig
from privrl_jax.pipelines._synth import train as synth_train
from privrl_jax.pipelines.privorl_j.task import PrivORLJTask

DP_STEP = "PrivORL-j DP-SGD step (one unit = one trajectory)"


class Synthesizer(NamedTuple):
    """One synthesizer behind ``model.kind``.

    The diffusion models (PrivORL-j, PrivORL-j-U) or the autoregressive DP-Transformer
    baseline; the pipeline around them is the same.
    """

    name: str
    params: Any
    pretrain_chunk: Callable  # tx -> chunk(state, rnd, rows, pool, scores, key)
    sample_pool: Callable | None  # (key, params, cond_rows) -> rows; None: no curiosity
    finetune: Callable  # plan -> DPFinetune
    generate: Callable  # (key, params, num, num_fragments) -> GeneratedFragments


def make_synthesizer(task: PrivORLJTask, key: jax.Array) -> Synthesizer:
    """The synthesizer of ``model.kind`` for ``task``.

    Its parameters are initialised from ``key`` (public).
    """
    cfg, obs_dim, act_dim, dim = task.cfg, task.obs_dim, task.act_dim, task.dim
    m, h, pc, fc = cfg.model, cfg.data.horizon, cfg.pretrain, cfg.finetune
    ema, ns = cfg.synthesis.ema_decay, cfg.synthesis.num_sampling_steps
    # The DP fine-tune's EMA (the released weights): schedule and decay.
    ft_ema = {
        "ema_decay": 0.0 if cfg.synthesis.finetune_ema == "last" else ema,
        "ema_warmup": cfg.synthesis.finetune_ema == "warmup",
    }
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
        return Synthesizer(
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
                clip_method=fc.clip_method,
                **ft_ema,
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
    return Synthesizer(
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
            clip_method=fc.clip_method,
            **ft_ema,
        ),
        lambda k, p, num, nf: synth.generate_fragments(
            k, denoise, p, num=num, num_fragments=nf, horizon=h, dim=dim, num_steps=ns
        ),
    )


def pretrain(
    task: PrivORLJTask, model: Synthesizer, ckpt: Checkpoints, key: jax.Array
) -> synth.SynthState:
    """Curiosity pre-training on the public fragment rows (resumed from ``ckpt``).

    Returns the SynthState.
    """
    pc = task.cfg.pretrain
    sample_pool = None
    if model.sample_pool is not None:

        def sample_pool(k, ema_params, rows_dev):
            # A pool conditioned on random real public links.
            cond = rows_dev[
                jax.random.randint(k, (pc.pool_size,), 0, rows_dev.shape[0])
            ]
            return model.sample_pool(jax.random.fold_in(k, 1), ema_params, cond)

    return synth_train.pretrain(
        pc,
        model.pretrain_chunk,
        model.params,
        task.rows,
        ckpt,
        key,
        sample_pool=sample_pool,
        desc="pre-train (public fragments)",
    )


def make_plan(cfg: PrivORLJConfig, num_trajectories: int) -> privacy.DPPlan:
    """PrivORL-j's DP plan: Poisson sampling over trajectories.

    q = batch / N trajectories, steps = ceil(epochs / q), C, sigma calibrated for
    (epsilon, delta) at trajectory level.
    """
    return synth_train.make_plan(cfg, num_trajectories)


def finetune(
    task: PrivORLJTask,
    model: Synthesizer,
    params: Any,
    items: dict[str, np.ndarray],
    run_dir: Path,
    ledger: privacy.Ledger | None,
    key: jax.Array,
    topo: privacy.Topology,
) -> tuple[synth.SynthState, dict[str, Any]]:
    """Trajectory-level DP-SGD on the sensitive ``items`` (``PrivORLJTask.items``).

    One unit = one trajectory, its fragments the unit's items. Returns (SynthState, the
    report's DP info).
    """
    cfg = task.cfg
    plan = make_plan(cfg, items["x"].shape[0])
    fns = model.finetune(plan)
    # Under adaptive clipping the report gives the final clip norm (a DP release).
    stats = privacy.LoopStats()
    tree, secret = synth_train.run_finetune(
        cfg,
        plan,
        fns,
        {"state": fns.init(params)},
        {k: jnp.asarray(v) for k, v in items.items()},
        run_dir=run_dir,
        ledger=ledger,
        key=key,
        topo=topo,
        what=DP_STEP,
        desc=f"DP fine-tune {model.name} (eps={cfg.privacy.epsilon:g}, trajectories)",
        item_mask=jnp.asarray(items["step_mask"][:, :, 0]),
        stats=stats,
    )
    info = synth_train.dp_info(
        plan,
        secret,
        cfg.privacy,
        final_clip_norm=stats.final_l2_clip_norm,
        unit="trajectory",
        clip_method=cfg.finetune.clip_method,
        size_source=(
            "number of sensitive trajectories, read from the data and treated as public"
        ),
    )
    return tree["state"], info


def synthesize(
    task: PrivORLJTask, model: Synthesizer, params: Any, key: jax.Array
) -> data.Transitions:
    """Stitched synthetic trajectories as flat D4RL rows.

    ``timeouts`` = 1 at a length cut.
    """
    sc, h = task.cfg.synthesis, task.cfg.data.horizon
    num_fragments = -(-sc.episode_length // h)
    out = []
    with tqdm(total=sc.num_trajectories, desc="synthesize", unit="trajectory") as bar:
        for i, start in enumerate(range(0, sc.num_trajectories, sc.batch_size)):
            n = min(sc.batch_size, sc.num_trajectories - start)
            gen = model.generate(
                jax.random.fold_in(key, i), params, sc.batch_size, num_fragments
            )
            out.append(
                synth.stitch_fragments(
                    gen,
                    n,
                    sc.episode_length,
                    task.layout,
                    task.norm,
                    sc.action_bounds,
                    sc.stop_at_terminal,
                )
            )
            bar.update(n)
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *out)
