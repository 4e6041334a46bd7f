"""PrivORL-j: per-trajectory clipped gradient sum, vmap vs ghost clipping, on the
fragment transformer.

One microbatch of trajectories [units, fragments, ...] through ``plan.clipped_grad``
with each method; median wall time of jitted calls (compilation excluded), interleaved
repeats. Writes ``benchmarks/results/privorl_j_clip_speed.json``. Usage:

    PYTHONPATH=. python benchmarks/privorl_j_clip_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse

import _harness as h
import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import diffusion, privacy, synth

CONFIGS = {
    # name: (H, fragments, units per microbatch, layers, heads, width)
    "umaze.yaml (H=32, F=10, mb=16, 2x64)": (32, 10, 16, 2, 4, 64),
    "test.yaml (H=8, F=8, mb=8, 1x16)": (8, 8, 8, 1, 2, 16),
}
SIZES = (4, 2, 1, 4, 2)  # maze2d: s, a, r, s' - s, one-hot d


def measure(horizon, f, mb, layers, heads, width, repeats):
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
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=1000, sampling_rate=0.01, microbatch_size=mb
        ),
        l2_clip_norm=1.0,
        steps=1,
        noise_multiplier=1.0,
    )
    fns = {
        m: jax.jit(
            synth.make_trajectory_dp_finetune(
                den, plan, learning_rate=1e-3, clip_method=m
            ).clip
        )
        for m in ("vmap", "ghost")
    }
    key = jax.random.key(1)
    out = {
        m: jax.block_until_ready(fn(params, items, jnp.asarray(fmask), key))[0]
        for m, fn in fns.items()
    }
    timings = h.interleave(
        {
            m: (lambda fn=fn: fn(params, items, jnp.asarray(fmask), key))
            for m, fn in fns.items()
        },
        rounds=repeats,
        order="fixed",
        warmup=0,  # the calls above compiled them
    )
    diff = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(
            jax.tree_util.tree_leaves(out["vmap"]),
            jax.tree_util.tree_leaves(out["ghost"]),
        )
    )
    return {m: timings.median(m) * 1e3 for m in fns} | {"max_abs_diff": diff}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rows = {name: measure(*cfg, args.repeats) for name, cfg in CONFIGS.items()}
    cells = [
        (k, f"{r['vmap']:.1f}", f"{r['ghost']:.1f}", f"{r['max_abs_diff']:.2e}")
        for k, r in rows.items()
    ]
    print(
        h.markdown_table(("config", "vmap ms", "ghost ms", "max |vmap - ghost|"), cells)
    )
    h.write_outputs(h.RESULTS / "privorl_j_clip_speed", rows)
    for r in rows.values():
        assert r["max_abs_diff"] < 1e-4, "ghost and vmap must agree"


if __name__ == "__main__":
    main()
