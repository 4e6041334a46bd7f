"""The cost of the floating-point-safe noise: one release of a clipped sum with the
default float32 Gaussian noise and with the discrete Gaussian on a grid, side by side.

Both are ``DPPlan.privatize`` on the same vector (a gradient-sized flat block: the big
denoiser has 6.6M parameters), jitted, compiled ahead of time, then timed in
``--rounds`` interleaved rounds of ``--reps`` calls each; the table gives the median
seconds per release and the ratio discrete / default of the same round (median and
range). Run on one CPU core it answers what the discrete mode costs per step.

    python benchmarks/noise_modes.py --sizes 100000,1000000,6600000 --rounds 5
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _results import dump_json

from privrl_jax import privacy


def _plan(noise):
    return privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=100_000, sampling_rate=0.0025, microbatch_size=256
        ),
        l2_clip_norm=1.0,
        steps=1000,
        noise_multiplier=1.0,
        noise=noise,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,1000000,6600000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--grid-fraction", type=float, default=0.01)
    ap.add_argument("--out", default=None, help="optional JSON file of the table")
    args = ap.parse_args()
    modes = {
        "gaussian": _plan(None),
        "discrete": _plan(privacy.DiscreteGaussianNoise(args.grid_fraction)),
    }
    rows = []
    print(f"device: {jax.devices()[0].device_kind}, {jax.device_count()} device(s)")
    print("| size | gaussian s | discrete s | discrete / gaussian [min, max] |")
    print("|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        x = jnp.asarray(np.random.default_rng(0).normal(size=size) * 1e-3, jnp.float32)
        fns = {
            name: jax.jit(plan.privatize).lower(x, jax.random.key(0)).compile()
            for name, plan in modes.items()
        }
        times = {name: [] for name in fns}
        for r in range(args.rounds):
            order = list(fns)[:: 1 if r % 2 == 0 else -1]
            for name in order:
                key = jax.random.key(r)
                jax.block_until_ready(fns[name](x, key))
                t0 = time.perf_counter()
                for i in range(args.reps):
                    out = fns[name](x, jax.random.fold_in(key, i))
                jax.block_until_ready(out)
                times[name].append((time.perf_counter() - t0) / args.reps)
        g, d = np.asarray(times["gaussian"]), np.asarray(times["discrete"])
        ratio = d / g
        rows.append(
            {
                "size": size,
                "gaussian_s": float(np.median(g)),
                "discrete_s": float(np.median(d)),
                "ratio_median": float(np.median(ratio)),
                "ratio_min": float(ratio.min()),
                "ratio_max": float(ratio.max()),
            }
        )
        print(
            f"| {size:,} | {np.median(g):.4f} | {np.median(d):.4f} | "
            f"{np.median(ratio):.1f}x [{ratio.min():.1f}, {ratio.max():.1f}] |"
        )
    if args.out:
        dump_json(args.out, {"rows": rows, "args": vars(args)}, indent=2)


if __name__ == "__main__":
    main()
