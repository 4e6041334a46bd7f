"""DP-SGD step throughput: privrl_jax (non-private, vmap, ghost) vs PyTorch and Opacus,
side by side.

Same model (EDM-style residual MLP denoiser: Dense in, ``depth`` blocks ``h +
Dense(SiLU(LayerNorm(h)))``, Dense out; EDM preconditioning and loss weight, noise-level
Fourier features omitted), same dims, batch, optimizer (Adam, lr 1e-4), clip norm (1.0),
noise multiplier (1.0) and CPU cores in every framework. Every (round, config, method)
runs in its own subprocess pinned to the same ``--threads`` cores, so its peak RSS
(``ru_maxrss``) is its own; the whole sweep runs ``--rounds`` times, interleaved, and
each run reports the median step time of ``--steps`` steps after ``--warmup`` steps.

The ``transformer`` config is the diffusion-transformer DP step (6 layers, 4 heads,
fragments of H = 32 tokens, one fragment per privacy unit): JAX only, ghost vs vmap.

Usage:
  pip install -e ".[bench]"   # torch and opacus, for the PyTorch rows python
  benchmarks/dpsgd_vs_opacus.py                       # small + big configs, everything
  python benchmarks/dpsgd_vs_opacus.py --configs small --steps 20 --rounds 2 python
  benchmarks/dpsgd_vs_opacus.py --configs big,transformer --frameworks jax  # e.g. on a
  GPU

Writes ``benchmarks/results/dpsgd_vs_opacus.{json,md}`` and prints the table with
ratios. Targets (issues 25 and 52; issue 5 for Opacus hooks) are checked at the end;
``--strict`` exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time

import _harness as h
from _harness import hlo_op_count  # noqa: F401  (imported from here by tests)

SIGMA_DATA = 0.5  # EDM (Karras et al., 2022, https://arxiv.org/abs/2206.00364), Table 1
P_MEAN, P_STD = -1.2, 1.2  # EDM training noise-level distribution
LEARNING_RATE = 1e-4
CLIP_NORM = 1.0
NOISE_MULTIPLIER = 1.0


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    width: int
    depth: int
    dim: int  # data (input = output) dimension
    batch: int = 256
    vmap_microbatch: int | None = (
        None  # bounds the vmap path's memory on the big config
    )
    transformer: bool = False
    seq: int = 1  # tokens per unit (transformer: fragment length H)
    heads: int = 0


CONFIGS = {
    "small": Config("small", width=256, depth=4, dim=11),
    "big": Config("big", width=1024, depth=6, dim=130, vmap_microbatch=32),
    # PrivORL-j synthesizer: GPT-2-like, 6 layers x 4 heads, fragments of H = 32
    # transitions.
    "transformer": Config(
        "transformer",
        width=128,
        depth=6,
        dim=11,
        batch=64,
        seq=32,
        heads=4,
        transformer=True,
        vmap_microbatch=16,
    ),
}
JAX_METHODS = (
    "jax_nonprivate",
    "jax_vmap_dp",
    "jax_ghost_dp",
    "jax_ghost_dp_jax_noise",
    "jax_privacy_dp",
)
# jax_ghost_dp_jax_noise: the ghost step with the noise drawn by jax.random.normal
# itself (the same bits as privacy._noise.fast_normal; JAX's rolled Threefry loop on
# CPU), the "before" of issue 25. jax_privacy_dp: jax-privacy's per-example path
# (jax_privacy.clipping.clipped_grad, vmap over examples, microbatched like
# jax_vmap_dp), then the library's noise, 1/B and Adam.
TORCH_METHODS = ("torch_nonprivate", "opacus_hooks_dp", "opacus_ghost_dp")
SLOW_METHODS = (
    "jax_vmap_dp",
    "opacus_hooks_dp",
    "jax_privacy_dp",
)  # materialise one gradient per example


def _data(cfg: Config, seed: int = 0):
    """Clean data, EDM noise and noise levels (NumPy, shared by both frameworks)."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    shape = (cfg.batch, cfg.seq, cfg.dim) if cfg.transformer else (cfg.batch, cfg.dim)
    x = rng.normal(size=shape).astype(np.float32)
    noise = rng.normal(size=shape).astype(np.float32)
    sigma = np.exp(P_MEAN + P_STD * rng.normal(size=(cfg.batch,))).astype(np.float32)
    return x, noise, sigma


def _edm_terms(sigma):
    """Preconditioning (c_skip, c_out, c_in) and sqrt of the loss weight, EDM eqs. (7)
    and (8)."""
    s2 = sigma**2 + SIGMA_DATA**2
    c_skip = SIGMA_DATA**2 / s2
    c_out = sigma * SIGMA_DATA / s2**0.5
    c_in = 1.0 / s2**0.5
    sqrt_weight = s2**0.5 / (sigma * SIGMA_DATA)
    return c_skip, c_out, c_in, sqrt_weight


# ---------------------------------------------------------------------------------- JAX


def jax_model(cfg: Config, norm: type | None = None):
    """The JAX model of ``cfg`` and its per-item EDM loss.

    Args:
      cfg: the config.
      norm: the residual MLP's LayerNorm class (default ``nn.LayerNorm``); the modules
        keep their names, so a subclass gives the same parameters.

    Returns:
      ``(model, per_item_loss)``; the loss takes ``(params, (x, noise, sigma))``.
    """
    import flax.linen as nn  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    norm = norm or nn.LayerNorm

    class ResidualMLP(nn.Module):
        width: int
        depth: int
        out: int

        @nn.compact
        def __call__(self, x):
            h = nn.Dense(self.width)(x)
            for i in range(self.depth):
                ln = norm(name=f"LayerNorm_{i}")
                h = h + nn.Dense(self.width)(nn.silu(ln(h)))
            ln = norm(name=f"LayerNorm_{self.depth}")
            return nn.Dense(self.out)(nn.silu(ln(h)))

    class Transformer(nn.Module):
        width: int
        depth: int
        heads: int
        out: int

        @nn.compact
        def __call__(self, x):
            h = nn.Dense(self.width)(x) + self.param(
                "pos", nn.initializers.normal(0.02), (x.shape[-2], self.width)
            )
            for _ in range(self.depth):
                h = h + nn.MultiHeadDotProductAttention(self.heads)(nn.LayerNorm()(h))
                h = h + nn.Dense(self.width)(
                    nn.gelu(nn.Dense(4 * self.width)(nn.LayerNorm()(h)))
                )
            return nn.Dense(self.out)(nn.LayerNorm()(h))

    if cfg.transformer:
        model = Transformer(cfg.width, cfg.depth, cfg.heads, cfg.dim)
    else:
        model = ResidualMLP(cfg.width, cfg.depth, cfg.dim)

    def per_item_loss(params, item):
        x, noise, sigma = item
        c_skip, c_out, c_in, sqrt_w = _edm_terms(sigma)
        noisy = x + sigma * noise
        denoised = c_skip * noisy + c_out * model.apply(params, c_in * noisy)
        return jnp.mean((sqrt_w * (denoised - x)) ** 2)

    return model, per_item_loss


def _jax_worker(cfg: Config, method: str):
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import optax  # noqa: PLC0415

    from privrl_jax.privacy._aggregation import dpsgd  # noqa: PLC0415
    from privrl_jax.privacy._clipping import clipped_grad

    model, per_item_loss = jax_model(cfg)
    x, noise, sigma = (jnp.asarray(a) for a in _data(cfg))
    params = jax.jit(model.init)(jax.random.key(0), x[0])
    num_params = sum(p.size for p in jax.tree.leaves(params))
    if method == "jax_ghost_dp_jax_noise":
        from privrl_jax.privacy import _aggregation  # noqa: PLC0415

        _aggregation.fast_normal = lambda key, shape: jax.random.normal(
            key, shape, jnp.float32
        )
    if method == "jax_nonprivate":
        optimizer = optax.adam(LEARNING_RATE)
        batch = (x, noise, sigma)

        def grads_of(params):
            loss = lambda p: jnp.mean(
                jax.vmap(per_item_loss, in_axes=(None, 0))(p, batch)
            )  # noqa
            return jax.grad(loss)(params)
    else:
        # The library's release: noise N(0, (sigma C)^2) on the clipped sum (its own key
        # and counter in the optimizer state), divide by the batch size, then Adam.
        optimizer = dpsgd(
            optax.adam(LEARNING_RATE),
            noise_multiplier=NOISE_MULTIPLIER,
            l2_clip_norm=CLIP_NORM,
            expected_batch_size=float(cfg.batch),
            key=jax.random.key(1),
        )
        batch = (x[:, None], noise[:, None], sigma[:, None])  # one item per unit
        mask = jnp.ones((cfg.batch, 1), bool)
        clip = clipped_grad(
            per_item_loss,
            l2_clip_norm=CLIP_NORM,
            method="ghost" if method.startswith("jax_ghost_dp") else "vmap",
            microbatch_size=cfg.vmap_microbatch if method == "jax_vmap_dp" else None,
        )

        def grads_of(params):
            return clip(params, batch, mask)[0]

        if method == "jax_privacy_dp":
            import jax_privacy  # noqa: PLC0415

            jp_clip = jax_privacy.clipping.clipped_grad(
                per_item_loss,
                l2_clip_norm=CLIP_NORM,
                keep_batch_dim=False,
                microbatch_size=cfg.vmap_microbatch,
            )

            def grads_of(params):  # noqa: F811
                return jp_clip(params, (x, noise, sigma))

    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
        updates, opt_state = optimizer.update(grads_of(params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    state = [params, opt_state]
    compiled = step.lower(*state).compile()  # ahead of time, to read XLA's memory plan

    def run_step():
        state[:] = jax.block_until_ready(compiled(*state))

    stats = h.compiled_stats(compiled)
    info = {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        **{f"hlo_{k}": stats[k] for k in h.HLO_COUNTS},
    }
    if stats["xla_step_mb"] is not None:  # XLA's plan: arguments, outputs, temporaries
        info["xla_step_mb"] = stats["xla_step_mb"]
        info["xla_temp_mb"] = stats["xla_temp_mb"]
    return run_step, num_params, info


# ------------------------------------------------------------------------------ PyTorch


def _torch_worker(cfg: Config, method: str, threads: int):
    import torch  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.norm, self.dense = nn.LayerNorm(width), nn.Linear(width, width)

        def forward(self, h):
            return h + self.dense(nn.functional.silu(self.norm(h)))

    class Denoiser(nn.Module):
        """The JAX model's twin; forward returns sqrt(weight) * D(x_noisy; sigma)."""

        def __init__(self, cfg):
            super().__init__()
            self.inp = nn.Linear(cfg.dim, cfg.width)
            self.blocks = nn.ModuleList([Block(cfg.width) for _ in range(cfg.depth)])
            self.norm, self.out = nn.LayerNorm(cfg.width), nn.Linear(cfg.width, cfg.dim)

        def forward(self, noisy, sigma):
            c_skip, c_out, c_in, sqrt_w = (t[:, None] for t in _edm_terms(sigma))
            h = self.inp(c_in * noisy)
            for block in self.blocks:
                h = block(h)
            f = self.out(nn.functional.silu(self.norm(h)))
            return sqrt_w * (c_skip * noisy + c_out * f)

    class PerSampleMSE(nn.Module):
        """Mean squared error per example; Opacus ghost mode sets reduction="none" to
        get [B]."""

        def __init__(self):
            super().__init__()
            self.reduction = "mean"

        def forward(self, pred, target):
            per_sample = ((pred - target) ** 2).mean(dim=1)
            return per_sample if self.reduction == "none" else per_sample.mean()

    x, noise, sigma = (torch.from_numpy(a) for a in _data(cfg))
    noisy = x + sigma[:, None] * noise
    target = (
        _edm_terms(sigma)[3][:, None] * x
    )  # sqrt(weight) * x: the MSE is the EDM loss
    model = Denoiser(cfg)
    num_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    criterion = PerSampleMSE()
    if method != "torch_nonprivate":
        from opacus import PrivacyEngine  # noqa: PLC0415

        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(noisy, sigma, target), batch_size=cfg.batch
        )
        engine = PrivacyEngine(accountant="rdp")
        mode = "ghost" if method == "opacus_ghost_dp" else "hooks"
        out = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            criterion=criterion,
            noise_multiplier=NOISE_MULTIPLIER,
            max_grad_norm=CLIP_NORM,
            poisson_sampling=False,
            grad_sample_mode=mode,
        )
        if mode == "ghost":
            model, optimizer, criterion, _ = out
        else:
            model, optimizer, _ = out

    def run_step():
        loss = criterion(model(noisy, sigma), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return (
        run_step,
        num_params,
        {"torch": torch.__version__, "threads": torch.get_num_threads()},
    )


# ------------------------------------------------------------------------------- driver


def _worker(args) -> None:
    cfg = CONFIGS[args.config]
    cores = h.pin_threads(args.threads)  # before any framework starts its thread pools
    if args.method.startswith("jax"):
        run_step, num_params, info = _jax_worker(cfg, args.method)
    else:
        run_step, num_params, info = _torch_worker(cfg, args.method, args.threads)
    for _ in range(args.warmup):  # compiles (JAX) and allocates (both)
        run_step()
    setup_peak_mb = h.peak_rss_mb()
    if (
        args.trim
    ):  # hand freed heap (the compiler's, mostly) back to the OS before the timed steps
        import ctypes  # noqa: PLC0415

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    steps_peak_reset = h.reset_peak_rss()
    times, cpu_times = [], []
    for _ in range(args.steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        run_step()
        times.append(time.perf_counter() - start)
        # CPU seconds of this process (all its threads): on a shared host the wall
        # time also counts the time other processes held the core.
        cpu_times.append(time.process_time() - cpu_start)
    median = statistics.median(times)
    h.emit(
        {
            "config": cfg.name,
            "method": args.method,
            "median_step_s": median,
            "examples_per_s": cfg.batch / median,
            "steps": len(times),
            "step_s": times,
            "cpu_examples_per_s": cfg.batch / statistics.median(cpu_times),
            "step_cpu_s": cpu_times,
            "peak_rss_mb": h.peak_rss_mb(),
            "setup_peak_rss_mb": setup_peak_mb,
            # Peak RSS of the timed steps alone (compilation excluded), where Linux
            # can reset it.
            "steps_peak_rss_mb": h.status_mb("VmHWM") if steps_peak_reset else None,
            "num_params": int(num_params),
            "cores": cores,
            "load_avg_1min": os.getloadavg()[0],
            **info,
        }
    )


def _available(frameworks: list[str]) -> list[str]:
    methods = []
    if "jax" in frameworks:
        methods += JAX_METHODS
    if "torch" in frameworks:
        try:
            import opacus  # noqa: F401, PLC0415
            import torch  # noqa: F401, PLC0415

            methods += TORCH_METHODS
        except ImportError:
            print(
                "torch/opacus not importable: PyTorch rows skipped (pip install -e "
                "'.[bench]')."
            )
    return methods


def _table(results: list[dict], rounds: int) -> tuple[str, dict]:
    """The throughput and memory table; ratios to the framework's own non-private step
    are taken per round (the two ran side by side) and then their median."""
    by = {}
    for r in results:
        by.setdefault((r["config"], r["method"]), []).append(r)

    def base_of(config, method):
        own = "jax_nonprivate" if method.startswith("jax") else "torch_nonprivate"
        return {r.get("round"): r for r in by.get((config, own), [])}

    def steps_rss(r):
        return r.get("steps_peak_rss_mb") or r["peak_rss_mb"]

    def per_round(config, method, value):
        base = base_of(config, method)
        return [
            value(r) / value(base[r.get("round")])
            for r in by[(config, method)]
            if r.get("round") in base
        ]

    lines = [
        "| config | method | "
        + " | ".join(f"ex/s run {i + 1}" for i in range(rounds))
        + " | ex/s (median) | vs own non-private, per round (median) |"
        " by CPU time, per round (median) | peak RSS MB (steps) |"
        " RSS vs non-private, per round (median) |"
        " HLO ops | ops vs non-private | XLA temp MB | peak RSS MB (incl. compile) |",
        "|---" * (11 + rounds) + "|",
    ]
    summary = {}
    for (config, method), rs in by.items():
        ratio = per_round(config, method, lambda r: r["examples_per_s"])
        cpu_ratio = (
            per_round(config, method, lambda r: r["cpu_examples_per_s"])
            if all("cpu_examples_per_s" in r for r in results)
            else []
        )
        rss_ratio = per_round(config, method, steps_rss)
        summary[(config, method)] = {
            "examples_per_s": statistics.median(r["examples_per_s"] for r in rs),
            "steps_peak_rss_mb": statistics.median(steps_rss(r) for r in rs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "xla_step_mb": rs[0].get("xla_step_mb"),
            "xla_temp_mb": rs[0].get("xla_temp_mb"),
            "hlo_ops": rs[0].get("hlo_ops"),
            "ratio_per_round": ratio,
            "ratio_median": statistics.median(ratio) if ratio else None,
            "cpu_ratio_per_round": cpu_ratio,
            "cpu_ratio_median": statistics.median(cpu_ratio) if cpu_ratio else None,
            "rss_ratio_per_round": rss_ratio,
            "rss_ratio_median": statistics.median(rss_ratio) if rss_ratio else None,
        }

    for (config, method), s in summary.items():
        base = summary.get(
            (
                config,
                "jax_nonprivate" if method.startswith("jax") else "torch_nonprivate",
            )
        )
        eps = " | ".join(f"{r['examples_per_s']:,.1f}" for r in by[(config, method)])
        eps += " | -" * (rounds - len(by[(config, method)]))
        ops = s["hlo_ops"]
        ops_ratio = (
            f"{ops / base['hlo_ops']:.2f}x"
            if ops and base and base.get("hlo_ops")
            else "-"
        )
        temp = s["xla_temp_mb"]
        lines.append(
            f"| {config} | {method} | {eps} | {s['examples_per_s']:,.1f} | "
            f"{h.ratio_cell(s['ratio_per_round'])} | "
            f"{h.ratio_cell(s['cpu_ratio_per_round'])} | "
            f"{s['steps_peak_rss_mb']:,.0f} | "
            f"{h.ratio_cell(s['rss_ratio_per_round'])} | "
            f"{ops if ops is not None else '-'} | {ops_ratio} | "
            f"{f'{temp:,.1f}' if temp is not None else '-'} | "
            f"{s['peak_rss_mb']:,.0f} |"
        )
    return "\n".join(lines), summary


def _targets(summary: dict) -> list[dict]:
    """Issue 25's targets (issue 5's for Opacus hooks), for every config where the rows
    exist."""
    checks = []

    def check(config, target, value, ok):
        checks.append({"config": config, "target": target, "value": value, "ok": ok})

    for c in sorted({c for c, _ in summary}):
        get = lambda m: summary.get((c, m))  # noqa: E731
        ghost, own, oghost, ohooks = (
            get("jax_ghost_dp"),
            get("jax_nonprivate"),
            get("opacus_ghost_dp"),
            get("opacus_hooks_dp"),
        )
        if ghost and own:
            v = ghost["ratio_median"] or ghost["examples_per_s"] / own["examples_per_s"]
            check(c, "ghost >= 0.8x own non-private (median of rounds)", v, v >= 0.8)
            if ghost["cpu_ratio_median"] is not None:
                v = ghost["cpu_ratio_median"]
                check(c, "the same, by CPU time of the steps", v, v >= 0.8)
            if ghost.get("hlo_ops") and own.get("hlo_ops"):
                v = ghost["hlo_ops"] / own["hlo_ops"]
                check(c, "ghost HLO ops <= 2x non-private", v, v <= 2)
            v = ghost["rss_ratio_median"] or (
                ghost["steps_peak_rss_mb"] / own["steps_peak_rss_mb"]
            )
            check(c, "ghost peak RSS (steps) <= 1.3x non-private", v, v <= 1.3)
        if ghost and oghost:
            v = ghost["examples_per_s"] / oghost["examples_per_s"]
            check(c, "ghost >= 2x Opacus ghost", v, v >= 2)
        if ghost and ohooks:
            v = ghost["examples_per_s"] / ohooks["examples_per_s"]
            check(c, "ghost >= 100x Opacus hooks", v, v >= 100)
    return checks


def _write_report(
    args, configs: list[str], results: list[dict], *, final: bool
) -> list[dict]:
    """Writes the JSON and Markdown reports (after every run, so an interrupted sweep
    keeps data)."""
    table, summary = _table(results, args.rounds)
    checks = _targets(summary)
    load = os.getloadavg()
    run_loads = [r["load_avg_1min"] for r in results if "load_avg_1min" in r]
    slow = (
        f" ({args.slow_steps} after 1 for big/{'+'.join(SLOW_METHODS)})"
        if args.slow_steps
        else ""
    )
    loads = (
        f"{min(run_loads):.1f}-{max(run_loads):.1f} during the runs"
        if run_loads
        else f"{load[0]:.1f}"
    )
    header = (
        f"DP-SGD step throughput, batch per config, {args.threads} thread(s), median "
        "of "
        f"{args.steps} steps after {args.warmup} warm-up{slow}, {args.rounds} rounds; "
        f"host {platform.node()} ({os.cpu_count()} CPUs, 1-min load avg {loads})."
    )
    lines = [
        header,
        "",
        table,
        "",
        "| config | target | value | ok |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {k['config']} | {k['target']} | {k['value']:.3g} | "
        f"{'yes' if k['ok'] else 'NO'} |"
        for k in checks
    ]
    text = "\n".join(lines)
    if final:
        print(text)
    h.write_outputs(
        args.out,
        {
            "args": {
                k: v
                for k, v in vars(args).items()
                if k not in ("worker", "config", "method")
            },
            "configs": {c: dataclasses.asdict(CONFIGS[c]) for c in configs},
            "load_avg": load,
            "results": results,
            "summary": [
                {"config": c, "method": m, **s} for (c, m), s in summary.items()
            ],
            "targets": checks,
        },
        text,
        indent=1,
    )
    if final:
        print(f"wrote {args.out}.json and {args.out}.md")
    return checks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="small,big,transformer")
    p.add_argument("--frameworks", default="jax,torch")
    p.add_argument("--methods", default=None, help="comma list; default: all available")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument(
        "--slow-steps",
        type=int,
        default=None,
        help="timed steps (and 1 warm-up) for the per-sample-gradient rows "
        "(Opacus hooks, JAX vmap) of the big config, which take seconds per step; "
        "default --steps",
    )
    p.add_argument("--rounds", type=int, default=2)
    # One core by default: on a shared host, OpenMP thread teams stall when a core is
    # taken away.
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(__file__), "results", "dpsgd_vs_opacus"),
    )
    p.add_argument(
        "--trim",
        action="store_true",
        help="malloc_trim(0) after warm-up in every worker, so the steps' peak RSS "
        "excludes heap that compilation freed but glibc kept",
    )
    p.add_argument(
        "--strict", action="store_true", help="exit 1 when a target is missed"
    )
    p.add_argument(
        "--report-from",
        default=None,
        help="re-render the table and targets from a results JSON; runs nothing",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return _worker(args)
    if args.report_from:
        with open(args.report_from) as f:
            saved = json.load(f)
        for k in ("steps", "warmup", "rounds", "threads", "slow_steps"):
            setattr(args, k, saved["args"].get(k))
        return _write_report(args, list(saved["configs"]), saved["results"], final=True)
    if args.steps < 20:
        print(
            f"note: --steps {args.steps} < 20, below the issue's measurement protocol."
        )

    from tqdm import tqdm  # noqa: PLC0415

    configs = args.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            raise ValueError(
                f"--configs: unknown config {c!r}; expected some of {sorted(CONFIGS)}."
            )
    methods = _available(args.frameworks.split(","))
    if args.methods:
        methods = [m for m in methods if m in args.methods.split(",")]
    jobs = [
        (r, c, m)
        for r in range(args.rounds)
        for c in configs
        for m in methods
        if not (CONFIGS[c].transformer and m in TORCH_METHODS)
    ]
    results = []
    for r, c, m in tqdm(jobs, desc="benchmark runs"):
        slow = args.slow_steps and c == "big" and m in SLOW_METHODS
        steps, warmup = (args.slow_steps, 1) if slow else (args.steps, args.warmup)
        worker_args = ["--worker", "--config", c, "--method", m, "--steps", str(steps)]
        worker_args += ["--warmup", str(warmup), "--threads", str(args.threads)]
        result, err = h.run_worker(
            worker_args + (["--trim"] if args.trim else []), __file__
        )
        if result is None:
            tqdm.write(f"{c}/{m} failed:\n{err}")
            continue
        result["round"] = r
        results.append(result)
        tqdm.write(
            f"round {r + 1} {c:12s} {m:18s} {result['examples_per_s']:10,.1f} ex/s  "
            f"steps peak {result['steps_peak_rss_mb'] or 0:8,.0f} MB  "
            f"(with compile {result['peak_rss_mb']:8,.0f} MB)"
        )
        _write_report(args, configs, results, final=False)

    checks = _write_report(args, configs, results, final=True)
    if args.strict and not all(k["ok"] for k in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
