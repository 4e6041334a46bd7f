"""Ghost clipping of a small CNN against the per-unit (vmap) path, side by side.

A CNN on 16 x 16 x 3 images: Conv(16, 3x3, SAME), Conv(32, 3x3, stride 2), grouped
Conv(32, 3x3, stride 2, 4 groups), mean pooling, Dense(10); squared error to a target.
Pieces, each compiled ahead of time and timed interleaved (in a new random order each
round) on ``--threads`` pinned cores:

- ``nonprivate_grad``: the gradient of the mean loss;
- ``vmap_clipped_sum``: per-unit gradients by ``vmap(grad)``, clipped and summed
  (``clipped_grad(method="vmap")``);
- ``ghost_clipped_sum``: ``clipped_grad(method="ghost")`` (patch norms, one reweighted
  weight gradient per conv).

First the two clipped sums are checked equal (float32 rounding). Prints and writes
``benchmarks/results/ghost_conv_speed.{md,json}``: ms (median, fastest), the ratio to
the vmap path, HLO ops and XLA temp memory of each compiled piece.

    python benchmarks/ghost_conv_speed.py --threads 1 --batch 64
"""

from __future__ import annotations

import argparse

import _harness as h

from privrl_jax.privacy._clipping import clipped_grad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.timing_args(p, rounds=5, reps=3, threads=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument(
        "--out",
        default=str(h.RESULTS / "ghost_conv_speed"),
    )
    args = p.parse_args()
    h.pin_threads(args.threads)

    import flax.linen as nn  # noqa: PLC0415
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from privrl_jax import privacy  # noqa: PLC0415

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.Conv(16, (3, 3), padding="SAME")(x))
            h = nn.relu(nn.Conv(32, (3, 3), strides=2)(h))
            h = nn.relu(nn.Conv(32, (3, 3), strides=2, feature_group_count=4)(h))
            return nn.Dense(10)(jnp.mean(h, axis=(-3, -2)))

    model = CNN()
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(args.batch, 16, 16, 3)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(args.batch, 10)), jnp.float32)
    params = jax.jit(model.init)(jax.random.key(0), x[0])

    def loss(p, item):
        xi, yi = item
        return jnp.sum((model.apply(p, xi) - yi) ** 2)

    units = (x[:, None], y[:, None])
    mask = jnp.ones((args.batch, 1), bool)
    ghost = clipped_grad(loss, l2_clip_norm=1.0, method="ghost")
    vmap = clipped_grad(loss, l2_clip_norm=1.0, method="vmap")
    coverage = privacy.ghost_coverage(loss, params, (x[0], y[0]))
    assert all(v.startswith("ghost") for v in coverage.values()), coverage

    pieces = {
        "nonprivate_grad": lambda p: jax.grad(
            lambda p: jnp.mean(jax.vmap(loss, (None, 0))(p, (x, y)))
        )(p),
        "vmap_clipped_sum": lambda p: vmap(p, units, mask)[0],
        "ghost_clipped_sum": lambda p: ghost(p, units, mask)[0],
    }
    compiled = {k: jax.jit(f).lower(params).compile() for k, f in pieces.items()}
    g_ref = compiled["vmap_clipped_sum"](params)
    g_ghost = compiled["ghost_clipped_sum"](params)
    scale = max(float(jnp.max(jnp.abs(a))) for a in jax.tree.leaves(g_ref))
    err = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(jax.tree.leaves(g_ref), jax.tree.leaves(g_ghost))
    )
    assert err <= 2e-5 * scale, (err, scale)
    stats = {
        k: {
            key: v
            for key, v in h.compiled_stats(c).items()
            if key in (*h.HLO_COUNTS, "xla_temp_mb")
        }
        for k, c in compiled.items()
    }
    timings = h.interleave(
        {k: (lambda c=c: c(params)) for k, c in compiled.items()},
        rounds=args.rounds,
        reps=args.reps,
    )
    header = (
        f"ghost vs per-unit clipping, small CNN ({h.num_params(params):,} params, "
        f"batch {args.batch} images 16x16x3), {args.threads} thread(s), "
        f"{timings.protocol()}; "
        f"ghost = vmap to {err / scale:.1e} of the largest coordinate."
    )
    table = timings.ratio_table(
        "vmap_clipped_sum",
        "vmap clipped sum",
        {
            "HLO ops": {k: v["ops"] for k, v in stats.items()},
            "XLA temp MB": {k: f"{v['xla_temp_mb']:.1f}" for k, v in stats.items()},
        },
    )
    text = f"{header}\n\n{table}"
    print(text)
    payload = {"args": vars(args), **timings.ms(), "hlo": stats}
    payload |= {"loads": timings.loads, "relative_error": err / scale}
    h.write_outputs(args.out, payload, text, indent=1)


if __name__ == "__main__":
    main()
