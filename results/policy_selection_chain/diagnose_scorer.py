"""Why the chain policy scorer could not be trusted: its error split into parts.

Issue 51. ``privrl select --config chain_policies`` scores 8 stochastic treatment
policies on the medical chain by GPOPE's DP value estimate at the public start
distribution (one-hot state features, importance ratios, Poisson sampling of
trajectories, epsilon 1 a run). For each candidate this prints:

- ``true``: the exact start value, from the chain's transition matrix
  (``ope.exact_values``);
- ``lstd``: the noiseless fixed point, off-policy LSTD(0) on all the data (tabular
  features: it differs from ``true`` by sampling error only);
- ``gpope0``: GPOPE without noise (sigma = 0, same clip, same finite steps), the mean
  over the sampling schedules: ``gpope0 - true`` is the bias of the finite run;
- ``noise sd``: the standard deviation of the DP estimate over noise seeds (same data);
- ``clipped``: the mean fraction of sampled trajectories that were clipped;
- ``|b_i| q90``: the 90th percentile of the per-trajectory direction norms at GPOPE's
  start point (theta = w = 0, where B_i = (0, -b_i)).

Each is given at the old clip norm (0.5, ``gpope/chain``'s) and at the clip the public
rule picks: the median of ``||b_i||`` (``--quantile``; the median is the target quantile
Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially private learning with
adaptive clipping", recommend), pooled over the 8 candidates, on a public stand-in data
set (same simulator, seed ``--public-seed``, never one of the experiment's data sets),
rounded up to 2 significant digits. NOT DP: it reads the data sets without noise (an
audit). Run from the repository root::

    python results/policy_selection_chain/diagnose_scorer.py [--seed 0] [--trials 8]

About 3 CPU-minutes at the defaults (two clips x 8 candidates x 8 noise seeds).
``--quantiles 0.5 0.75 0.9`` instead diagnoses the stand-in itself at each quantile's
clip, with the regret of the best score when each candidate runs once: how the
quantile was checked on public data only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import ope
from privrl_jax.pipelines import gpope
from privrl_jax.pipelines._select_config import load
from privrl_jax.pipelines.select import runner


def candidates(seed: int, clip: float | None = None):
    """The 8 candidates' configs, plans, tasks and data at data seed ``seed``."""
    cfg = load("select/chain_policies", [f"candidates.overrides.seed={seed}"])
    extra = [] if clip is None else [f"gpope.l2_clip_norm={clip}"]
    base = runner.gpope_config_source(cfg.candidates.config)
    configs = [
        gpope.load(base, cfg.candidates.overrides_for(c) + extra)
        for c in cfg.candidates.candidates()
    ]
    tasks, datas = runner._tasks_and_data(configs)
    return configs, [gpope.make_plan(c) for c in configs], tasks, datas


def start_norms(data: ope.TrajectoryData) -> np.ndarray:
    """[m] ``||B_i(0, 0)|| = ||b_i||``: the directions at GPOPE's start point."""
    n = data.transitions.phi_tm1.shape[-1]
    b = runner.td_directions(jnp.zeros(n), data, "horizon")  # b_i - A_i 0
    return np.linalg.norm(np.asarray(b), axis=1)


def public_clip(seed: int, quantile: float) -> tuple[float, float]:
    """The clip rule: a ``quantile`` of ``||b_i||`` on public data, over all candidates.

    Returns the raw quantile and the clip (rounded up to 2 significant digits).
    """
    _, _, _, datas = candidates(seed)
    q = float(np.quantile(np.concatenate([start_norms(d) for d in datas]), quantile))
    digits = 1 - math.floor(math.log10(q))
    return q, math.ceil(q * 10**digits) / 10**digits


def diagnose(seed: int, clip: float, trials: int) -> list[dict[str, float]]:
    """One row per candidate at clip ``clip`` on data set ``seed``."""
    configs, plans, tasks, datas = candidates(seed, clip)
    rows = []
    for i, (c, plan, task, data) in enumerate(
        zip(configs, plans, tasks, datas, strict=True)
    ):
        g = c.gpope
        step = ope.StepSize(g.step_size, g.decay_steps, g.decay_power)
        start = np.asarray(task.mdp.initial)
        lstd, _ = ope.lstd_solution(ope.dataset_stats(data, g.normalization))
        schedules = ope.sample_schedule(plan, 1000 + i, trials=trials)
        keys = jax.random.split(jax.random.key(2000 + i), trials)

        def values(p, schedules=schedules, keys=keys, data=data, step=step, g=g):
            res = ope.gpope_trials(
                p, data, schedules, keys, step_size=step, normalization=g.normalization
            )
            return np.asarray(res.theta) @ start, float(jnp.mean(res.clipped_fraction))

        noiseless, _ = values(dataclasses.replace(plan, noise_multiplier=(0.0,)))
        noisy, clipped = values(plan)
        rows.append(
            {
                "target_treat": list(c.env.target_treat),
                "true": runner.true_policy_value(task),
                "lstd": float(start @ np.asarray(lstd)),
                "gpope0": float(noiseless.mean()),
                "noise_sd": float(noisy.std(ddof=1)),
                "draws": noisy.tolist(),
                "clipped": clipped,
                "norm_q90": float(np.quantile(start_norms(data), 0.9)),
                "sigma": plan.noise_multipliers[0],
            }
        )
    return rows


def selection_regret(rows: list[dict[str, float]], draws: np.ndarray) -> float:
    """Mean regret of the best-scoring candidate, one DP estimate each.

    ``draws`` are ``[runs, candidates]`` DP estimates; the regret is against the true
    values in ``rows``.
    """
    true = np.array([r["true"] for r in rows])
    return float(np.mean(true.max() - true[np.argmax(draws, axis=1)]))


def show(clip: float, rows: list[dict[str, float]]) -> None:
    """Prints one clip's table and its summary line."""
    print(f"\nclip h = {clip:g} (noise multiplier {rows[0]['sigma']:.2f})")
    print(
        "| target treat | true | lstd | gpope0 | bias | noise sd | clipped | "
        "|b_i| q90 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['target_treat']} | {r['true']:+.3f} | {r['lstd']:+.3f} | "
            f"{r['gpope0']:+.3f} | {r['gpope0'] - r['true']:+.3f} | "
            f"{r['noise_sd']:.3f} | {r['clipped']:.2f} | {r['norm_q90']:.3f} |"
        )
    lstd_err = np.array([r["lstd"] - r["true"] for r in rows])
    bias = np.array([r["gpope0"] - r["true"] for r in rows])
    sd = np.array([r["noise_sd"] for r in rows])
    draws = np.array([r["draws"] for r in rows]).T  # [noise seeds, candidates]
    print(
        f"h = {clip:g}: regret of the best score, each once: "
        f"{selection_regret(rows, draws):.3f} (random: "
        f"{max(r['true'] for r in rows) - np.mean([r['true'] for r in rows]):.3f})"
    )
    print(
        f"h = {clip:g}: |lstd - true| max {np.abs(lstd_err).max():.3f}; |bias| mean "
        f"{np.abs(bias).mean():.3f}; noise sd mean {sd.mean():.3f}; RMSE "
        f"{np.sqrt(np.mean(bias**2 + sd**2)):.3f}; spread of true values "
        f"{max(r['true'] for r in rows) - min(r['true'] for r in rows):.3f}"
    )


def main() -> None:
    """Prints the diagnosis at the old clip and at the public rule's clip."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the data set audited")
    parser.add_argument("--public-seed", type=int, default=100)
    parser.add_argument("--quantile", type=float, default=0.5)
    parser.add_argument("--trials", type=int, default=8, help="noise seeds")
    parser.add_argument(
        "--quantiles",
        type=float,
        nargs="*",
        help="instead: the stand-in's diagnosis (and regret) at these quantiles' clips",
    )
    args = parser.parse_args()
    if args.quantiles:
        # Choosing the rule's quantile on the public stand-in only (its truth is the
        # public simulator's).
        for quantile in args.quantiles:
            q, clip = public_clip(args.public_seed, quantile)
            print(f"\nq{quantile:g} = {q:.4f} -> clip {clip:g} (stand-in data set)")
            show(clip, diagnose(args.public_seed, clip, args.trials))
        return
    q, clip = public_clip(args.public_seed, args.quantile)
    print(
        f"public rule (stand-in seed {args.public_seed}): q{args.quantile:g} of "
        f"||b_i|| pooled over the candidates = {q:.4f} -> clip {clip:g}"
    )
    for h in (0.5, clip):
        show(h, diagnose(args.seed, h, args.trials))


if __name__ == "__main__":
    main()
