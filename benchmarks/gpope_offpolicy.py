"""GPOPE off-policy: MSE of V-hat vs epsilon and vs the number of trajectories m (issue
13, exp. 2).

On the medical chain MDP, Mountain Car and the HIV simulator, each from its shipped
config (``configs/gpope/{chain,mountain_car,hiv}.yaml``): the behaviour policy's data
are collected once at the largest m (a public seed), a smaller m takes the first m
trajectories (they are i.i.d., so a prefix is a sample of size m). For every (epsilon,
m) the plan is calibrated for that m (Poisson sampling, expected batch b,
add/remove-one; RDP accountant, delta = 1e-5) and ``privrl_jax.ope.gpope_trials`` runs K
vmapped trials in one jit (independent sampling streams and noise keys; fixed benchmark
seeds, so these runs are NOT private
releases: they measure utility).

The metric (docs/gpope_envs.md): chain, the mean over the S levels of (V-hat - V^pi)^2
with the exact V^pi (linear solve); Mountain Car and HIV, the mean over K_eval public
evaluation states (start states rolled forward under the target policy) of (V-hat -
V_MC)^2, V_MC from Monte Carlo rollouts of the target policy. Shown next to it: the
off-policy LSTD solution of the same data (the features' floor, non-private), noise-free
GTD2 (epsilon = inf: the same clipped iterations without noise) and predicting V = 0.

The defaults are scaled down for this 2-core machine (chain 20, Mountain Car and HIV 4
trials; ``--trials`` overrides all), and so are the sweeps; the issue's (and the
paper's) 100 trials are one run per env, each under its own name (issue 24). Writes
``benchmarks/results/NAME{.json,.md,.png}``.

    python benchmarks/gpope_offpolicy.py           # all three envs (gpope_offpolicy)
    python benchmarks/gpope_offpolicy.py --envs chain --trials 100 \\
        --name gpope_offpolicy_chain
    python benchmarks/gpope_offpolicy.py --envs mountain_car --trials 100 \\
        --name gpope_offpolicy_mountain_car
    python benchmarks/gpope_offpolicy.py --envs hiv --trials 100 \\
        --name gpope_offpolicy_hiv
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import ope
from privrl_jax.pipelines import gpope

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# Per env: config, trials, epsilon sweep (at the config's m), m sweep (at m_epsilon).
SETTINGS = {
    "chain": {
        "config": "gpope/chain",
        "trials": 20,
        "epsilons": [0.25, 1.0, 4.0, 16.0],
        "ms": [250, 1000, 4000],
        "m_epsilon": 1.0,
    },
    "mountain_car": {
        "config": "gpope/mountain_car",
        "trials": 4,
        "epsilons": [0.5, 2.0, 8.0],
        "ms": [250, 1000, 2000],
        "m_epsilon": 2.0,
    },
    "hiv": {
        "config": "gpope/hiv",
        "trials": 4,
        "epsilons": [0.5, 2.0, 8.0],
        "ms": [125, 250, 500],
        "m_epsilon": 2.0,
    },
}


def _prefix(data: ope.TrajectoryData, m: int) -> ope.TrajectoryData:
    return jax.tree_util.tree_map(lambda x: x[:m], data)


def _truth(cfg: gpope.GPOPERunConfig):
    """(features [K, n], true values [K], mean squared MC stderr) of the metric."""
    task = gpope.build_task(cfg)
    if task.chain:
        return task.features, ope.exact_values(task.mdp, task.target), 0.0
    phi, mc = gpope.true_values(task)
    return phi, mc.values, float(jnp.mean(mc.stderr**2))


def _mse_row(cfg, data, phi, values, trials, seed) -> dict:
    plan = gpope.make_plan(cfg)
    schedules = ope.sample_schedule(plan, seed, trials=trials)
    keys = jax.random.split(jax.random.key(seed + 1), trials)
    g = cfg.gpope
    res = ope.gpope_trials(
        plan,
        data,
        schedules,
        keys,
        step_size=ope.StepSize(g.step_size, g.decay_steps, g.decay_power),
        normalization=g.normalization,
    )
    mse = np.asarray(ope.value_mse(res.theta, phi, values), np.float64)
    from scipy import stats

    # 95% Student-t interval of the mean over trials (sample std, ddof = 1).
    half = (
        float(stats.t.ppf(0.975, trials - 1))
        * float(np.std(mse, ddof=1))
        / math.sqrt(trials)
    )
    return {
        "epsilon": cfg.privacy.epsilon,
        "m": cfg.env.num_trajectories,
        "noise_multiplier": plan.noise_multipliers[0],
        "mse_mean": float(np.mean(mse)),
        "mse_std": float(np.std(mse, ddof=1)),
        "mse_median": float(np.median(mse)),
        "mse_ci95": [float(np.mean(mse)) - half, float(np.mean(mse)) + half],
        "clipped_fraction": float(np.mean(np.asarray(res.clipped_fraction))),
    }


def run_env(name: str, trials: int | None, seed: int) -> dict:
    s = SETTINGS[name]
    trials = trials or s["trials"]
    base = gpope.load(s["config"])
    m_max = max([*s["ms"], base.env.num_trajectories])
    t0 = time.time()
    data_all = gpope.collect_data(
        gpope.build_task(gpope.load(s["config"], [f"env.num_trajectories={m_max}"]))
    )
    t_collect = time.time() - t0
    t0 = time.time()
    phi, values, mc_se2 = _truth(base)
    t_truth = time.time() - t0

    def cfg_for(eps: float, m: int, extra: tuple = ()):
        return gpope.load(
            s["config"], [f"privacy.epsilon={eps}", f"env.num_trajectories={m}", *extra]
        )

    def floors(m: int) -> dict:
        data = _prefix(data_all, m)
        if name == "chain":
            theta = ope.lstd_solution(
                ope.dataset_stats(data, base.gpope.normalization)
            )[0]
        else:
            theta = gpope.lstd_min_norm(data, base.gpope.normalization)
        noise_free = _mse_row(cfg_for(math.inf, m), data, phi, values, trials, seed)
        # What the clip h costs without noise: the same iterations with h = 1e6 (never
        # binds).
        unclipped = _mse_row(
            cfg_for(math.inf, m, ["gpope.l2_clip_norm=1e6"]),
            data,
            phi,
            values,
            trials,
            seed,
        )
        return {
            "m": m,
            "lstd_mse": float(ope.value_mse(theta, phi, values)),
            "gtd2_noise_free_mse": noise_free["mse_mean"],
            "gtd2_noise_free_std": noise_free["mse_std"],
            "gtd2_noise_free_clipped_fraction": noise_free["clipped_fraction"],
            "gtd2_noise_free_unclipped_mse": unclipped["mse_mean"],
            "gtd2_noise_free_unclipped_std": unclipped["mse_std"],
        }

    m0 = base.env.num_trajectories
    t0 = time.time()
    vs_eps = [
        _mse_row(cfg_for(e, m0), _prefix(data_all, m0), phi, values, trials, seed)
        for e in s["epsilons"]
    ]
    # The (m_epsilon, m0) point is in both sweeps; same seed, so reuse it, not rerun it.
    done = {(row["epsilon"], row["m"]): row for row in vs_eps}
    vs_m = [
        done.get((s["m_epsilon"], m))
        or _mse_row(
            cfg_for(s["m_epsilon"], m), _prefix(data_all, m), phi, values, trials, seed
        )
        for m in s["ms"]
    ]
    ref = {m: floors(m) for m in sorted({m0, *s["ms"]})}
    t_runs = time.time() - t0
    g = base.gpope
    return {
        "config": s["config"],
        "trials": trials,
        "m_default": m0,
        "m_epsilon": s["m_epsilon"],
        "steps": g.steps,
        "batch_size": g.batch_size,
        "l2_clip_norm": g.l2_clip_norm,
        "step_size": [g.step_size, g.decay_steps],
        "num_features": int(phi.shape[-1]),
        "num_eval_states": int(phi.shape[0]),
        "true_values_mean": float(jnp.mean(values)),
        "true_values_var": float(jnp.var(values)),
        "zero_predictor_mse": float(jnp.mean(values**2)),
        "mc_mean_squared_stderr": mc_se2,
        "vs_epsilon": vs_eps,
        "vs_m": vs_m,
        "references": list(ref.values()),
        "seconds": {"collect": t_collect, "truth": t_truth, "gpope": t_runs},
    }


def render_md(results: dict) -> str:
    lines = ["# GPOPE off-policy: MSE vs epsilon and vs m", ""]
    for name, r in results.items():
        refs = {x["m"]: x for x in r["references"]}
        lines += [
            (
                f"## {name} ({r['config']}, {r['trials']} trials, N = {r['steps']}, b "
                "= "
                f"{r['batch_size']:g}, h = {r['l2_clip_norm']:g}, n = "
                f"{r['num_features']})"
            ),
            "",
            f"True values: mean {r['true_values_mean']:.3f}, variance "
            f"{r['true_values_var']:.4f} over {r['num_eval_states']} states; "
            "predicting "
            f"V = 0 scores {r['zero_predictor_mse']:.4f}"
            + (
                f"; MC mean squared stderr {r['mc_mean_squared_stderr']:.1e}."
                if r["mc_mean_squared_stderr"]
                else " (exact values)."
            ),
            "",
            "Relation: add/remove-one (Poisson sampling), delta = 1e-5. MSE: mean +- "
            "sample std "
            "(ddof = 1) [95% t-interval of the mean]; clipped: share of sampled "
            "trajectories "
            "whose direction exceeded h; the last two columns are noise-free GTD2 with "
            "the "
            "clip h and with no clip (h = 1e6), the clip's own cost.",
            "",
            "| epsilon | m | sigma | MSE mean +- std [95% CI] | median | clipped "
            "| GTD2 noise-free (clip h) | GTD2 noise-free, no clip | LSTD |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in r["vs_epsilon"] + r["vs_m"]:
            ref = refs[row["m"]]
            ci = row.get("mse_ci95")
            ci_txt = f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""
            unclipped = ref.get("gtd2_noise_free_unclipped_mse")
            lines.append(
                f"| {row['epsilon']:g} | {row['m']} | {row['noise_multiplier']:.3g} | "
                f"{row['mse_mean']:.4g} +- {row['mse_std']:.2g}{ci_txt} | "
                f"{row['mse_median']:.4g} | "
                f"{row['clipped_fraction']:.2f} | {ref['gtd2_noise_free_mse']:.4g} | "
                + (f"{unclipped:.4g}" if unclipped is not None else "-")
                + f" | {ref['lstd_mse']:.4g} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        2, len(results), figsize=(4.2 * len(results), 7), squeeze=False
    )
    for j, (name, r) in enumerate(results.items()):
        refs = {x["m"]: x for x in r["references"]}
        for i, (key, xkey, xlabel) in enumerate(
            [("vs_epsilon", "epsilon", "epsilon"), ("vs_m", "m", "m (trajectories)")]
        ):
            ax = axes[i][j]
            rows = r[key]
            x = [row[xkey] for row in rows]
            ax.errorbar(
                x,
                [row["mse_mean"] for row in rows],
                yerr=[row["mse_std"] for row in rows],
                marker="o",
                capsize=3,
                label="GPOPE (Poisson)",
            )
            ax.plot(
                x,
                [refs[row["m"]]["gtd2_noise_free_mse"] for row in rows],
                "k--",
                label="GTD2, no noise",
            )
            ax.plot(x, [refs[row["m"]]["lstd_mse"] for row in rows], "g:", label="LSTD")
            ax.axhline(r["zero_predictor_mse"], color="grey", lw=0.8, label="V = 0")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(x, [f"{v:g}" for v in x])
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel(xlabel)
            ax.set_ylabel("MSE of V-hat")
            fixed = f"m = {r['m_default']}" if i == 0 else f"eps = {r['m_epsilon']:g}"
            ax.set_title(f"{name} ({fixed}, {r['trials']} trials)")
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def check(results: dict) -> None:
    """What the experiment must show: more privacy budget and more patients help."""
    for name, r in results.items():
        eps, ms = r["vs_epsilon"], r["vs_m"]
        assert eps[-1]["mse_mean"] < eps[0]["mse_mean"], (
            name,
            "MSE must fall with epsilon",
        )
        assert ms[-1]["mse_mean"] < ms[0]["mse_mean"], (name, "MSE must fall with m")
        # sigma for the same epsilon falls with m (the sampling rate b / m falls).
        assert ms[-1]["noise_multiplier"] < ms[0]["noise_multiplier"], name


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--envs", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="gpope_offpolicy")
    ap.add_argument(
        "--replot", action="store_true", help="re-render the stored JSON; run nothing"
    )
    args = ap.parse_args()
    if args.replot:
        results = json.loads((RESULTS / f"{args.name}.json").read_text())
        (RESULTS / f"{args.name}.md").write_text(render_md(results))
        plot(results, RESULTS / f"{args.name}.png")
        check(results)
        return
    results = {}
    for name in args.envs:
        t = time.time()
        results[name] = run_env(name, args.trials, args.seed)
        print(f"{name}: {time.time() - t:.0f} s", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    dump_json((RESULTS / f"{args.name}.json"), results, indent=2)
    md = render_md(results)
    (RESULTS / f"{args.name}.md").write_text(md)
    plot(results, RESULTS / f"{args.name}.png")
    print(md)
    check(results)


if __name__ == "__main__":
    main()
