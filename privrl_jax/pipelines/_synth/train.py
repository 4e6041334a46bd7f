"""Training of the diffusion synthesizers.

The curiosity pre-training loop on public rows and the DP fine-tuning wiring around the
one DP loop (``_dp_loop.run_dp_loop``).

The privacy contract is the DP loop's (docs/design.md, contracts 2-6 and 8): noise only
from a `DPSecret`, every step in the ledger before its checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from privrl_jax import privacy, synth
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._dp_loop import DPSecret, run_dp_loop
from privrl_jax.pipelines._synth.release import noise_secret


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
    """Curiosity-driven pre-training on public ``rows`` (resumed from ``ckpt``).

    Returns the SynthState.

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


def make_plan(cfg: Any, num_units: int) -> privacy.DPPlan:
    """The fine-tune's DP plan: Poisson sampling over the ``num_units`` sensitive units.

    q = batch / N, C, steps = ceil(epochs / q), sigma calibrated for (epsilon, delta)
    under ``privacy.accountant``.
    """
    fc, pc = cfg.finetune, cfg.privacy
    q = min(1.0, fc.batch_size / num_units)
    sampler = privacy.PoissonSampler(
        dataset_size=num_units, sampling_rate=q, microbatch_size=fc.microbatch_size
    )
    plan = privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=fc.l2_clip_norm,
        steps=max(1, math.ceil(fc.epochs / q)),
        adaptive_clipping=(
            None
            if fc.adaptive_clip_quantile is None
            else privacy.AdaptiveClipping(target_quantile=fc.adaptive_clip_quantile)
        ),
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
    stats: privacy.LoopStats | None = None,
):
    """Run (or resume) the plan's DP steps on ``units`` in the one DP loop.

    ``units``' leading axis is the privacy units. Returns (tree, secret); ``stats``,
    when given, receives the loop's :class:`privacy.LoopStats` (under adaptive
    clipping its ``final_l2_clip_norm``).
    ``tree["state"]`` is the method's state, updated by ``fns.update`` from the noisy
    mean; the secret comes from the OS unless ``privacy.noise_seed`` fixes it (then the
    run is not private).
    """
    fc, pc = cfg.finetune, cfg.privacy
    secret = noise_secret(cfg)

    def update(tree, noisy_mean):
        return {**tree, "state": fns.update(tree["state"], noisy_mean)}

    return run_dp_loop(
        plan,
        privacy.DPMethod(fns.clip, lambda t: t["state"].params, update, public_rows),
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
        stats=stats,
    )


def dp_info(
    plan: privacy.DPPlan,
    secret: DPSecret,
    pc: Any,
    *,
    size_source: str,
    unit: str | None = None,
    clip_method: str | None = None,
    final_clip_norm: float | None = None,
) -> dict[str, Any]:
    """The report's ``finetune`` section.

    The plan, flat copies of its fields that reports and scripts read, and whether the
    run is private. ``size_source`` says where N came from when ``privacy.dataset_size``
    is not declared; ``unit`` and ``clip_method`` are written when given, and
    ``final_clip_norm`` (the clip norm C after the last step under adaptive clipping,
    a DP release) as ``final_l2_clip_norm``.
    """
    return {
        **plan.describe(),
        **({"unit": unit} if unit is not None else {}),
        "noise_multiplier": plan.noise_multipliers[0],
        **({"clip_method": clip_method} if clip_method is not None else {}),
        **(
            {"final_l2_clip_norm": final_clip_norm}
            if final_clip_norm is not None
            else {}
        ),
        "private": plan.private and not secret.fixed,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; stored only in checkpoints/",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if pc.dataset_size is not None
        else size_source,
    }
