"""GPOPE's code speed on the medical chain: vmapped trials vs a Python loop, and end to
end against a NumPy loop (issue 13, experiment 4; issue 25).

The chain (5 levels, gamma 0.9, on-policy target treating level s with probability
0.9, 0.8, 0.6, 0.4, 0.2), one-hot features, m = 1000 trajectories of T = 20, delta =
1e-5. Only code speed lives here; GPOPE's accuracy results are experiment files
(``privrl_jax/experiments/gpope_*.yaml``). ``gpu_check.py`` imports this module.

    PYTHONPATH=. python benchmarks/gpope_throughput.py --part throughput
    PYTHONPATH=. python benchmarks/gpope_throughput.py --part throughput_e2e --steps 100
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os

import _harness as h
import jax
import numpy as np

from privrl_jax import ope, privacy
from privrl_jax.ope._chain import Collected
from privrl_jax.ope._gpope import IndexSchedule, draw_schedule

RESULTS = h.RESULTS
S, GAMMA, M, T, DELTA = 5, 0.9, 1000, 20, 1e-5
TARGET_TREAT = (0.9, 0.8, 0.6, 0.4, 0.2)
POISSON_BATCH, POISSON_STEPS, MICROBATCH = 50, 2000, 64
# (sampling, clip norm h, step size) of each timed run.
MODES = (
    ("poisson", 0.1, ope.StepSize(2.0, 200.0)),
    ("uniform", 0.05, ope.StepSize(0.1, 500.0)),
)


def setting():
    """The chain, the target policy, its features and its exact values."""
    mdp = ope.medical_chain(S, gamma=GAMMA)
    pi = ope.treatment_policy(TARGET_TREAT)
    return mdp, pi, ope.one_hot_features(S), ope.exact_values(mdp, pi)


def datasets(mdp, pi, phi, seed: int, trials: int) -> Collected:
    """``trials`` on-policy datasets of M trajectories of length T, stacked."""
    keys = jax.random.split(jax.random.key(seed), trials)
    collect = functools.partial(ope.collect, num_trajectories=M, max_length=T)
    return jax.jit(jax.vmap(lambda k: collect(k, mdp, pi, pi, phi)))(keys)


@functools.cache
def _sigma(mode: str, eps: float, steps: int) -> float:
    # sigma (noise std / sensitivity) does not depend on the clip norm: calibrate
    # once per setting.
    return _plan(mode, 1.0, steps, None).calibrate(eps, DELTA, "rdp").noise_multiplier


def _plan(mode: str, clip: float, steps: int, sigma: float | None) -> privacy.DPPlan:
    if mode == "uniform":
        sampler = privacy.UniformOneSampler(dataset_size=M)
    else:
        sampler = privacy.PoissonSampler(
            dataset_size=M, sampling_rate=POISSON_BATCH / M, microbatch_size=MICROBATCH
        )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=clip, steps=steps, noise_multiplier=sigma
    )


def plan_for(mode: str, clip: float, eps: float, steps: int) -> privacy.DPPlan:
    """The plan calibrated for (eps, DELTA) over ``steps`` iterations (RDP)."""
    return _plan(mode, clip, steps, _sigma(mode, eps, steps))


def part_throughput(trials: int, steps: int, repeats: int) -> dict:
    """``gpope_trials`` (one jit over the trials) vs a Python loop of ``gpope``, in
    ``repeats`` interleaved rounds after a compile; rows per sampling."""
    mdp, pi, phi, _ = setting()
    data = jax.tree_util.tree_map(
        lambda x: x[0], datasets(mdp, pi, phi, seed=3000, trials=1).data
    )
    keys = jax.random.split(jax.random.key(32), trials)
    rows, protocols = [], []
    for mode, clip, ss in MODES:
        plan = plan_for(mode, clip, 1.0, steps)
        sch = ope.sample_schedule(plan, 31, trials=trials, pad_to="max")
        sampled = int(sch.mask.sum())  # trajectories over all trials and steps
        vm = jax.jit(functools.partial(ope.gpope_trials, plan, data, step_size=ss))
        one = jax.jit(functools.partial(ope.gpope, plan, data, step_size=ss))
        each = [IndexSchedule(sch.indices[i], sch.mask[i]) for i in range(trials)]
        timings = h.interleave(
            {
                "vmap": lambda: vm(sch, keys),
                "loop": lambda: [
                    jax.block_until_ready(one(s, k)) for s, k in zip(each, keys)
                ],
            },
            rounds=repeats,
            order="alternate",
        )
        tv, tl = timings.fastest("vmap"), timings.fastest("loop")
        protocols.append(f"{mode}: {timings.protocol()}")
        rows.append(
            {
                "mode": mode,
                "trials": trials,
                "steps": steps,
                "padded_width": int(sch.indices.shape[-1]),
                "trajectories_processed": sampled,
                "vmap_seconds": tv,
                "loop_seconds": tl,
                "vmap_trajectories_per_s": sampled / tv,
                "loop_trajectories_per_s": sampled / tl,
                "speedup": tl / tv,
                "all_vmap_seconds": timings.flat("vmap"),
                "all_loop_seconds": timings.flat("loop"),
            }
        )
        print(rows[-1], flush=True)
    return {
        "rows": rows,
        "repeats": repeats,
        "device": str(jax.devices()[0]),
        "timing": "fastest of the rounds, compile excluded; " + "; ".join(protocols),
    }


def render_throughput(res: dict) -> str:
    """The Markdown table of :func:`part_throughput`'s rows."""
    head = ("sampling", "trials", "steps", "padded batch", "trajectories processed")
    head += ("vmap (one jit) traj/s", "Python loop traj/s", "speed-up")
    rows = [
        (
            *(r[k] for k in ("mode", "trials", "steps", "padded_width")),
            r["trajectories_processed"],
            f"{r['vmap_trajectories_per_s']:.3g}",
            f"{r['loop_trajectories_per_s']:.3g}",
            f"{r['speedup']:.2f}x",
        )
        for r in res["rows"]
    ]
    # No assertion on the ratio: on a shared 2-core CPU both runs do the same
    # arithmetic, and the loop's per-trial dispatch is one call per 500-step scan.
    return h.markdown_table(head, rows) + f"\n\n{res['timing']}\n"


# -------------------------------------- (4b) end to end against a NumPy loop (issue 25)


def numpy_gpope(
    plan: privacy.DPPlan, data, indices, mask, ss: ope.StepSize, rng
) -> tuple:
    """GPOPE as a paper's code runs it: NumPy, one trial, one Python iteration per step.

    The same algorithm as ``ope.gpope`` ("horizon" weights, one clip norm h on the
    stacked (theta, w) direction, noise std sigma * sensitivity once per step from
    ``rng``, / the expected batch size, beta_j = beta / (1 + j / decay) ** power), in
    float64.
    """
    phi0, r, disc, phi1, rho = (np.asarray(x, np.float64) for x in data.transitions)
    valid = np.asarray(data.mask)
    n, horizon = phi0.shape[-1], valid.shape[-1]
    clip, std = plan.l2_clip_norms[0], plan.noise_stds[0]
    ebs = plan.expected_batch_size
    theta, w = np.zeros(n), np.zeros(n)
    for t in range(indices.shape[0]):
        idx = indices[t][mask[t]]
        p0, p1, rt, dt, rh = phi0[idx], phi1[idx], r[idx], disc[idx], rho[idx]
        td = rt + dt * (p1 @ theta) - p0 @ theta
        phi_w = p0 @ w
        wts = np.where(valid[idx], 1.0 / horizon, 0.0)
        g_th = np.einsum("ut,utn->un", wts * -rh * phi_w, p0 - dt[..., None] * p1)
        g_w = np.einsum("ut,utn->un", wts * (phi_w - rh * td), p0)
        norms = np.sqrt(np.sum(g_th**2, -1) + np.sum(g_w**2, -1))
        scale = clip / np.maximum(norms, clip)
        z = rng.standard_normal(2 * n) * std
        beta = ss.beta
        if ss.decay_steps is not None:
            beta = ss.beta / (1 + t / ss.decay_steps) ** ss.power
        theta = theta - beta * (scale @ g_th + z[:n]) / ebs
        w = w - beta * (scale @ g_w + z[n:]) / ebs
    return theta, w


def _padding(mask: np.ndarray, microbatch: int | None) -> dict:
    sizes = mask.sum(-1)  # [K, N]
    width = mask.shape[-1]
    # What the scan computes: the schedule's width padded to a whole number of the
    # plan's microbatches (ope.gpope sums microbatch by microbatch, as privacy.fit).
    mb = microbatch or width
    return {
        "useful_units": int(sizes.sum()),
        "computed_units": int(mask.size // width * (-(-width // mb) * mb)),
        "padded_units_run": int(mask.size),
        "padded_units_per_step": int(sizes.max(0).sum() * mask.shape[0]),
        "width_run": int(width),
        "mean_width_per_step": float(sizes.max(0).mean()),
    }


def _reference_check(plan: privacy.DPPlan, data, ss: ope.StepSize) -> dict:
    """The NumPy loop against ``ope.gpope_trials`` at sigma = 0 on one schedule."""
    plan0 = dataclasses.replace(plan, noise_multiplier=0.0)
    sch = ope.sample_schedule(plan0, 7, trials=3)
    keys = jax.random.split(jax.random.key(0), 3)
    got = ope.gpope_trials(plan0, data, sch, keys, step_size=ss)
    diffs = []
    for k in range(3):
        rng = np.random.default_rng(0)
        th, w = numpy_gpope(plan0, data, sch.indices[k], sch.mask[k], ss, rng)
        diffs.append(
            max(np.max(np.abs(th - got.theta[k])), np.max(np.abs(w - got.w[k])))
        )
    return {
        "max_abs_diff_sigma0": float(max(diffs)),
        "max_abs_theta": float(np.max(np.abs(np.asarray(got.theta)))),
    }


def part_throughput_e2e(
    trial_counts,
    steps: int,
    numpy_trials: int,
    poisson_max: int,
    modes: tuple[str, ...] = ("poisson", "uniform"),
) -> dict:
    """vmapped ``gpope_trials`` vs the NumPy loop, end to end, compile and schedule
    included (one run each: a first call is a compile, it cannot be repeated)."""
    mdp, pi, phi, _ = setting()
    data = jax.tree_util.tree_map(
        lambda x: x[0], datasets(mdp, pi, phi, seed=3000, trials=1).data
    )
    rows, checks = [], {}
    for mode, clip, ss in (m for m in MODES if m[0] in modes):
        plan = plan_for(mode, clip, 1.0, steps)
        checks[mode] = _reference_check(plan, data, ss)
        print(mode, checks[mode], flush=True)
        for trials in trial_counts:
            if mode == "poisson" and trials > poisson_max:
                continue
            keys = jax.random.split(jax.random.key(32), trials)
            run = functools.partial(ope.gpope_trials, plan, data, step_size=ss)
            # The schedule drawn on the host, and on the device (compile included).
            draws = {
                "host": h.timed(lambda: ope.sample_schedule(plan, 31, trials=trials)),
                "device": h.timed(
                    lambda: draw_schedule(plan, jax.random.key(31), trials=trials)
                ),
            }
            t_host, t_run = draws["host"][1], None
            for where, (schedule, t_draw) in draws.items():
                t_first = h.timed(lambda s=schedule: run(s, keys))[1]
                if t_run is None:  # steady state: once per (sampling, K)
                    t_run = h.timed(lambda s=schedule: run(s, keys))[1]
                    # The NumPy loop costs the same per trial (nothing is shared
                    # between trials): time ``numpy_trials`` of them, scale to K.
                    k_np = min(trials, numpy_trials)
                    idx, msk = np.asarray(schedule.indices), np.asarray(schedule.mask)
                    rng = np.random.default_rng(1)
                    t_np = h.timed(
                        lambda idx=idx, msk=msk, rng=rng, k_np=k_np: [
                            numpy_gpope(plan, data, idx[k], msk[k], ss, rng)
                            for k in range(k_np)
                        ]
                    )[1] * (trials / k_np)
                jax_total, np_total = t_draw + t_first, t_host + t_np
                rows.append(
                    {
                        "mode": mode,
                        "trials": trials,
                        "steps": steps,
                        "schedule": where,
                        "draw_s": t_draw,
                        "host_draw_s": t_host,
                        "first_call_s": t_first,
                        "run_s": t_run,
                        "compile_s": max(t_first - t_run, 0.0),
                        "jax_total_s": jax_total,
                        "numpy_loop_s": t_np,
                        "numpy_trials_timed": k_np,
                        "numpy_total_s": np_total,
                        "speedup_incl_compile": np_total / jax_total,
                        "speedup_steady": np_total / (t_draw + t_run),
                        "draw_share_of_jax": t_draw / jax_total,
                        "load_1min": os.getloadavg()[0],
                    }
                    | _padding(np.asarray(schedule.mask), plan.sampler.microbatch_size)
                )
                print(
                    mode,
                    trials,
                    where,
                    f"JAX {jax_total:.2f} s, NumPy {np_total:.2f} s",
                    flush=True,
                )
    return {
        "rows": rows,
        "checks": checks,
        "device": str(jax.devices()[0]),
        "timing": "one run each; wall clock; first call = compile + run (each "
        "schedule's width compiles once); steady run measured once per (sampling, "
        "K); NumPy loop timed on numpy_trials_timed trials and scaled linearly to K",
        "uptime_end": h.host_line(),
    }


def _units(n: int, useful: int) -> str:
    return f"{n:,} ({useful / n:.0%})"


def render_e2e(res: dict) -> str:
    """The Markdown table of :func:`part_throughput_e2e`'s rows and its checks."""
    head = ("sampling", "K trials", "schedule", "draw s", "compile s", "run s")
    head += ("JAX total s", "NumPy loop s (incl. host draw)", "speed-up incl. compile")
    head += ("6-eps sweep incl. one compile", "steady", "draw share", "useful units")
    head += ("computed (microbatch-padded)", "padded (run)", "padded (per step)")
    host_compile = {
        (r["mode"], r["trials"]): r["compile_s"]
        for r in res["rows"]
        if r["schedule"] == "host"
    }
    rows = []
    for r in res["rows"]:
        # A device row's first call reuses its host row's executable when the widths
        # match, so its measured compile is ~0; a cold run pays that compile, so the
        # row is charged the larger of the two.
        compile_s = max(r["compile_s"], host_compile.get((r["mode"], r["trials"]), 0.0))
        cold = r["draw_s"] + compile_s + r["run_s"]
        host = r["schedule"] == "host"
        # Steady = draw + run without compiles (a device draw's time includes its
        # compile: no steady figure). A 6-epsilon sweep compiles once (issue 25,
        # item 2): 6 NumPy runs against one compile and 6 draws + runs.
        sweep = (
            6 * r["numpy_total_s"] / (r["compile_s"] + 6 * (r["draw_s"] + r["run_s"]))
        )
        useful = r["useful_units"]
        rows.append(
            (
                r["mode"],
                r["trials"],
                r["schedule"],
                f"{r['draw_s']:.2f}",
                f"{compile_s:.2f}",
                f"{r['run_s']:.2f}",
                f"{cold:.2f}",
                f"{r['numpy_total_s']:.1f}",
                f"{r['numpy_total_s'] / cold:.2g}x",
                f"{sweep:.2g}x" if host else "-",
                f"{r['speedup_steady']:.2g}x" if host else "-",
                f"{100 * r['draw_s'] / cold:.0f}%",
                f"{useful:,}",
                _units(r["computed_units"], useful),
                _units(r["padded_units_run"], useful),
                _units(r["padded_units_per_step"], useful),
            )
        )
    checks = ", ".join(
        f"{m} max |diff| {c['max_abs_diff_sigma0']:.1e} (max |theta| "
        f"{c['max_abs_theta']:.2g})"
        for m, c in res["checks"].items()
    )
    loads = ", ".join(f"{r['load_1min']:.1f}" for r in res["rows"])
    return (
        h.markdown_table(head, rows)
        + f"\n\nat the end: {res['uptime_end']}; 1-min load per row: {loads}\n"
        "\nA device row's first call reuses the executable its host row compiled when "
        "the widths match (always for one-of-m), so its measured compile is ~0; its "
        "compile column, JAX total and speed-up charge it the larger of its own and "
        "its host row's compile, the cost of a cold run.\n"
        f"\nNumPy reference = ope.gpope at sigma = 0 on the same schedule: {checks}\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--part", choices=["throughput", "throughput_e2e"], required=True)
    ap.add_argument("--trial-counts", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument(
        "--numpy-trials",
        type=int,
        default=20,
        help="throughput_e2e: NumPy trials timed",
    )
    ap.add_argument(
        "--poisson-max",
        type=int,
        default=1000,
        help="throughput_e2e: largest Poisson K",
    )
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--steps", type=int, default=500, help="GPOPE iterations")
    ap.add_argument("--repeats", type=int, default=2, help="throughput: rounds")
    ap.add_argument("--name", default=None, help="results stem (default gpope_<part>)")
    ap.add_argument(
        "--replot", action="store_true", help="re-render the stored JSON only"
    )
    args = ap.parse_args()
    stem = RESULTS / (args.name or f"gpope_{args.part}")
    render = render_e2e if args.part == "throughput_e2e" else render_throughput
    if args.replot:
        md = render(json.loads(stem.with_suffix(".json").read_text()))
        stem.with_suffix(".md").write_text(md)
        return
    if args.part == "throughput_e2e":
        res = part_throughput_e2e(
            args.trial_counts, args.steps, args.numpy_trials, args.poisson_max
        )
        # The reference must be the same algorithm (float32 vs float64 over the run).
        assert all(
            c["max_abs_diff_sigma0"] <= 1e-5 * max(1.0, c["max_abs_theta"])
            for c in res["checks"].values()
        ), res["checks"]
    else:
        res = part_throughput(args.trials, args.steps, args.repeats)
    md = render(res)
    print(md)
    h.write_outputs(stem, res, md, indent=1)


if __name__ == "__main__":
    main()
