"""PrivORL-j: per-trajectory clipped gradient sum, vmap vs ghost clipping, on the
fragment transformer, beside the plain (non-private) gradient.

One microbatch of trajectories [units, fragments, ...] through ``plan.clipped_grad``
with each method, and the non-private gradient of the same masked sum of fragment
losses (the same per-fragment keys); median wall time of jitted calls (compilation
excluded), interleaved repeats; each compiled function's HLO op count and XLA
temporaries, and the system CPU time and minor page faults of one more call each.
Writes ``benchmarks/results/privorl_j_clip_speed.{json,md}``. Usage:

    PYTHONPATH=. python benchmarks/privorl_j_clip_speed.py [--repeats 5]
        [--configs test,umaze]
"""

from __future__ import annotations

import argparse
import resource

import _harness as h
import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import diffusion, privacy, synth

CONFIGS = {
    # key: (label, (H, fragments, units per microbatch, layers, heads, width))
    "umaze": ("umaze.yaml (H=32, F=10, mb=16, 2x64)", (32, 10, 16, 2, 4, 64)),
    "test": ("test.yaml (H=8, F=8, mb=8, 1x16)", (8, 8, 8, 1, 2, 16)),
}
SIZES = (4, 2, 1, 4, 2)  # maze2d: s, a, r, s' - s, one-hot d
METHODS = ("nonprivate", "vmap", "ghost")


def nonprivate_grad(den):
    """The plain gradient of the masked sum of every fragment's loss.

    Fragment keys as the DP paths draw them: ``split(split(key, units)[u], F)[j]``.
    """

    def grad(params, items, fmask, key):
        units, frags = fmask.shape
        keys = jax.vmap(lambda k: jax.random.split(k, frags))(
            jax.random.split(key, units)
        )
        flat = jax.tree_util.tree_map(
            lambda x: x.reshape((units * frags,) + x.shape[2:]), items
        )

        def total(p):
            losses = jax.vmap(lambda it, k: diffusion.fragment_edm_loss(den, p, it, k))(
                flat, keys.reshape(units * frags, *keys.shape[2:])
            )
            return jnp.sum(jnp.where(fmask.reshape(-1), losses, 0.0))

        return jax.grad(total)(params)

    return grad


def build(horizon, f, mb, layers, heads, width):
    """The three functions (non-private, vmap, ghost) and their arguments."""
    d = sum(SIZES)
    net = diffusion.FragmentTransformer(
        SIZES, horizon, num_layers=layers, num_heads=heads, embed_dim=width
    )
    params = jax.jit(net.init)(
        jax.random.key(0),
        jnp.zeros(horizon * d),
        jnp.zeros(()),
        jnp.zeros(d),
        jnp.array(True),
        jnp.ones(horizon, bool),
    )
    den = diffusion.FragmentDenoiser(net.apply)
    rng = np.random.default_rng(0)
    nf = rng.integers(1, f + 1, size=mb)
    fmask = np.arange(f)[None, :] < nf[:, None]
    items = {
        "x": jnp.asarray(rng.normal(size=(mb, f, horizon * d)), jnp.float32),
        "link": jnp.asarray(rng.normal(size=(mb, f, d)), jnp.float32),
        "has_link": jnp.asarray(fmask & (np.arange(f) > 0)),
        "step_mask": jnp.asarray(np.repeat(fmask[..., None], horizon, -1)),
    }
    fmask = jnp.asarray(fmask)
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=1000, sampling_rate=0.01, microbatch_size=mb
        ),
        l2_clip_norm=1.0,
        steps=1,
        noise_multiplier=1.0,
    )
    fns = {"nonprivate": nonprivate_grad(den)} | {
        m: synth.make_trajectory_dp_finetune(
            den, plan, learning_rate=1e-3, clip_method=m
        ).clip
        for m in ("vmap", "ghost")
    }
    return fns, (params, items, fmask, jax.random.key(1))


def measure(horizon, f, mb, layers, heads, width, repeats):
    fns, args = build(horizon, f, mb, layers, heads, width)
    compiled, stats = {}, {}
    for m, fn in fns.items():
        compiled[m] = jax.jit(fn).lower(*args).compile()
        s = h.compiled_stats(compiled[m])
        stats[m] = {"hlo_ops": s["ops"], "xla_temp_mb": s["xla_temp_mb"]}
    out = {m: jax.block_until_ready(c(*args)) for m, c in compiled.items()}
    timings = h.interleave(
        {m: (lambda c=c: c(*args)) for m, c in compiled.items()},
        rounds=repeats,
        order="fixed",
        warmup=0,  # the calls above ran them once
    )
    diff = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(
            jax.tree_util.tree_leaves(out["vmap"][0]),
            jax.tree_util.tree_leaves(out["ghost"][0]),
        )
    )
    for m, c in compiled.items():
        # One more call each, for its user / system CPU time and page faults: XLA maps
        # its temporaries afresh for every call, and the kernel fills each new page on
        # first touch.
        before = resource.getrusage(resource.RUSAGE_SELF)
        jax.block_until_ready(c(*args))
        after = resource.getrusage(resource.RUSAGE_SELF)
        stats[m] |= {
            "user_ms": 1e3 * (after.ru_utime - before.ru_utime),
            "sys_ms": 1e3 * (after.ru_stime - before.ru_stime),
            "minor_faults": after.ru_minflt - before.ru_minflt,
        }
    ms = {m: timings.median(m) * 1e3 for m in fns}
    return (
        ms
        | {f"{m}_vs_nonprivate": ms[m] / ms["nonprivate"] for m in ("vmap", "ghost")}
        | {"stats": stats, "max_abs_diff": diff, "load": h.load_now()}
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--configs",
        default="test,umaze",
        help=f"comma-separated, of {', '.join(CONFIGS)}",
    )
    args = ap.parse_args()
    rows = {}
    for k in args.configs.split(","):
        label, cfg = CONFIGS[k]
        rows[label] = measure(*cfg, args.repeats)
        print(label, rows[label], flush=True)
    cells = [
        (
            k,
            *(f"{r[m]:.1f}" for m in METHODS),
            f"{r['vmap_vs_nonprivate']:.2f}x",
            f"{r['ghost_vs_nonprivate']:.2f}x",
            " / ".join(str(r["stats"][m]["hlo_ops"]) for m in METHODS),
            " / ".join(f"{r['stats'][m]['xla_temp_mb']:.1f}" for m in METHODS),
            " / ".join(f"{r['stats'][m]['sys_ms']:.0f}" for m in METHODS),
            " / ".join(f"{r['stats'][m]['minor_faults']:,}" for m in METHODS),
            f"{r['max_abs_diff']:.2e}",
            r["load"],
        )
        for k, r in rows.items()
    ]
    md = h.markdown_table(
        (
            "config",
            *(f"{m} ms" for m in METHODS),
            "vmap / non-private",
            "ghost / non-private",
            "HLO ops (np / vmap / ghost)",
            "XLA temp MB (np / vmap / ghost)",
            "sys ms, 1 call (np / vmap / ghost)",
            "page faults, 1 call (np / vmap / ghost)",
            "max abs(vmap - ghost)",
            "load after",
        ),
        cells,
    )
    md += f"\n\nmedian of {args.repeats} interleaved calls; {h.host_line()}\n"
    print(md)
    h.write_outputs(h.RESULTS / "privorl_j_clip_speed", rows, md)
    for r in rows.values():
        assert r["max_abs_diff"] < 1e-4, "ghost and vmap must agree"


if __name__ == "__main__":
    main()
