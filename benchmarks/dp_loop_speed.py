"""The one DP loop vs the hand-built PrivORL-n loop it replaced, and the DP noise draw,
side by side.

1. **DP step.** PrivORL-n's fine-tuning step (EDM residual-MLP denoiser, Poisson q = 256
   / N, microbatches of 64, vmap clipping, Adam + EMA) run two ways on the same data and
   plan: ``previous``: the loop this library used before the DP plan (host gather of
   each microbatch, noise inside an optax transform); ``dp_loop``:
   ``privacy.fit`` with a ``privacy.RunRecorder`` over a run directory, as every
   pipeline runs it (data on the device, gathered inside jit; the plan's noise). The
   per-step time is the difference between a run of ``--steps`` and one of ``--steps
   // 4`` steps divided by the step difference, so compilation and checkpoint costs
   cancel.
2. **Noise draw** on the parameter tree of each denoiser: ours (``add_noise``:
   per-leaf ``jax.random.normal`` with split keys on JAX's default stream since this
   benchmark showed it fastest), the previous flat draw of JAX's original Threefry
   stream split over the leaves, jax-privacy 2.0's per-leaf scheme, and per-leaf on the
   original stream. Median of 20 jitted calls, milliseconds.

    python benchmarks/dp_loop_speed.py [--steps 80] [--configs small big]

Writes benchmarks/results/dp_loop_speed.{json,md} and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import _harness as h
import jax
import jax.numpy as jnp
import numpy as np
import optax

from privrl_jax import diffusion, privacy, synth
from privrl_jax.privacy import Checkpoints
from privrl_jax.privacy._aggregation import (
    add_noise,
    dpsgd,
    make_dp_step,
    standard_normal,
)
from privrl_jax.privacy._clipping import clipped_grad
from privrl_jax.synth._privorl_n import ema_update

CONFIGS = {"small": (12, 256, 3), "big": (130, 1024, 6)}  # (dim, width, depth)
RESULTS = h.RESULTS


def _setup(config: str, n: int):
    dim, width, depth = CONFIGS[config]
    net = diffusion.ResidualMLP(width=width, depth=depth)
    denoise = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.key(0), jnp.zeros(dim), jnp.zeros(()))
    data = np.asarray(jax.random.normal(jax.random.key(1), (n, dim)), np.float32)
    return denoise, params, data


def _plan(n: int, steps: int) -> privacy.DPPlan:
    sampler = privacy.PoissonSampler(
        dataset_size=n, sampling_rate=256 / n, microbatch_size=64
    )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=steps, noise_multiplier=1.0
    )


def run_previous(denoise, params, data, plan, seed: int) -> None:
    """The pre-plan PrivORL-n loop: host gather per microbatch,
    noise in an optax chain."""
    fns = synth.make_transition_dp_finetune(denoise, plan, learning_rate=3e-4)
    item_loss = fns.clip.per_item_fn
    clip = clipped_grad(item_loss, l2_clip_norm=1.0, uses_key=True)
    tx = dpsgd(
        optax.adam(3e-4),
        noise_multiplier=1.0,
        l2_clip_norm=1.0,
        expected_batch_size=plan.expected_batch_size,
        key=jax.random.key(2),
    )
    dp = make_dp_step(clip, tx)
    accumulate = jax.jit(dp.accumulate, donate_argnums=0)

    @jax.jit
    def apply(state, acc):
        new = dp.apply(privacy.DPTrainState(state.params, state.opt_state), acc)
        ema = ema_update(state.ema_params, new.params, 0.995)
        return synth.SynthState(new.params, ema, new.opt_state, state.step + 1)

    state = synth.SynthState(params, params, tx.init(params), jnp.zeros([], jnp.int32))
    key = jax.random.key(3)
    for t, batch in enumerate(plan.batches(seed)):
        acc = jax.tree_util.tree_map(jnp.zeros_like, state.params)
        kt = jax.random.fold_in(key, t)
        for j in range(batch.indices.shape[0]):
            x = jnp.asarray(data[batch.indices[j]])[:, None]
            acc, _ = accumulate(
                acc,
                state.params,
                x,
                jnp.asarray(batch.mask[j])[:, None],
                jax.random.fold_in(kt, j),
            )
        state = apply(state, acc)
    jax.block_until_ready(state.params)


def run_loop(denoise, params, data, plan, seed: int, tmp: Path) -> None:
    fns = synth.make_transition_dp_finetune(denoise, plan, learning_rate=3e-4)
    ledger = privacy.Ledger.open(
        tmp,
        dataset_id="bench",
        dataset_size=plan.dataset_size,
        target_epsilon=1e9,
        target_delta=1e-9,
    )
    recorder = privacy.RunRecorder(
        Checkpoints(tmp / "ckpt"), ledger, what="bench", checkpoint_every=plan.steps
    )
    result = privacy.fit(
        plan,
        privacy.DPMethod(fns.clip, lambda s: s.params, fns.update),
        data[:, None],
        fns.init(params),
        secret=privacy.DPSecret.from_seed(seed),
        recorder=recorder,
        callbacks=(privacy.ProgressBar("dp_loop"),),
        loss_key=jax.random.key(3),
    )
    jax.block_until_ready(result.state.params)


def time_step(fn, steps: int) -> float:
    """Seconds per step: (time of ``steps`` - time of ``steps // 4``) / the step
    difference."""
    short = max(2, steps // 4)
    t_short, t_long = (h.timed(lambda s=s: fn(s))[1] for s in (short, steps))
    return (t_long - t_short) / (steps - short)


def noise_draws(config: str, reps: int = 20) -> dict[str, float]:
    _, params, _ = _setup(config, 10)

    def per_leaf(tree, key):
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        keys = jax.random.split(key, len(leaves))
        noised = [
            x + jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys)
        ]
        return jax.tree_util.tree_unflatten(treedef, noised)

    def per_leaf_original(tree, key):
        with jax.threefry_partitionable(False):
            return per_leaf(tree, key)

    def flat_original(
        tree, key
    ):  # the draw this library used before (one flat vector, split)
        leaves, treedef = jax.tree_util.tree_flatten(tree)
        sizes = [x.size for x in leaves]
        z = standard_normal(key, sum(sizes))
        parts = jnp.split(z, np.cumsum(sizes)[:-1])
        return jax.tree_util.tree_unflatten(
            treedef, [x + p.reshape(x.shape) for x, p in zip(leaves, parts)]
        )

    fns = {
        "ours": lambda t, k: add_noise(t, k, 1.0),
        "flat_original_stream": flat_original,
        "per_leaf_default_stream": per_leaf,
        "per_leaf_original_stream": per_leaf_original,
    }
    keys = iter(range(10**9))  # a new key each call
    timings = h.interleave(
        {
            k: (lambda f=jax.jit(f): f(params, jax.random.key(next(keys))))
            for k, f in fns.items()
        },
        rounds=reps,
        order="fixed",
    )
    return {name: 1000 * timings.median(name) for name in fns}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--configs", nargs="+", default=["small", "big"])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument(
        "--noise-only", action="store_true", help="re-measure the noise draws only"
    )
    args = ap.parse_args()
    rows = []
    for config in args.configs:
        denoise, params, data = _setup(config, args.n)
        if args.noise_only:
            prev_rows = json.loads((RESULTS / "dp_loop_speed.json").read_text())["rows"]
            row = next(r for r in prev_rows if r["config"] == config)
            row |= {f"noise_{k}_ms": v for k, v in noise_draws(config).items()}
            row.pop("noise_ours_flat_original_stream_ms", None)
            rows.append(row)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            counter = iter(range(1000))

            def loop(steps):
                d = Path(tmp) / f"run{next(counter)}"
                run_loop(denoise, params, data, _plan(args.n, steps), 0, d)

            prev = time_step(
                lambda s: run_previous(denoise, params, data, _plan(args.n, s), 0),
                args.steps,
            )
            new = time_step(loop, args.steps)
        noise = noise_draws(config)
        rows.append(
            {
                "config": config,
                "n_params": h.num_params(params),
                "previous_ms_per_step": 1000 * prev,
                "dp_loop_ms_per_step": 1000 * new,
                "loop_speedup": prev / new,
                **{f"noise_{k}_ms": v for k, v in noise.items()},
            }
        )
        print(rows[-1], flush=True)
    for r in rows if not args.noise_only else []:
        r |= {
            "steps": args.steps,
            "short_steps": max(2, args.steps // 4),
            "load_avg": os.getloadavg()[0],
        }
    # Rows of configs not run this time are kept from the previous results file.
    out_json = RESULTS / "dp_loop_speed.json"
    if out_json.exists():
        old = [
            r
            for r in json.loads(out_json.read_text())["rows"]
            if r["config"] not in args.configs
        ]
        rows = sorted(old + rows, key=lambda r: list(CONFIGS).index(r["config"]))
    head = ("config", "params", "steps (long/short)", "load")
    head += ("previous loop (ms/step)", "DP loop (ms/step)", "previous / DP loop")
    head += (
        "noise: ours, privacy.add_noise (ms)",
        "flat draw, original stream (previous)",
    )
    head += ("per-leaf, default stream (jax-privacy 2.0)", "per-leaf, original stream")
    cells = []
    for r in rows:
        flat = r.get(
            "noise_flat_original_stream_ms", r.get("noise_ours_flat_original_stream_ms")
        )
        cells.append(
            (r["config"], f"{r['n_params']:,}", f"{r['steps']}/{r['short_steps']}")
            + (f"{r['load_avg']:.1f}", f"{r['previous_ms_per_step']:.1f}")
            + (f"{r['dp_loop_ms_per_step']:.1f}", f"{r['loop_speedup']:.2f}")
            + (f"{r.get('noise_ours_ms', float('nan')):.1f}", f"{flat:.1f}")
            + (f"{r['noise_per_leaf_default_stream_ms']:.1f}",)
            + (f"{r['noise_per_leaf_original_stream_ms']:.1f}",)
        )
    table = (
        f"DP step: PrivORL-n fine-tuning, N = {args.n}, q = 256/N, microbatch 64, vmap "
        "clipping; per-step time from two runs of different lengths, differenced. "
        f"{h.host_line()}.\n\n" + h.markdown_table(head, cells)
    )
    print(table)
    h.write_outputs(
        RESULTS / "dp_loop_speed",
        {"rows": rows},
        f"# DP loop and noise draw speed\n\n{table}\n",
    )


if __name__ == "__main__":
    main()
