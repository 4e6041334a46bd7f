"""DP steps per second of the one DP loop on 1 process vs P processes (jax.distributed,
CPU, gloo).

PrivORL-n's small denoiser (EDM residual MLP, dim 12, width 256, depth 3), Poisson q =
256 / N, microbatches of 64, vmap clipping, Adam. Each configuration runs as its own
launch (``pipelines.launch_local``, one forced CPU device per process); the per-step
time is the time from the end of step ``--warmup`` to the end of the run (its final
checkpoint included, which waits for the last step) divided by the steps in between, so
start-up and compilation drop out. On a 2-core machine P = 2 cannot be
faster: the table shows the overhead of the collective and of the per-process gather,
and that the release is the same (largest parameter difference to the 1-process run).

    python benchmarks/multihost_speed.py [--steps 60] [--warmup 10] [--processes 1 2]

Writes benchmarks/results/multihost_speed.{json,md} and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import _harness as h

N = 4096


def worker(steps: int, warmup: int, out: Path) -> None:
    """One process of a launch: the DP loop for ``steps`` steps, its wall time and final
    params."""
    from privrl_jax import privacy  # noqa: PLC0415

    topo = privacy.initialize_distributed(privacy.DistributedConfig.from_env())
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from privrl_jax import (  # noqa: PLC0415
        diffusion,
        privacy,
        synth,  # noqa: PLC0415
    )
    from privrl_jax.privacy import Checkpoints, LoopStats  # noqa: PLC0415

    net = diffusion.ResidualMLP(width=256, depth=3)
    denoise = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.key(0), jnp.zeros(12), jnp.zeros(()))
    data = np.asarray(jax.random.normal(jax.random.key(1), (N, 12)), np.float32)[
        :, None
    ]
    sampler = privacy.PoissonSampler(
        dataset_size=N, sampling_rate=256 / N, microbatch_size=64
    )
    plan = privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=steps, noise_multiplier=1.0
    )
    fns = synth.make_transition_dp_finetune(denoise, plan, learning_rate=3e-4)
    ledger = None
    if topo.is_primary:
        ledger = privacy.Ledger.open(
            out,
            dataset_id="bench",
            dataset_size=N,
            target_epsilon=1e9,
            target_delta=1e-5,
        )
    stats = LoopStats()
    recorder = privacy.RunRecorder(
        Checkpoints(out / "ckpt"), ledger, what="bench step", checkpoint_every=10**9
    )
    state = privacy.fit(
        plan,
        privacy.DPMethod(fns.clip, lambda s: s.params, fns.update),
        topo.local_block(data),
        fns.init(params),
        secret=privacy.DPSecret.from_seed(0),
        recorder=recorder,
        callbacks=(privacy.ProgressBar("DP steps"),),
        topology=topo,
        loss_key=jax.random.key(2),
        stats=stats,
    ).state
    per_step = (time.perf_counter() - stats.step_end_s[warmup - 1]) / (steps - warmup)
    if topo.is_primary:
        leaves = [
            np.asarray(x).ravel() for x in jax.tree_util.tree_leaves(state.params)
        ]
        (out / "timing.json").write_text(
            json.dumps(
                {"per_step_s": per_step, "params": np.concatenate(leaves).tolist()}
            )
        )


def _launch(processes: int, steps: int, warmup: int) -> dict:
    from privrl_jax import pipelines  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        pipelines.launch_local(
            [
                sys.executable,
                __file__,
                "--worker",
                "--steps",
                str(steps),
                "--warmup",
                str(warmup),
                "--out",
                str(out),
            ],
            processes,
            devices_per_process=1,
        )
        return json.loads((out / "timing.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.warmup, args.out)
        return
    import numpy as np  # noqa: PLC0415

    if not 0 < args.warmup < args.steps:
        parser.error("--warmup must be between 1 and --steps - 1.")
    rows, reference = [], None
    for p in args.processes:
        run = _launch(p, args.steps, args.warmup)
        per_step = run["per_step_s"]
        params = np.asarray(run["params"])
        reference = params if reference is None else reference
        rows.append(
            {
                "processes": p,
                "steps_per_s": 1.0 / per_step,
                "ms_per_step": 1e3 * per_step,
                "max_param_diff_vs_first": float(np.max(np.abs(params - reference))),
            }
        )
        print(f"{p} process(es): {1e3 * per_step:.1f} ms/step", flush=True)
    base = rows[0]["steps_per_s"]
    for r in rows:
        r["speed_vs_first"] = r["steps_per_s"] / base
    cells = [
        (
            r["processes"],
            f"{r['ms_per_step']:.1f}",
            f"{r['steps_per_s']:.2f}",
            f"{r['speed_vs_first']:.2f}x",
            f"{r['max_param_diff_vs_first']:.2e}",
        )
        for r in rows
    ]
    head = ("processes", "ms / DP step", "steps / s", "speed vs first")
    table = h.markdown_table((*head, "max param diff vs first"), cells)
    meta = {
        "steps": args.steps,
        "warmup": args.warmup,
        "dataset_size": N,
        "model": "ResidualMLP(256, 3), dim 12",
        "devices_per_process": 1,
    }
    h.write_outputs(h.RESULTS / "multihost_speed", {"meta": meta, "rows": rows}, table)
    print(table)


if __name__ == "__main__":
    main()
