"""DP-SGD step throughput vs the non-private step, for the EDM residual-MLP denoiser.

Each (model, method) runs in its own subprocess so that its peak memory (ru_maxrss) is
its own. Throughput is the median over >= 20 timed steps after warm-up, in examples/s,
at batch 256.

    python benchmarks/dpsgd_throughput.py                   # both configs, all methods
    python benchmarks/dpsgd_throughput.py --configs small --steps 30

Writes benchmarks/results/dpsgd_throughput.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import sys
import time

import _harness as h

from privrl_jax.privacy._aggregation import dpsgd, make_dp_step
from privrl_jax.privacy._clipping import clipped_grad

CONFIGS = {
    # name: (input dim, width, depth)
    "small": (11, 256, 4),
    "big": (130, 1024, 6),
}
METHODS = ("nonprivate", "dp_vmap", "dp_vmap_mb32", "dp_ghost")


def worker(config: str, method: str, batch: int, steps: int, warmup: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from privrl_jax import privacy
    from privrl_jax.diffusion import EDMDenoiser, ResidualMLP, edm_loss

    dim, width, depth = CONFIGS[config]
    model = ResidualMLP(width=width, depth=depth)
    params = model.init(jax.random.key(0), jnp.zeros(dim), jnp.zeros(()))
    denoise = EDMDenoiser(model.apply)
    n_params = h.num_params(params)
    x = jax.random.normal(jax.random.key(1), (batch, dim))

    def item_loss(p, xi, key):
        return edm_loss(denoise, p, xi, key)

    if method == "nonprivate":
        tx = optax.adam(1e-4)

        @jax.jit
        def step(state, x, key):
            p, o = state
            keys = jax.random.split(key, x.shape[0])
            g = jax.grad(
                lambda p: jnp.mean(jax.vmap(item_loss, (None, 0, 0))(p, x, keys))
            )(p)
            u, o = tx.update(g, o, p)
            return optax.apply_updates(p, u), o

        state = (params, tx.init(params))
        run = lambda s, k: step(s, x, k)  # noqa: E731
    else:
        kwargs = {
            "dp_vmap": dict(method="vmap"),
            "dp_vmap_mb32": dict(method="vmap", microbatch_size=32),
            "dp_ghost": dict(method="ghost"),
        }[method]
        clip = clipped_grad(item_loss, l2_clip_norm=1.0, uses_key=True, **kwargs)
        tx = dpsgd(
            optax.adam(1e-4),
            noise_multiplier=1.0,
            l2_clip_norm=1.0,
            expected_batch_size=batch,
            key=jax.random.key(2),
        )
        dp = make_dp_step(clip, tx)
        step = jax.jit(dp.step)
        state = privacy.DPTrainState(params, tx.init(params))
        mask = jnp.ones((batch, 1), bool)
        run = lambda s, k: step(s, x[:, None], mask, k)[0]  # noqa: E731

    times = []
    for t in range(warmup + steps):
        t0 = time.perf_counter()
        state = run(state, jax.random.key(100 + t))
        jax.block_until_ready(state)
        if t >= warmup:
            times.append(time.perf_counter() - t0)
    med = float(np.median(times))
    return {
        "config": config,
        "method": method,
        "params": int(n_params),
        "batch": batch,
        "steps_timed": steps,
        "median_step_s": med,
        "examples_per_s": batch / med,
        "peak_rss_gb": h.peak_rss_mb() / 1024,
        "device": str(jax.devices()[0].platform),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--configs", default="small,big")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--worker", nargs=2, metavar=("CONFIG", "METHOD"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.steps < 20 and not args.worker:
        print(
            "note: fewer than 20 timed steps; medians are less stable", file=sys.stderr
        )
    if args.worker:
        h.emit(worker(*args.worker, args.batch, args.steps, args.warmup))
        return

    from tqdm import tqdm

    rows = []
    jobs = [(c, m) for c in args.configs.split(",") for m in args.methods.split(",")]
    for config, method in tqdm(jobs, desc="dpsgd_throughput"):
        flags = ["--batch", str(args.batch), "--steps", str(args.steps)]
        row, err = h.run_worker(
            ["--worker", config, method, *flags, "--warmup", str(args.warmup)],
            __file__,
        )
        if row is None:
            tqdm.write(f"{config}/{method} failed:\n{err}")
            continue
        rows.append(row)

    base = {r["config"]: r for r in rows if r["method"] == "nonprivate"}
    cells = []
    for r in rows:
        b = base.get(r["config"])
        r["ratio_vs_nonprivate"] = (
            r["examples_per_s"] / b["examples_per_s"] if b else None
        )
        r["mem_ratio_vs_nonprivate"] = (
            r["peak_rss_gb"] / b["peak_rss_gb"] if b else None
        )
        cells.append(
            (
                r["config"],
                f"{r['params']:,}",
                r["method"],
                f"{r['examples_per_s']:,.0f}",
                f"{r['ratio_vs_nonprivate'] or float('nan'):.3f}",
                f"{r['peak_rss_gb']:.2f}",
                f"{r['mem_ratio_vs_nonprivate'] or float('nan'):.2f}",
            )
        )
    head = ("config", "params", "method", "examples/s", "DP / non-DP")
    table = h.markdown_table((*head, "peak RSS (GB)", "mem / non-DP"), cells)
    print(table)
    h.write_outputs(
        h.RESULTS / "dpsgd_throughput",
        rows,
        f"# DP-SGD throughput (batch {args.batch}, median of {args.steps} "
        f"steps)\n\n{table}\n",
    )


if __name__ == "__main__":
    main()
