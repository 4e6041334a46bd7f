"""PrivORL-n's training: curiosity pre-training, DP fine-tuning, synthesis.

Curiosity pre-training on public rows, DP fine-tuning on the sensitive rows (FineCur
optional) and synthesis from the EMA model.

The unit of privacy is one sensitive transition: each is its own single item, Poisson
sampled with q = B / N in the library's one DP loop (``_dp_loop.run_dp_loop``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._privorl_n_config import PrivORLNConfig
from privrl_jax.pipelines._synth import train as synth_train
from privrl_jax.pipelines.privorl_n.task import PrivORLNTask

DP_STEP = "PrivORL-n DP-SGD step"


# ------------------------------------------------------------------------- pre-training
def pretrain(
    task: PrivORLNTask, params: Any, ckpt: Checkpoints, key: jax.Array
) -> synth.SynthState:
    """Curiosity-driven pre-training on the public rows (resumed from ``ckpt``).

    Returns the SynthState.
    """
    cfg, pc = task.cfg, task.cfg.pretrain

    def sample_pool(k, ema_params, _rows):  # unconditional: a pool of fresh transitions
        return diffusion.edm_sample(
            k,
            task.denoise,
            ema_params,
            num_samples=pc.pool_size,
            dim=task.dim,
            num_steps=pc.num_sampling_steps,
        )

    return synth_train.pretrain(
        pc,
        lambda tx: synth.make_transition_pretrain_chunk(
            task.denoise,
            tx,
            batch_size=pc.batch_size,
            chunk_steps=pc.chunk_steps,
            ema_decay=cfg.synthesis.ema_decay,
            curiosity_rate=pc.curiosity_rate,
        ),
        params,
        task.public_x,
        ckpt,
        key,
        sample_pool=sample_pool if pc.curiosity_rate > 0 else None,
        desc="pre-train (public)",
    )


def pretrain_dir(cfg: PrivORLNConfig, run_dir: Path) -> Path:
    """This run's pre-training checkpoints, or those of ``pretrain.reuse_from``.

    The latter once checked to be a finished pre-training this run would have trained
    (public inputs only).
    """
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

    def public(c: dict[str, Any]) -> tuple:
        return (
            c.get("seed"),
            c.get("model"),
            {k: v for k, v in c.get("pretrain", {}).items() if k != "reuse_from"},
            {
                k: c.get("data", {}).get(k)
                for k in ("public_envs", "public_files", "public_size", "action_noise")
            },
            c.get("synthesis", {}).get("ema_decay"),
        )

    if public(other) != public(to_dict(cfg)):
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
    """PrivORL-n's DP plan: Poisson q = B / N over the transitions.

    C, steps, calibrated sigma.
    """
    return synth_train.make_plan(cfg, dataset_size)


def finetune(
    task: PrivORLNTask,
    params: Any,
    sens_x: np.ndarray,
    run_dir: Path,
    ledger: privacy.Ledger | None,
    key: jax.Array,
    topo: privacy.Topology,
) -> tuple[synth.SynthState, dict[str, Any]]:
    """DP-SGD fine-tuning on the normalised sensitive rows ``sens_x``.

    Returns (SynthState, the report's DP info).
    """
    cfg, fc, dim = task.cfg, task.cfg.finetune, task.dim
    plan = make_plan(cfg, sens_x.shape[0])
    num_curious = synth.num_replaced(fc.batch_size, fc.curiosity_rate)
    fns = synth.make_transition_dp_finetune(
        task.denoise,
        plan,
        learning_rate=fc.learning_rate,
        ema_decay=cfg.synthesis.ema_decay,
        num_noise=fc.num_noise,
        clip_method=fc.clip_method,
        # FineCur's synthetic rows are a public count: the mean is over qN real + those
        # rows.
        mean_scale=plan.expected_batch_size / (plan.expected_batch_size + num_curious),
    )
    tree: dict[str, Any] = {"state": fns.init(params)}
    public_rows = None
    if num_curious:
        pool_size = max(cfg.pretrain.pool_size, fc.batch_size)
        tree |= synth.init_finecur(jax.random.fold_in(key, 4), dim, pool_size)

        def sample_pool(k, ema_params):  # a fresh pool per epoch, from the EMA model
            return diffusion.edm_sample(
                k,
                task.denoise,
                ema_params,
                num_samples=pool_size,
                dim=dim,
                num_steps=cfg.pretrain.num_sampling_steps,
            )

        public_rows = synth.make_finecur_rows(
            fns.clip,
            sample_pool,
            key,
            dim=dim,
            num_curious=num_curious,
            num_candidates=fc.batch_size,
            microbatch_size=fc.microbatch_size,
            steps_per_epoch=max(1, round(1 / plan.sampling_rate)),
        )
    # One unit = one transition: each is its own single item.
    # Under adaptive clipping the report gives the final clip norm (a DP release).
    stats = privacy.LoopStats()
    tree, secret = synth_train.run_finetune(
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
        stats=stats,
    )
    info = synth_train.dp_info(
        plan,
        secret,
        cfg.privacy,
        final_clip_norm=stats.final_l2_clip_norm,
        size_source="read from the sensitive data and treated as public",
    )
    return tree["state"], info


# ---------------------------------------------------------------------------- synthesis
def synthesize(task: PrivORLNTask, params: Any, key: jax.Array) -> data.Transitions:
    """``synthesis.num_samples`` transitions sampled from ``params``.

    Decoded, actions clipped to ``synthesis.action_bounds``.
    """
    sc = task.cfg.synthesis
    out = []
    with tqdm(total=sc.num_samples, desc="synthesize", unit="transition") as bar:
        for i, start in enumerate(range(0, sc.num_samples, sc.batch_size)):
            n = min(sc.batch_size, sc.num_samples - start)
            x = diffusion.edm_sample(
                jax.random.fold_in(key, i),
                task.denoise,
                params,
                num_samples=sc.batch_size,
                dim=task.dim,
                num_steps=sc.num_sampling_steps,
            )[:n]
            out.append(np.asarray(diffusion.denormalise(task.norm, x)))
            bar.update(n)
    flat = jnp.asarray(np.concatenate(out))
    synthetic = diffusion.unflatten_transitions(flat, task.layout)
    if sc.action_bounds:
        synthetic = synthetic.replace(
            actions=jnp.clip(synthetic.actions, *sc.action_bounds)
        )
    return jax.tree_util.tree_map(np.asarray, synthetic)
