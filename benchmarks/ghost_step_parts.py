"""Where a ghost-clipped DP-SGD step's time goes: its pieces jitted apart, timed side by
side.

The model, data and loss of ``dpsgd_vs_opacus.py`` (EDM residual MLP, batch 256, Adam).
Pieces:

- ``nonprivate_step``: grad of the mean loss + Adam (the baseline of the issue-25
  ratio);
- ``nonprivate_grad``: the gradient alone;
- ``ghost_norms``: the ghost clipped sum's per-unit norms only (XLA drops the
  book-keeping);
- ``ghost_clipped_sum``: norms + clip factors + book-keeping ``A^T (s D)``;
- ``noise_fast`` / ``noise_jax``: N(0, (sigma C)^2) on 6.6M coordinates via
  ``add_noise`` (fast_normal) and via ``jax.random.normal`` per leaf (the same
  bits);
- ``adam``: the optimizer update on a gradient;
- ``ghost_step`` / ``ghost_step_jax_noise``: the whole DP step (``dpsgd`` chain), both
  noise draws;
- ``*_ln_fallback``: the ghost norms, clipped sum and step with every LayerNorm's scale
  and bias on the exact per-unit fallback instead of its ghost rule (the same model with
  a ``LayerNorm`` subclass, which the ghost path does not intercept: same maths, same
  parameters).

Every piece is compiled ahead of time, then ``--rounds`` rounds each time every piece
``--reps`` times, interleaved (in a new random order each round), on ``--threads``
pinned cores; the table is the median per piece (and the fastest). ``--pieces`` times a
subset.

``--hash`` prints, for each step piece, the SHA-256 of the params and optimizer state
after one compiled step (the noise key included). Stored noise-seeded results pin these
bits: a change to the DP step that keeps them keeps those results; one that changes
them moves float rounding and must say why that is allowed (see
``results/ghost_step_issue52.md``). The bits are those of this host's CPU (XLA compiles
for its vector unit): compare before and after on one machine.

    python benchmarks/ghost_step_parts.py --config big --threads 1
"""

from __future__ import annotations

import argparse

import _harness as h

from privrl_jax.privacy._aggregation import add_noise, dpsgd
from privrl_jax.privacy._clipping import clipped_grad


def _state_sha256(state) -> str:
    """SHA-256 of every array of a (params, optimizer state) pytree, PRNG keys as their
    key data, in leaf order."""
    import hashlib  # noqa: PLC0415

    import jax  # noqa: PLC0415  (imported by main after pinning the threads)
    import numpy as np  # noqa: PLC0415

    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(state):
        if jax.numpy.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        digest.update(np.asarray(leaf).tobytes())
    return digest.hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="big")
    h.timing_args(p, rounds=5, reps=3, threads=1)
    p.add_argument(
        "--hlo-stats", action="store_true", help="print HLO sizes, time nothing"
    )
    p.add_argument(
        "--hash",
        action="store_true",
        help="print the SHA-256 of the state after one step of each piece that is a "
        "step, time nothing",
    )
    p.add_argument(
        "--pieces",
        default="",
        help="comma-separated pieces to time (default all; nonprivate_step always)",
    )
    p.add_argument(
        "--out",
        default=str(h.RESULTS / "ghost_step_parts"),
    )
    args = p.parse_args()
    h.pin_threads(args.threads)

    import dpsgd_vs_opacus as bench  # noqa: PLC0415  (benchmarks/ on sys.path)
    import flax.linen as nn  # noqa: PLC0415
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import optax  # noqa: PLC0415

    from privrl_jax import privacy  # noqa: PLC0415
    from privrl_jax.privacy import _aggregation  # noqa: PLC0415

    cfg = bench.CONFIGS[args.config]

    class OpaqueLayerNorm(nn.LayerNorm):
        """nn.LayerNorm itself; the ghost path intercepts exact types only, so its
        parameters take the per-unit fallback."""

    model, per_item_loss = bench.jax_model(cfg)
    # The same parameters (names and values) with the LayerNorms on the fallback.
    _, fallback_loss = bench.jax_model(cfg, OpaqueLayerNorm)

    x, noise, sigma = (jnp.asarray(a) for a in bench._data(cfg))
    params = jax.jit(model.init)(jax.random.key(0), x[0])
    flat = (x, noise, sigma)
    units = (x[:, None], noise[:, None], sigma[:, None])
    mask = jnp.ones((cfg.batch, 1), bool)
    clip = clipped_grad(per_item_loss, l2_clip_norm=bench.CLIP_NORM, method="ghost")
    clip_fallback = clipped_grad(
        fallback_loss, l2_clip_norm=bench.CLIP_NORM, method="ghost"
    )
    coverage = privacy.ghost_coverage(
        per_item_loss, params, flat_item := (x[0], noise[0], sigma[0])
    )
    fallback_coverage = privacy.ghost_coverage(fallback_loss, params, flat_item)
    count = lambda c: sum(v.startswith("fallback") for v in c.values())  # noqa: E731
    print(
        f"fallback leaves: {count(coverage)} with the LayerNorm rule, "
        f"{count(fallback_coverage)} without"
    )
    adam = optax.adam(bench.LEARNING_RATE)
    dp_tx = dpsgd(
        optax.adam(bench.LEARNING_RATE),
        noise_multiplier=bench.NOISE_MULTIPLIER,
        l2_clip_norm=bench.CLIP_NORM,
        expected_batch_size=float(cfg.batch),
        key=jax.random.key(1),
    )
    adam_state, dp_state = adam.init(params), dp_tx.init(params)
    std = bench.NOISE_MULTIPLIER * bench.CLIP_NORM

    def grad_np(p):
        return jax.grad(
            lambda p: jnp.mean(jax.vmap(per_item_loss, (None, 0))(p, flat))
        )(p)

    def np_step(p, s):
        u, s = adam.update(grad_np(p), s, p)
        return optax.apply_updates(p, u), s

    def dp_step(p, s, clip=clip):
        u, s = dp_tx.update(clip(p, units, mask)[0], s, p)
        return optax.apply_updates(p, u), s

    def dp_step_fallback(p, s):
        return dp_step(p, s, clip_fallback)

    jax_normal = lambda key, shape: jax.random.normal(key, shape, jnp.float32)  # noqa: E731

    def with_jax_noise(fn):
        def traced(*a):
            saved, _aggregation.fast_normal = _aggregation.fast_normal, jax_normal
            try:
                return fn(*a)
            finally:
                _aggregation.fast_normal = saved

        return traced

    key = jax.random.key(5)
    pieces = {
        "nonprivate_step": (np_step, (params, adam_state)),
        "nonprivate_grad": (grad_np, (params,)),
        "ghost_norms": (lambda p: clip(p, units, mask)[1].per_unit_norms, (params,)),
        "ghost_clipped_sum": (lambda p: clip(p, units, mask)[0], (params,)),
        "noise_fast": (lambda g, k: add_noise(g, k, std), (params, key)),
        "noise_jax": (
            with_jax_noise(lambda g, k: add_noise(g, k, std)),
            (params, key),
        ),
        "adam": (lambda g, s, p: adam.update(g, s, p), (params, adam_state, params)),
        "ghost_step": (dp_step, (params, dp_state)),
        "ghost_step_jax_noise": (with_jax_noise(dp_step), (params, dp_state)),
        "ghost_norms_ln_fallback": (
            lambda p: clip_fallback(p, units, mask)[1].per_unit_norms,
            (params,),
        ),
        "ghost_clipped_sum_ln_fallback": (
            lambda p: clip_fallback(p, units, mask)[0],
            (params,),
        ),
        "ghost_step_ln_fallback": (dp_step_fallback, (params, dp_state)),
    }
    if args.pieces:
        keep = {"nonprivate_step", *args.pieces.split(",")}
        pieces = {k: v for k, v in pieces.items() if k in keep}
    compiled = {k: (jax.jit(f).lower(*a).compile(), a) for k, (f, a) in pieces.items()}
    if args.hlo_stats:  # instructions of the optimized entry computation, while loops
        for k, (f, _) in compiled.items():
            text = f.as_text()
            entry = text[text.index("\nENTRY") :]
            entry = entry[: entry.index("\n}")]
            st = h.compiled_stats(f)  # the op count of dpsgd_vs_opacus's table
            print(
                f"{k}: {st['ops']} ops ({st['fused']} fused instructions), "
                f"{entry.count(chr(10)) - 1} entry instructions, "
                f"{text.count(' while(')} while loops, {text.count(' fusion(')} "
                f"fusions, {st['gflop']:.3f} GFLOP, {st['mb_accessed']:.0f} MB "
                f"accessed, XLA temp {st['xla_temp_mb']:.1f} MB"
            )
        return
    if args.hash:  # the bits a change to the step must keep (see the docstring)
        for k, (f, a) in compiled.items():
            if "_step" in k:
                print(f"{k}: sha256 {_state_sha256(f(*a))[:16]}")
        return
    timings = h.interleave(
        {k: (lambda f=f, a=a: f(*a)) for k, (f, a) in compiled.items()},
        rounds=args.rounds,
        reps=args.reps,
    )
    header = (
        f"ghost DP step pieces, config {cfg.name} ({h.num_params(params):,} params, "
        f"batch {cfg.batch}), {args.threads} thread(s), {timings.protocol()}."
    )
    text = f"{header}\n\n{timings.ratio_table('nonprivate_step', 'non-private step')}"
    print(text)
    payload = {"args": vars(args), **timings.ms(), "loads": timings.loads}
    h.write_outputs(args.out, payload, text, indent=1)


if __name__ == "__main__":
    main()
