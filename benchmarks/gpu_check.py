"""One command for the day a GPU is lent: issue 25's GPU ratios (items 1-3) and one
paper-scale PrivORL-n fine-tuning step, in under 10 minutes on one GPU.

1. **DP step vs non-private step** (item 1): the ghost DP-SGD step and the non-private
   step of ``dpsgd_vs_opacus.py``'s EDM residual-MLP denoiser on its ``small`` (256 x 4)
   and ``big`` (1024 x 6, 6.6M) configs, JAX only, in one process, steps interleaved;
   median step time, the throughput ratio ghost / non-private and XLA's planned bytes
   per step (arguments + outputs + temporaries) of each.
2. **Sweeps compile once** (item 2): a 6-epsilon sweep of ``ope.gpope`` (calibrated
   plans on the GPOPE experiments' chain) and a 6-sigma sweep of whole ``privacy.fit``
   calls, counting XLA compilations from JAX's compile log: ``_gpope_run``, the
   fit's per-unit gradient program ``_accumulate`` and its release (noise + update,
   ``_release``) must compile once each.
3. **GPOPE throughput** (item 3): ``gpope_throughput.part_throughput_e2e``, vmapped
   trials vs the NumPy per-trial loop, end to end including compile, for 10^2-10^4
   trials and both samplings, at the experiments' step counts.
4. **PrivORL-n fine-tuning step at the paper's size** (PrivORL, Sec. "Denoising
   Network": EDM residual MLP, width 1024, depth 6, about 6M parameters):
   ``dp_loop_speed.run_loop`` (the DP loop with its ledger and checkpoint), Poisson
   q = 256 / N, microbatches of 64, timed as the difference of two run lengths so
   compile and checkpoint costs cancel.

Every part reuses the existing benchmark's function; nothing is re-implemented here.

    python benchmarks/gpu_check.py         # on the GPU machine (jax[cuda])
    python benchmarks/gpu_check.py --tiny  # a CPU smoke run (tests/test_gpu_check.py)

Writes ``benchmarks/results/gpu_check.{json,md}`` (``gpu_check_tiny.*`` with
``--tiny``; ``--out`` for another folder) and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the sibling benchmarks, also when imported by a test
    sys.path.insert(0, str(HERE))

import _harness as h  # noqa: E402
import dp_loop_speed  # noqa: E402
import dpsgd_vs_opacus  # noqa: E402
import gpope_throughput  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from privrl_jax import ope, privacy  # noqa: E402

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What each part runs; ``FULL`` on a GPU, ``TINY`` as a CPU smoke test."""

    dp_configs: tuple[dpsgd_vs_opacus.Config, ...]
    dp_steps: int
    dp_warmup: int
    calibrate: bool  # calibrate the sweep's plans (else fixed sigmas: no accountant)
    fit_sigmas: tuple[float, ...]
    gpope_trials: tuple[int, ...]
    gpope_steps: int
    gpope_numpy_trials: int
    gpope_modes: tuple[str, ...]
    privorl_config: str
    privorl_n: int
    privorl_steps: int


FULL = Sizes(
    dp_configs=(dpsgd_vs_opacus.CONFIGS["small"], dpsgd_vs_opacus.CONFIGS["big"]),
    dp_steps=30,
    dp_warmup=3,
    calibrate=True,
    fit_sigmas=(2.0, 1.5, 1.0, 0.8, 0.6, 0.0),
    gpope_trials=(100, 1000, 10_000),
    gpope_steps=gpope_throughput.POISSON_STEPS,
    gpope_numpy_trials=3,
    gpope_modes=("poisson", "uniform"),
    privorl_config="big",
    privorl_n=20_000,
    privorl_steps=40,
)
TINY = Sizes(
    dp_configs=(dpsgd_vs_opacus.Config("tiny", width=8, depth=1, dim=3, batch=4),),
    dp_steps=3,
    dp_warmup=1,
    calibrate=False,
    fit_sigmas=(1.0, 0.8, 0.6, 0.5, 0.3, 0.0),
    gpope_trials=(2,),
    gpope_steps=4,
    gpope_numpy_trials=1,
    gpope_modes=("poisson",),
    privorl_config="tiny",
    privorl_n=512,  # the plan's q = 256 / N
    privorl_steps=4,
)
dp_loop_speed.CONFIGS.setdefault("tiny", (3, 8, 1))  # (dim, width, depth)


class _CompileLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        prefix = "Finished XLA compilation of jit("
        if msg.startswith(prefix):
            self.names.append(msg[len(prefix) : msg.index(")")])


@contextlib.contextmanager
def _compiles():
    handler = _CompileLog()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False  # count, do not print
    try:
        with jax.log_compiles():
            yield handler.names
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def dp_step(sizes: Sizes) -> list[dict]:
    """Part 1: ghost DP step vs non-private step, interleaved, per config."""
    rows = []
    for cfg in sizes.dp_configs:
        runs = {
            m: dpsgd_vs_opacus._jax_worker(cfg, m)
            for m in ("jax_nonprivate", "jax_ghost_dp")
        }
        timings = h.interleave(
            {m: run_step for m, (run_step, _, _) in runs.items()},
            rounds=sizes.dp_steps,
            order="fixed",
            warmup=sizes.dp_warmup,  # compiles
        )
        med = {m: timings.median(m) for m in runs}
        (_, n_np, info_np), (_, n_dp, info_dp) = runs.values()
        rows.append(
            {
                "config": cfg.name,
                "num_params": int(n_np),
                "same_params": int(n_np) == int(n_dp),
                "batch": cfg.batch,
                "nonprivate_step_ms": 1000 * med["jax_nonprivate"],
                "ghost_step_ms": 1000 * med["jax_ghost_dp"],
                "ghost_over_nonprivate_throughput": med["jax_nonprivate"]
                / med["jax_ghost_dp"],
                "nonprivate_xla_step_mb": info_np.get("xla_step_mb"),
                "ghost_xla_step_mb": info_dp.get("xla_step_mb"),
                "backend": info_np["backend"],
            }
        )
        print(rows[-1], flush=True)
    return rows


def sweep_compiles(sizes: Sizes) -> dict:
    """Part 2: compile counts of a 6-epsilon GPOPE sweep and a 6-sigma fit sweep."""
    mdp, pi, phi, _ = gpope_throughput.setting()
    data = jax.tree_util.tree_map(
        lambda x: x[0], gpope_throughput.datasets(mdp, pi, phi, seed=1, trials=1).data
    )
    steps = sizes.gpope_steps
    if sizes.calibrate:
        plans = [
            gpope_throughput.plan_for("poisson", 0.1, eps, steps) for eps in EPSILONS
        ]
    else:
        plans = [
            gpope_throughput._plan("poisson", 0.1, steps, s)
            for s in (4.0, 2.0, 1.0, 0.7, 0.5, 0.3)
        ]
    schedule = ope.sample_schedule(plans[0], 7)
    ss, key = ope.StepSize(2.0, 200.0), jax.random.key(2)
    t = time.perf_counter()
    with _compiles() as names:
        thetas = [ope.gpope(p, data, schedule, key, step_size=ss).theta for p in plans]
        jax.block_until_ready(thetas)
    gpope_s = time.perf_counter() - t

    # A 6-sigma sweep of whole privacy.fit calls on a small regression (one loss, one
    # optimizer object across the sweep).
    n = 64
    x = np.asarray(jax.random.normal(jax.random.key(0), (n, 1, 8)))
    fit_data = (x, x[..., 0] * 2.0)
    sampler = privacy.PoissonSampler(
        dataset_size=n, sampling_rate=0.25, microbatch_size=16
    )
    opt = optax.adam(1e-2)

    def loss(w, item):
        return (item[0] @ w - item[1]) ** 2

    t = time.perf_counter()
    with _compiles() as fit_names:
        for s in sizes.fit_sigmas:
            plan = privacy.DPPlan(
                sampler=sampler, l2_clip_norm=1.0, steps=3, noise_multiplier=s
            )
            method, state = privacy.gradient_method(plan, loss, opt, jnp.zeros(8))
            jax.block_until_ready(
                privacy.fit(
                    plan, method, fit_data, state, secret=privacy.DPSecret.from_seed(0)
                ).state
            )
    fit_s = time.perf_counter() - t
    return {
        "sigmas": [p.noise_multiplier for p in plans],
        "fit_sigmas": list(sizes.fit_sigmas),
        "gpope_compiles": names.count("_gpope_run"),
        "gpope_sweep_s": gpope_s,
        "gpope_distinct_results": len({float(th[0]) for th in thetas}),
        "fit_gradient_compiles": fit_names.count("_accumulate"),
        "fit_release_compiles": fit_names.count("_release"),
        "fit_sweep_s": fit_s,
    }


def gpope_e2e(sizes: Sizes) -> dict:
    """Part 3: ``gpope_throughput.part_throughput_e2e`` at this size."""
    return gpope_throughput.part_throughput_e2e(
        sizes.gpope_trials,
        sizes.gpope_steps,
        sizes.gpope_numpy_trials,
        max(sizes.gpope_trials),
        modes=sizes.gpope_modes,
    )


def privorl_n_step(sizes: Sizes) -> dict:
    """Part 4: one PrivORL-n DP fine-tuning step (the DP loop) at the paper's size."""
    n, steps = sizes.privorl_n, sizes.privorl_steps
    denoise, params, data = dp_loop_speed._setup(sizes.privorl_config, n)
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(100))

        def loop(s):
            run = Path(tmp) / f"run{next(counter)}"
            dp_loop_speed.run_loop(
                denoise, params, data, dp_loop_speed._plan(n, s), 0, run
            )

        step_s = dp_loop_speed.time_step(loop, steps)
    plan = dp_loop_speed._plan(n, steps)
    return {
        "config": sizes.privorl_config,
        "num_params": h.num_params(params),
        "expected_batch": plan.expected_batch_size,
        "microbatch": plan.sampler.microbatch_size,
        "steps_timed": [max(2, steps // 4), steps],
        "step_ms": 1000 * step_s,
    }


PARTS = {
    "dp_step": dp_step,
    "sweep": sweep_compiles,
    "gpope": gpope_e2e,
    "privorl_n": privorl_n_step,
}


def render(res: dict) -> str:
    """The Markdown tables of the parts that ran."""
    md = [
        f"Device: `{res['device']}`; load at start / end: `{res['load_start']}` / "
        f"`{res['load_end']}`; total {res['total_s']:.0f} s"
        + (" (**tiny**: a CPU smoke size, not a measurement)" if res["tiny"] else "")
        + ".",
    ]
    if "dp_step" in res:
        md += [
            "",
            "**1. Ghost DP step vs non-private step** (median, steps interleaved)",
            "",
            "| config | params | non-private ms | ghost ms | ghost / non-private "
            "throughput | XLA step MB non-private / ghost |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in res["dp_step"]:
            mb = (
                f"{r['nonprivate_xla_step_mb']:.0f} / {r['ghost_xla_step_mb']:.0f}"
                if r["ghost_xla_step_mb"] is not None
                else "-"
            )
            md.append(
                f"| {r['config']} | {r['num_params']:,} | "
                f"{r['nonprivate_step_ms']:.2f} | {r['ghost_step_ms']:.2f} | "
                f"{r['ghost_over_nonprivate_throughput']:.2f}x | {mb} |"
            )
    if "sweep" in res:
        s = res["sweep"]
        k = len(s["fit_sigmas"])
        sigmas = ", ".join(f"{x:.3g}" for x in s["sigmas"])
        md += [
            "",
            "**2. Sweeps compile once** (XLA compilations counted from JAX's log)",
            "",
            "| sweep | compiles | wall s |",
            "|---|---:|---:|",
            f"| ope.gpope, 6 epsilons (sigma {sigmas}) | {s['gpope_compiles']} | "
            f"{s['gpope_sweep_s']:.1f} |",
            f"| privacy.fit, {k} sigmas: per-unit gradients (_accumulate) | "
            f"{s['fit_gradient_compiles']} | {s['fit_sweep_s']:.1f} |",
            f"| privacy.fit, {k} sigmas: release (noise + update, _release) | "
            f"{s['fit_release_compiles']} | |",
        ]
    if "gpope" in res:
        md += [
            "",
            "**3. GPOPE: vmapped trials vs the NumPy loop, end to end**",
            "",
            gpope_throughput.render_e2e(res["gpope"]),
        ]
    if "privorl_n" in res:
        p = res["privorl_n"]
        md += [
            "",
            "**4. PrivORL-n DP fine-tuning step (the DP loop)**",
            "",
            "| model | params | expected batch | microbatch | ms / step |",
            "|---|---:|---:|---:|---:|",
            f"| {p['config']} | {p['num_params']:,} | {p['expected_batch']:.0f} | "
            f"{p['microbatch']} | {p['step_ms']:.1f} |",
        ]
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Runs the four parts and writes the JSON and Markdown; returns the results."""
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--tiny", action="store_true", help="CPU smoke sizes (seconds)")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated subset of {','.join(PARTS)} (default: all)",
    )
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        raise ValueError(
            f"--parts takes names from {', '.join(PARTS)}; got {args.parts!r}."
        )
    sizes = TINY if args.tiny else FULL
    load = h.load_now()
    t0 = time.perf_counter()
    res = {
        "tiny": args.tiny,
        "device": str(jax.devices()[0]),
        "backend": jax.default_backend(),
        "load_start": load,
    }
    for part in parts:
        res[part] = PARTS[part](sizes)
    res["total_s"] = time.perf_counter() - t0
    res["load_end"] = h.load_now()
    md = render(res)
    print(md)
    name = "gpu_check_tiny" if args.tiny else "gpu_check"
    h.write_outputs(args.out / name, res, md)
    return res


if __name__ == "__main__":
    main()
