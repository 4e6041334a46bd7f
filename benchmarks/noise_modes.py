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
import itertools

import _harness as h
import jax
import jax.numpy as jnp
import numpy as np

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
    h.timing_args(ap, rounds=5, reps=3)
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
        calls = itertools.count()  # a new key each call
        compiled = {
            name: jax.jit(plan.privatize).lower(x, jax.random.key(0)).compile()
            for name, plan in modes.items()
        }
        fns = {
            name: (lambda f=f: f(x, jax.random.key(next(calls))))
            for name, f in compiled.items()
        }
        timings = h.interleave(
            fns, rounds=args.rounds, reps=args.reps, order="alternate", per_call=False
        )
        g = np.median(timings.flat("gaussian"))
        d = np.median(timings.flat("discrete"))
        ratio = h.spread(timings.ratios("discrete", "gaussian"))
        rows.append(
            {
                "size": size,
                "gaussian_s": float(g),
                "discrete_s": float(d),
                **{f"ratio_{k}": v for k, v in ratio.items()},
            }
        )
        print(
            f"| {size:,} | {g:.4f} | {d:.4f} | "
            f"{ratio['median']:.1f}x [{ratio['min']:.1f}, {ratio['max']:.1f}] |"
        )
    if args.out:
        h.dump_json(args.out, {"rows": rows, "args": vars(args)}, indent=2)


if __name__ == "__main__":
    main()
