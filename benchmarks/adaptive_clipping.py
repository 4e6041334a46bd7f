"""Adaptive clipping (issue 50 item 2) against a sweep of fixed clip norms, at equal
epsilon, on a toy linear regression.

Every row runs the same plan (Poisson sampling, the same steps, the same noise
multiplier z calibrated to each of ``--epsilons`` at ``--delta``, so the same
accounted epsilon) through ``privacy.fit`` with the same SGD step. The rows differ
only in the clip norm: a fixed C from the sweep, or
``DPPlan(adaptive_clipping=AdaptiveClipping(...))`` started at ``--c0``. That is
Andrew et al. 2021: the clip norm follows a private estimate of the ``--quantile``
quantile of the per-example gradient norms; the count's noise is split out of z, so
its cost is inside the accounted epsilon.

Honest comparison: the epsilon of each row is that of ONE run. Choosing the best fixed
C of the sweep reads the private data ``len(--clips)`` times and its selection cost is
NOT accounted (the "best fixed" row is an oracle that the accounted epsilon does not
cover); adaptive clipping's row is one accounted run with no tuning of C.

The task: x ~ N(0, I_d), y = x.w* + N(0, 0.5^2), w* ~ N(0, I_d) (per seed); the loss of
one example is (x.w - y)^2 / 2, whose gradient norm shrinks about 10x from w = 0 to w*,
the situation adaptive clipping is for. Utility: test MSE on 2,000 held-out points
(the noise floor is 0.25). Seeds change the data, w* and the DP noise.

Usage: python benchmarks/adaptive_clipping.py [--seeds 5] [--epsilons 0.5 2]
Writes benchmarks/results/adaptive_clipping.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import summary, write_results  # noqa: E402

from privrl_jax import privacy  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def per_example_loss(w, item):
    """(x.w - y)^2 / 2 of one example ``item = (x, y)``."""
    x, y = item
    return 0.5 * (jnp.dot(x, w) - y) ** 2


def make_data(seed: int, n: int, dim: int, n_test: int = 2000):
    """Training units [n, 1, ...] and a held-out set of the seed's regression task."""
    rng = np.random.default_rng(seed)
    w_star = rng.normal(size=dim).astype(np.float32)
    x = rng.normal(size=(n + n_test, dim)).astype(np.float32)
    y = (x @ w_star + 0.5 * rng.normal(size=n + n_test)).astype(np.float32)
    train = (x[:n, None], y[:n, None])
    return train, (x[n:], y[n:])


def test_mse(w, test) -> float:
    x, y = test
    return float(np.mean((x @ np.asarray(w) - y) ** 2))


def run(plan, data, test, lr, seed):
    dim = data[0].shape[-1]
    method, state = privacy.gradient_method(
        plan, per_example_loss, optax.sgd(lr), jnp.zeros(dim, jnp.float32)
    )
    stats = privacy.LoopStats()
    out = privacy.fit(
        plan, method, data, state, secret=privacy.DPSecret.from_seed(seed), stats=stats
    )
    return test_mse(out.state.params, test), [float(c) for c in stats.clip_norms]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 2.0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--rate", type=float, default=0.01, help="Poisson sampling rate")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument(
        "--clips", type=float, nargs="+", default=[0.3, 1.0, 3.0, 10.0, 30.0]
    )
    ap.add_argument("--c0", type=float, default=1.0, help="adaptive: initial C")
    ap.add_argument("--quantile", type=float, default=0.5)
    ap.add_argument("--clip-lr", type=float, default=0.2)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    sampler = privacy.PoissonSampler(
        dataset_size=args.n, sampling_rate=args.rate, microbatch_size=128
    )
    config = privacy.AdaptiveClipping(
        target_quantile=args.quantile, learning_rate=args.clip_lr
    )
    adaptive_name = f"adaptive (q = {args.quantile:g}, C0 = {args.c0:g})"
    t0 = time.perf_counter()
    runs, sections, lines = [], {}, []
    for target in args.epsilons:
        z = (
            privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=args.steps)
            .calibrate(target, args.delta)
            .noise_multipliers[0]
        )
        rows = {
            f"fixed C = {c:g}": privacy.DPPlan(
                sampler=sampler, l2_clip_norm=c, steps=args.steps, noise_multiplier=z
            )
            for c in args.clips
        }
        adaptive_plan = privacy.DPPlan(
            sampler=sampler,
            l2_clip_norm=args.c0,
            steps=args.steps,
            noise_multiplier=z,
            adaptive_clipping=config,
        )
        rows[adaptive_name] = adaptive_plan
        eps = {k: p.epsilon(args.delta).epsilon for k, p in rows.items()}
        # Equal epsilon: the same event for every row (adaptive's count is inside z).
        assert len(set(eps.values())) == 1, eps
        epsilon = next(iter(eps.values()))
        for seed in range(args.seeds):
            data, test = make_data(seed, args.n, args.dim)
            for name, plan in rows.items():
                mse, clips = run(plan, data, test, args.lr, seed)
                runs.append(
                    {
                        "target_epsilon": target,
                        "seed": seed,
                        "row": name,
                        "test_mse": mse,
                        **({"final_clip_norm": clips[-1]} if clips else {}),
                    }
                )
        mine = [r for r in runs if r["target_epsilon"] == target]

        def mses(name, mine=mine):
            return [r["test_mse"] for r in mine if r["row"] == name]

        table = {name: summary(mses(name)) for name in rows}
        fixed = [k for k in rows if k.startswith("fixed")]
        best = min(fixed, key=lambda k: table[k]["mean"])
        # Paired by seed (same data and noise seed): adaptive minus the best fixed.
        diff = summary(
            [a - b for a, b in zip(mses(adaptive_name), mses(best), strict=True)]
        )
        final_c = summary(
            [r["final_clip_norm"] for r in mine if r["row"] == adaptive_name]
        )
        sections[f"{target:g}"] = {
            "epsilon": epsilon,
            "noise_multiplier": z,
            "gradient_noise_multiplier_adaptive": (
                adaptive_plan.gradient_noise_multiplier
            ),
            "count_noise_std_adaptive": adaptive_plan.count_noise_std,
            "table": table,
            "best_fixed": best,
            "adaptive_minus_best_fixed": diff,
            "adaptive_final_clip_norm": final_c,
        }
        lines += [
            f"## epsilon = {epsilon:.4f} (z = {z:.4f} for every row)",
            "",
            "| clip norm | seeds | accounted epsilon | test MSE (lower) |",
            "|---|---|---|---|",
        ]
        for name in rows:
            s = table[name]
            mark = " (best fixed)" if name == best else ""
            lines.append(
                f"| {name}{mark} | {s['n']} | {eps[name]:.4f} | "
                f"{s['mean']:.4f} ± {s['std']:.4f} [±{s['ci95']:.4f}] |"
            )
        lines += [
            "",
            f"Adaptive minus best fixed, paired by seed: {diff['mean']:+.4f} "
            f"[±{diff['ci95']:.4f}]. Adaptive's final C: {final_c['mean']:.3f} ± "
            f"{final_c['std']:.3f}; its gradient noise multiplier z_Delta = "
            f"{adaptive_plan.gradient_noise_multiplier:.4f} (count noise std "
            f"{adaptive_plan.count_noise_std:g} = expected batch / 20).",
            "",
        ]
    wall = time.perf_counter() - t0
    intro = [
        "# Adaptive clipping vs fixed clip norms at equal epsilon (toy regression)",
        "",
        f"Linear regression, N = {args.n}, d = {args.dim}, Poisson q = {args.rate}, "
        f"{args.steps} steps, SGD lr {args.lr}. Within a section every row has the "
        "same noise multiplier z, so every row is one run at the same accounted "
        f"epsilon (RDP, delta = {args.delta:g}). Test MSE (noise floor 0.25), mean "
        f"± std [95% t half-width] over {args.seeds} seeds (data, w* and DP noise "
        "per seed). Adaptive: Andrew et al. 2021, target quantile "
        f"{args.quantile:g}, eta_C = {args.clip_lr:g}, C0 = {args.c0:g}. Written by "
        "`benchmarks/adaptive_clipping.py`.",
        "",
        "**The best fixed row's epsilon is not the cost of choosing it**: picking "
        f"the best of the {len(args.clips)} fixed clip norms ran {len(args.clips)} "
        "trainings on the private data, and that choice is not accounted (an "
        "oracle; accounting it, e.g. with privacy.select, would raise its "
        "epsilon). The adaptive row is one accounted run with no tuning of C: its "
        "count of unclipped examples is paid inside the same epsilon.",
        "",
    ]
    md = "\n".join(intro + lines + [f"Wall time of all runs: {wall:.1f} s.", ""])
    print(md)
    payload = {
        "config": vars(args),
        "by_target_epsilon": sections,
        "runs": runs,
        "wall_s": wall,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_results(out, "adaptive_clipping", payload, md)
    return payload


if __name__ == "__main__":
    main()
