"""GPOPE vs DP-LSW / DP-LSL on-policy on Mountain Car (issue 24, item 4).

The GPOPE paper (Section 7) compares gradient perturbation with Balle et al.'s output
perturbation "on two on-policy evaluation tasks" (the chain and Mountain Car), 100
trials, delta = 1e-5; the text we have says nothing more about the Mountain Car run
(features, discretisation, epsilons), so every other choice below is ours, with its
source:

- **Task**: ``configs/gpope/mountain_car.yaml`` (gymnax MountainCar-v0, energy pumping
  with 10% random actions, rewards -1 scaled by 0.02, gamma 0.98, m = 1000
  trajectories; features: 2 tilings of 3 x 3 tiles plus a constant, unit norm, n = 33),
  made on-policy: the data are collected with the *target* policy (importance ratios
  1). One change: T = 200, gym's own MountainCar-v0 time limit, instead of the
  off-policy config's 100. The baselines are first-visit Monte Carlo and need whole
  episodes; the episodes last 89-200 steps (median 123), so at T = 100 every return
  would be cut, at T = 200 0.1% are.
- **Discretisation** (DP-LSW / DP-LSL are defined on finite state spaces):
  ``ope.GridDiscretiser.of_tiles`` of the tile coder, a uniform 6 x 6 grid over gym's
  declared observation box (position [-1.2, 0.6], velocity [-0.07, 0.07]); public
  bounds only, nothing fitted on the trajectories. The tile features are constant on
  its cells, so the baselines' rows Phi[cell] = phi(cell centre) equal phi(s) for every
  s in the cell: all three methods estimate the same linear value class, and the
  baselines lose nothing to the discretisation (state aggregation, Sutton & Barto
  2018, Section 9.5.4's tiles seen as a partition).
- **Metric** (as ``gpope_offpolicy.py``): MSE of V-hat against the Monte Carlo V^pi at
  the 64 public evaluation states of the config (start states rolled forward under the
  target policy, a public seed that is not the data's).
- **Relation**: replace-one for every method. DP-LSW / DP-LSL are replace-one by
  NRS07's smooth sensitivity; GPOPE (Poisson sampling, accounted under add/remove-one)
  is calibrated by group privacy to ``ope.replace_one_target(eps, delta)``, which makes
  it (eps, delta)-DP under replace-one (an upper bound on its cost).
- **Hyper-parameters, none tuned on this task**: GPOPE's (h, b, N, beta_0, decay) are
  the off-policy config's (h = 0.05, b = 50, N = 1000, beta_j = 30 / (1 + j / 100));
  DP-LSL's lambda per epsilon is the one the chain's *stand-in* selection chose
  (``results/gpope_eps_standin.json``, per epsilon and calibration; a rule fixed on
  another task). The evaluated-task lambda sweep is reported next to it, not used.
- **Baselines' public inputs**: return bounds [-1, 0] (reward -0.02 per step, gamma
  0.98: -0.02 / (1 - 0.98) = -1, the papers' R_max / (1 - gamma) form); the state
  weighting rho either uniform over the 36 cells (the chain's choice; Balle et al.'s
  code uses the start distribution: position U(-0.6, -0.4) at velocity 0 lies in one
  cell here, which leaves LSW unidentified) or "public occupancy": half uniform, half
  the cell histogram of 4096 states drawn like the evaluation states with another
  public seed (the distribution the metric weights). LSW gets a ridge 1e-4
  (``LSW_RIDGE``): the tile features have rank 24 of 33 on the cells (7 tiles of the
  unshifted tiling lie outside the box; each tiling's indicators sum to the constant),
  so Phi^T Gamma Phi is singular. V = Phi theta does not depend on the null
  directions; against the float64 pseudo-inverse the ridge moves V by at most 0.009
  (100 random return vectors in [-1, 0]; smallest non-zero eigenvalue 0.0029), i.e.
  at most 1e-4 of MSE, and ||M||_2 = 17.9 against the pseudo-inverse's 18.5. Both
  NRS07's alpha and the exact alpha at the same beta (``calibration="exact"``).
- **Trials**: every trial draws its own data set (its own 1000 trajectories), and all
  methods see that same data set; GPOPE draws its own schedule and noise.

References (noise-free): LSTD of the data (the features' floor on this data), LSW / LSL
without noise, and GPOPE's iterations without noise with the config's clip h, with h
10x larger, and without a clip (h = 1e6): how often h binds and what it costs.

    # what benchmarks/README.md reports (43 min on 2 shared cores; the default six
    # epsilons of the chain table take about twice as long)
    PYTHONPATH=. python benchmarks/gpope_mountain_car_onpolicy.py --threads 1 \\
        --trials 100 --epsilons 0.1 1 10 --reference-trials 10
    # the other epsilons, added to the stored rows (which are kept, not rerun)
    PYTHONPATH=. python benchmarks/gpope_mountain_car_onpolicy.py --threads 1 \\
        --trials 100 --epsilons 0.5 2 5 --add
    PYTHONPATH=. python benchmarks/gpope_mountain_car_onpolicy.py --replot

Writes ``benchmarks/results/gpope_mountain_car_onpolicy.{json,md,png}``. A simulation
with fixed seeds: NOT a private release.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NAME = "gpope_mountain_car_onpolicy"


def _set_threads(argv: list[str]) -> None:
    # Must run before jax is imported.
    if "--threads" in argv:
        n = argv[argv.index("--threads") + 1]
        if n == "1":
            os.environ["XLA_FLAGS"] = (
                os.environ.get("XLA_FLAGS", "")
                + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            )


_set_threads(sys.argv)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _results import dump_json, uptime  # noqa: E402  (benchmarks/_results.py)
from gpope_experiments import LSL_GRID, compare, summary  # noqa: E402

from privrl_jax import ope, privacy  # noqa: E402
from privrl_jax.ope._balle import (  # noqa: E402
    BalleRelease,
    clip_first_visits,
    first_visits,
    lsl_solution,
    lsw_solution,
    monte_carlo_stats,
)
from privrl_jax.ope._features import GridDiscretiser  # noqa: E402
from privrl_jax.ope._gpope import IndexSchedule, replace_one_target  # noqa: E402
from privrl_jax.pipelines import gpope as pipe  # noqa: E402

CONFIG = "gpope/mountain_car"
T_MAX = 200  # gym's MountainCar-v0 time limit (see the module docstring)
DELTA = 1e-5
EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)
RETURN_BOUNDS = (-1.0, 0.0)
LSW_RIDGE = 1e-4
OCCUPANCY_STATES = 4096
CALIBRATIONS = (("nrs07", ""), ("exact", " (exact alpha)"))
RHOS = ("uniform", "occupancy")


def reference_clips(h: float) -> dict[str, float]:
    """GPOPE's noise-free references: the config's h, 10 h, and no clip (1e6)."""
    return {"clip h": h, "clip 10 h": 10.0 * h, "no clip (h = 1e6)": 1e6}


def load_config():
    e = pipe.load(CONFIG).env
    return pipe.load(
        CONFIG,
        [f"env.max_length={T_MAX}", f"env.behaviour_epsilon={e.target_epsilon}"],
    )


def standin_lambdas() -> dict[tuple[float, str], float]:
    """DP-LSL's lambda per (epsilon, calibration), as the chain's stand-in selection
    chose it (``gpope_experiments.py --part eps --select-on stand_in``)."""
    res = json.loads((RESULTS / "gpope_eps_standin.json").read_text())
    out = {}
    for row in res["rows"]:
        for cal, suffix in CALIBRATIONS:
            out[(float(row["epsilon"]), cal)] = float(row["DP-LSL" + suffix]["lambda"])
    return out


def _gpope_plan(cfg, h: float, sigma: float) -> privacy.DPPlan:
    g, m = cfg.gpope, cfg.env.num_trajectories
    sampler = privacy.PoissonSampler(
        dataset_size=m,
        sampling_rate=g.batch_size / m,
        microbatch_size=g.microbatch_size,
    )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=h, steps=g.steps, noise_multiplier=sigma
    )


def gpope_sigma(cfg, eps: float) -> float:
    """sigma for (eps, DELTA) under replace-one (group privacy, RDP accountant)."""
    plan = _gpope_plan(cfg, 1.0, None)
    return plan.calibrate(*replace_one_target(eps, DELTA), "rdp").noise_multiplier


SCHEDULE_WIDTH = 128  # two microbatches of 64: every chunk and epsilon, one shape


def pad_schedule(sch: IndexSchedule, width: int = SCHEDULE_WIDTH) -> IndexSchedule:
    """Pads the realised batch width U with masked units to a fixed width (a multiple of
    the microbatch), so every chunk and epsilon reuses one compiled executable; masked
    units add exact zeros, so the run is unchanged."""
    u = sch.indices.shape[-1]
    width = max(width, -(-u // 64) * 64)
    pad = [(0, 0)] * (sch.indices.ndim - 1) + [(0, width - u)]
    return IndexSchedule(np.pad(sch.indices, pad), np.pad(sch.mask, pad))


def run_gpope(plan, data, schedule, keys, ss) -> ope.GPOPEResult:
    """One trial per (data set, schedule, key): a vmap of ``ope.gpope``, whose jitted
    core takes sigma and h as traced arguments (one compile for every epsilon)."""
    return jax.vmap(lambda d, s, k: ope.gpope(plan, d, s, k, step_size=ss))(
        data, schedule, keys
    )


def public_setting(cfg):
    """Everything public: task, grid, features per cell, rho's, truth."""
    task = pipe.build_task(cfg)
    grid = GridDiscretiser.of_tiles(task.features.coders[0])
    cell_phi = jax.vmap(task.features)(grid.centres())  # [S, n]
    eval_phi, mc = pipe.true_values(task)
    occ_obs, _ = ope.evaluation_states(
        jax.random.fold_in(jax.random.key(cfg.seed), 3),
        task.env,
        task.env_params,
        num_states=OCCUPANCY_STATES,
        policy=task.target,
        max_steps=cfg.truth.eval_max_steps,
    )
    counts = jnp.bincount(jax.vmap(grid)(occ_obs), length=grid.num_cells)
    uniform = jnp.full(grid.num_cells, 1.0 / grid.num_cells)
    rhos = {
        "uniform": uniform,
        "occupancy": 0.5 * uniform + 0.5 * counts / counts.sum(),
    }
    return task, grid, cell_phi, eval_phi, mc, rhos


def collect_chunk(cfg, task, grid, seeds: np.ndarray):
    e = cfg.env

    def one(seed):
        c = ope.collect_offpolicy(
            jax.random.fold_in(jax.random.key(1000), seed),
            task.env,
            task.env_params,
            task.target,  # on-policy: data from the evaluated policy
            task.target,
            task.features,
            gamma=e.gamma,
            reward_scale=e.reward_scale,
            num_trajectories=e.num_trajectories,
            max_length=e.max_length,
        )
        cells = jax.vmap(jax.vmap(grid))(c.observations)
        visits = first_visits(cells, c.rewards, c.data.mask, e.gamma, grid.num_cells)
        lstd = pipe.lstd_min_norm(c.data, cfg.gpope.normalization)
        return c.data, visits, lstd, jnp.mean(c.data.mask[:, -1])

    return jax.jit(jax.vmap(one))(jnp.asarray(seeds))


@functools.cache
def _baseline_fn(kind: str, eps: float, cal: str, lam: float | None, m: int):
    def one(k, v, phi, rho):
        kw = dict(
            epsilon=eps,
            delta=DELTA,
            return_bounds=RETURN_BOUNDS,
            num_trajectories=m,
            calibration=cal,
        )
        if kind == "lsw":
            return ope.dp_lsw(k, v, phi, rho, ridge=LSW_RIDGE, **kw)
        return ope.dp_lsl(k, v, phi, rho, ridge=lam, **kw)

    return jax.jit(jax.vmap(one, (0, 0, None, None)))


def baseline(kind, keys, visits, phi, rho, eps, cal, lam=None) -> BalleRelease:
    """DP-LSW / DP-LSL on every trial's first visits (one compile per setting)."""
    fn = _baseline_fn(kind, float(eps), cal, lam, int(visits.visited.shape[1]))
    return fn(keys, visits, phi, rho)


def mse(theta, phi, values) -> np.ndarray:
    return np.asarray(ope.value_mse(theta, phi, values), np.float64)


def _save_partial(path: Path, per, clipped, cut_share, done: int) -> None:
    # After every chunk: a run cut short still leaves its finished trials.
    arrays = {f"per::{k}": np.asarray(v) for k, v in per.items()}
    arrays |= {f"clipped::{k}": np.asarray(v) for k, v in clipped.items()}
    np.savez(path, cut_share=np.asarray(cut_share), done=done, **arrays)


def _load_partial(path: Path):
    z = np.load(path)
    per = {k[5:]: z[k] for k in z.files if k.startswith("per::")}
    clipped = {k[9:]: z[k].tolist() for k in z.files if k.startswith("clipped::")}
    return per, clipped, z["cut_share"].tolist(), int(z["done"])


def run(
    trials: int,
    chunk: int,
    epsilons,
    ref_trials: int,
    partial: Path | None = None,
    from_partial: bool = False,
) -> dict:
    """The comparison over ``trials`` trials in vmapped chunks (see the module
    docstring). With ``from_partial`` nothing runs: the trials finished so far (saved
    in ``partial`` after every chunk) are assembled."""
    t_start = time.time()
    cfg = load_config()
    g = cfg.gpope
    task, grid, cell_phi, eval_phi, mc, rhos = public_setting(cfg)
    values = mc.values
    ss = ope.StepSize(g.step_size, g.decay_steps, g.decay_power)
    lambdas = standin_lambdas()
    sigmas = {eps: gpope_sigma(cfg, eps) for eps in epsilons}
    per: dict[str, list] = {}  # "method|eps" -> per-trial MSE

    def add(key, x):
        per.setdefault(key, []).extend(np.atleast_1d(x).tolist())

    clipped: dict[str, list] = {}
    cut_share = []
    if from_partial:
        per_np, clipped, cut_share, trials = _load_partial(partial)
        per = {k_: list(v) for k_, v in per_np.items()}
        ref_trials = min(ref_trials, trials)
    for start in range(0, trials if not from_partial else 0, chunk):
        t0 = time.time()
        seeds = np.arange(start, min(start + chunk, trials))
        k = len(seeds)
        data, visits, lstd, cut = collect_chunk(cfg, task, grid, seeds)
        cut_share.extend(np.asarray(cut).tolist())
        add("LSTD (data)", mse(lstd, eval_phi, values))
        for rho_name, rho in rhos.items():
            stats = jax.vmap(
                lambda v: monte_carlo_stats(clip_first_visits(v, RETURN_BOUNDS))
            )(visits)
            add(
                f"LSW, no noise [{rho_name}]",
                mse(
                    jax.vmap(lambda s, r=rho: lsw_solution(s, cell_phi, r, LSW_RIDGE))(
                        stats
                    ),
                    eval_phi,
                    values,
                ),
            )
            for lam in LSL_GRID:
                add(
                    f"LSL, no noise [{rho_name}]|lam={lam:g}",
                    mse(
                        jax.vmap(
                            lambda s, r=rho, la=lam: lsl_solution(s, cell_phi, r, la)
                        )(stats),
                        eval_phi,
                        values,
                    ),
                )
        for eps in epsilons:
            ekey = int(eps * 1000)
            # GPOPE, replace-one.
            plan = _gpope_plan(cfg, g.l2_clip_norm, sigmas[eps])
            sch = pad_schedule(
                ope.sample_schedule(plan, 10_000 * ekey + start, trials=k)
            )
            nkeys = jax.random.split(jax.random.key(10_000 * ekey + start + 1), k)
            res = run_gpope(plan, data, sch, nkeys, ss)
            add(f"GPOPE Poisson (replace-one)|{eps}", mse(res.theta, eval_phi, values))
            clipped.setdefault(f"GPOPE|{eps}", []).extend(
                np.asarray(res.clipped_fraction).tolist()
            )
            for rho_name, rho in rhos.items():
                for ci, (cal, suffix) in enumerate(CALIBRATIONS):
                    bkeys = jax.random.split(
                        jax.random.key(10_000 * ekey + start + 2 + ci), k
                    )
                    r = baseline("lsw", bkeys, visits, cell_phi, rho, eps, cal)
                    add(
                        f"DP-LSW{suffix} [{rho_name}]|{eps}",
                        mse(r.theta, eval_phi, values),
                    )
                    for lam in LSL_GRID:
                        r = baseline("lsl", bkeys, visits, cell_phi, rho, eps, cal, lam)
                        add(
                            f"DP-LSL{suffix} [{rho_name}]|{eps}|lam={lam:g}",
                            mse(r.theta, eval_phi, values),
                        )
        # Noise-free GPOPE references on the first ref_trials trials.
        n_ref = max(0, min(k, ref_trials - start))
        if n_ref:
            sub = jax.tree_util.tree_map(lambda x: x[:n_ref], data)
            for name, h in reference_clips(g.l2_clip_norm).items():
                plan = _gpope_plan(cfg, h, 0.0)
                sch = pad_schedule(ope.sample_schedule(plan, 777 + start, trials=n_ref))
                res = run_gpope(
                    plan, sub, sch, jax.random.split(jax.random.key(778), n_ref), ss
                )
                add(f"GPOPE no noise, {name}", mse(res.theta, eval_phi, values))
                clipped.setdefault(f"no noise, {name}", []).extend(
                    np.asarray(res.clipped_fraction).tolist()
                )
        if partial is not None:
            _save_partial(partial, per, clipped, cut_share, start + k)
        print(
            f"trials {start}-{start + k - 1}: {time.time() - t0:.0f} s "
            f"[{time.time() - t_start:.0f} s total]",
            flush=True,
        )
    per = {k_: np.asarray(v) for k_, v in per.items()}
    return assemble(
        cfg,
        grid,
        cell_phi,
        mc,
        rhos,
        per,
        clipped,
        cut_share,
        sigmas,
        lambdas,
        epsilons,
        trials,
        ref_trials,
        time.time() - t_start,
    )


def assemble(
    cfg,
    grid,
    cell_phi,
    mc,
    rhos,
    per,
    clipped,
    cut_share,
    sigmas,
    lambdas,
    epsilons,
    trials,
    ref_trials,
    seconds,
) -> dict:
    g = cfg.gpope
    gram = cell_phi.T @ (cell_phi * rhos["uniform"][:, None])
    eig = np.sort(np.asarray(jnp.linalg.eigvalsh(gram)))
    refs = {
        "zero (V = 0)": float(jnp.mean(mc.values**2)),
        "LSTD (data)": summary(per["LSTD (data)"]),
    }
    for rho_name in RHOS:
        refs[f"LSW, no noise [{rho_name}]"] = summary(
            per[f"LSW, no noise [{rho_name}]"]
        )
    for name in reference_clips(g.l2_clip_norm):
        key = f"GPOPE no noise, {name}"
        if key in per:
            refs[key] = summary(per[key]) | {
                "clipped_fraction": summary(clipped[f"no noise, {name}"])
            }
    lsl_nonoise = {
        rho_name: {
            f"{lam:g}": summary(per[f"LSL, no noise [{rho_name}]|lam={lam:g}"])["mean"]
            for lam in LSL_GRID
        }
        for rho_name in RHOS
    }
    rows = []
    for eps in epsilons:
        row: dict = {"epsilon": eps}
        trial_mse: dict[str, np.ndarray] = {}
        name = "GPOPE Poisson (replace-one)"
        trial_mse[name] = per[f"{name}|{eps}"]
        row[name] = summary(trial_mse[name]) | {
            "noise_multiplier": sigmas[eps],
            "noise_std": sigmas[eps] * g.l2_clip_norm,
            "accounted_as": dict(
                zip(("epsilon", "delta"), replace_one_target(eps, DELTA)),
                relation="add/remove-one",
            ),
            "clipped_fraction": summary(clipped[f"GPOPE|{eps}"]),
        }
        for rho_name in RHOS:
            for cal, suffix in CALIBRATIONS:
                name = f"DP-LSW{suffix} [{rho_name}]"
                trial_mse[name] = per[f"{name}|{eps}"]
                row[name] = summary(trial_mse[name])
                name = f"DP-LSL{suffix} [{rho_name}]"
                lam = lambdas[(float(eps), cal)]
                trial_mse[name] = per[f"{name}|{eps}|lam={lam:g}"]
                sweep = {
                    f"{la:g}": summary(per[f"{name}|{eps}|lam={la:g}"])["mean"]
                    for la in LSL_GRID
                }
                best_lam = min(sweep, key=sweep.get)
                row[name] = summary(trial_mse[name]) | {
                    "lambda": lam,
                    "lambda_rule": "chain stand-in selection (gpope_eps_standin.json)",
                    "evaluated_task_sweep": sweep,
                    "evaluated_task_best_lambda": float(best_lam),
                }
        baselines = [n for n in trial_mse if n.startswith("DP-")]
        best = min(baselines, key=lambda b: row[b]["mean"])
        gp = "GPOPE Poisson (replace-one)"
        c = compare(trial_mse[gp], trial_mse[best])
        from scipy import stats

        c["paired_t_p"] = float(stats.ttest_rel(trial_mse[gp], trial_mse[best]).pvalue)
        c["welch_p"] = float(
            stats.ttest_ind(trial_mse[gp], trial_mse[best], equal_var=False).pvalue
        )
        c["intervals_overlap"] = bool(
            row[gp]["ci95"][1] >= row[best]["ci95"][0]
            and row[best]["ci95"][1] >= row[gp]["ci95"][0]
        )
        row["matched"] = {"best_baseline": best, gp: c}
        rows.append(row)
    return {
        "setting": {
            "config": CONFIG,
            "on_policy": True,
            "max_length": cfg.env.max_length,
            "trajectories": cfg.env.num_trajectories,
            "gamma": cfg.env.gamma,
            "reward_scale": cfg.env.reward_scale,
            "policy_epsilon": cfg.env.target_epsilon,
            "features": f"tile coding {cfg.env.num_tilings} tilings x "
            f"{cfg.env.tiles_per_dim} tiles + constant, unit norm",
            "num_features": int(cell_phi.shape[1]),
            "grid": {"low": grid.low, "high": grid.high, "bins": grid.bins},
            "num_cells": grid.num_cells,
            "gram_eigenvalues_uniform_rho": eig.tolist(),
            "lsw_ridge": LSW_RIDGE,
            "return_bounds": RETURN_BOUNDS,
            "rhos": {k: np.asarray(v).tolist() for k, v in rhos.items()},
            "delta": DELTA,
            "relation": "replace-one (all methods)",
            "trials": trials,
            "reference_trials": ref_trials,
            "gpope": {
                "sampler": "poisson",
                "batch_size": g.batch_size,
                "steps": g.steps,
                "l2_clip_norm": g.l2_clip_norm,
                "step_size": g.step_size,
                "decay_steps": g.decay_steps,
                "rule": "the off-policy config's values (gpope/mountain_car.yaml)",
            },
            "lsl_grid": LSL_GRID,
            "eval_states": int(mc.values.shape[0]),
            "mc_mean_squared_stderr": float(jnp.mean(mc.stderr**2)),
            "true_values_mean": float(jnp.mean(mc.values)),
            "true_values_var": float(jnp.var(mc.values)),
            "episodes_cut_at_T": summary(np.asarray(cut_share)),
            "note": "simulation with fixed seeds: NOT a private release",
        },
        "references": refs,
        "lsl_no_noise_by_lambda": lsl_nonoise,
        "rows": rows,
        "seconds": seconds,
    }


# Setting keys a run's own sample may change; every other key must match to pool rows.
_PER_RUN_SETTING = ("episodes_cut_at_T",)


def _same(x, y) -> bool:
    # Floats (eigenvalues, rho) to 1e-6: the same setting recomputed elsewhere.
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(u, v) for u, v in zip(x, y))
    if isinstance(x, float | int) and isinstance(y, float | int):
        return bool(np.isclose(x, y, rtol=1e-6, atol=1e-12))
    return x == y


def merge_rows(stored: dict, new: dict) -> dict:
    """Adds ``new``'s epsilon rows to ``stored`` (``--add``), as if run at once.

    Each epsilon's GPOPE and baseline draws are seeded by epsilon and trial and every
    trial's data set by its index alone, so a row does not depend on which other
    epsilons ran beside it. Refuses another protocol (a setting that differs), an
    epsilon already stored (stored rows are never replaced) and data references that
    disagree on the same trials (another data set). The stored references are kept.
    """
    new = json.loads(json.dumps(new))  # tuples -> lists, as stored
    a = {k: v for k, v in stored["setting"].items() if k not in _PER_RUN_SETTING}
    b = {k: v for k, v in new["setting"].items() if k not in _PER_RUN_SETTING}
    b["reference_trials"] = a.get("reference_trials")  # --add runs no references
    diff = sorted(k for k in a.keys() | b.keys() if not _same(a.get(k), b.get(k)))
    if diff:
        raise ValueError(f"another protocol: setting keys {diff} differ")
    have = {float(r["epsilon"]) for r in stored["rows"]}
    dup = sorted(have & {float(r["epsilon"]) for r in new["rows"]})
    if dup:
        raise ValueError(f"epsilons {dup} are stored already; not replaced")
    for k in ("LSTD (data)", *(f"LSW, no noise [{rho}]" for rho in RHOS)):
        x, y = stored["references"][k]["mean"], new["references"][k]["mean"]
        if not np.isclose(x, y, rtol=1e-5, atol=1e-9):
            raise ValueError(f"reference {k!r} differs ({x} vs {y}): other data")
    runs = stored.get(
        "runs",
        [
            {
                "epsilons": [r["epsilon"] for r in stored["rows"]],
                "seconds": stored.get("seconds"),
                "uptime": stored.get("uptime"),
            }
        ],
    )
    out = dict(stored)
    out["rows"] = sorted(stored["rows"] + new["rows"], key=lambda r: r["epsilon"])
    out["runs"] = runs + [
        {
            "epsilons": [r["epsilon"] for r in new["rows"]],
            "seconds": new.get("seconds"),
            "uptime": new.get("uptime"),
        }
    ]
    out["seconds"] = sum(float(r["seconds"] or 0.0) for r in out["runs"])
    return out


def _cell(v: dict) -> str:
    lo, hi = v["ci95"]
    return f"{v['mean']:.3g} ± {v['std']:.2g} [{lo:.3g}, {hi:.3g}]"


def render_md(res: dict) -> str:
    s = res["setting"]
    g = s["gpope"]
    rows = res["rows"]
    names = [
        "GPOPE Poisson (replace-one)",
        *[
            f"{b}{suf} [{rho}]"
            for rho in RHOS
            for b in ("DP-LSW", "DP-LSL")
            for _, suf in CALIBRATIONS
        ],
    ]
    lines = [
        "# GPOPE vs DP-LSW / DP-LSL, on-policy Mountain Car (issue 24)",
        "",
        f"{s['trials']} trials, each its own data set of {s['trajectories']} on-policy "
        f"trajectories (T = {s['max_length']}), the same data set for every method. "
        "**Relation: replace-one for every method** (GPOPE Poisson calibrated to "
        "ope.replace_one_target(ε, δ) by group privacy; the baselines by NRS07's "
        f"smooth sensitivity), δ = {s['delta']:g}. Features: {s['features']} (n = "
        f"{s['num_features']}); the baselines' states: the {s['grid']['bins'][0]} x "
        f"{s['grid']['bins'][1]} grid over gym's observation box on which these "
        "features are constant. MSE of V-hat against Monte Carlo V^π at "
        f"{s['eval_states']} public evaluation states: mean ± sample std (ddof = 1) "
        "[95% t interval]. Tuning rule (nothing tuned on this task): GPOPE h = "
        f"{g['l2_clip_norm']:g}, b = {g['batch_size']:g}, N = {g['steps']}, β_j = "
        f"{g['step_size']:g}/(1 + j/{g['decay_steps']:g}) from the off-policy config; "
        "DP-LSL's λ per ε from the chain stand-in selection. Return bounds "
        f"{list(s['return_bounds'])}; ρ uniform over the cells, or 'occupancy' (half "
        "uniform, half the cell histogram of public simulated states). NOT a private "
        "release (fixed seeds).",
        "",
        "| ε | " + " | ".join(names) + " | best baseline vs GPOPE |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for row in rows:
        best = row["matched"]["best_baseline"]
        c = row["matched"]["GPOPE Poisson (replace-one)"]
        cells = []
        for n in names:
            txt = _cell(row[n])
            if n.startswith("DP-LSL"):
                txt += f" (λ {row[n]['lambda']:g})"
            if n == best:
                txt = f"**{txt}**"
            cells.append(txt)
        verdict = "GPOPE better" if c["ratio_of_means"] > 1 else "GPOPE worse"
        lines.append(
            f"| {row['epsilon']:g} | "
            + " | ".join(cells)
            + f" | {best}: {c['ratio_of_means']:.3g}× (best/GPOPE), Wilcoxon p = "
            f"{c['wilcoxon_p']:.1g}, Welch p = {c['welch_p']:.1g}, intervals "
            f"{'overlap' if c['intervals_overlap'] else 'disjoint'} ({verdict}) |"
        )
    refs = res["references"]
    lines += [
        "",
        "## References (no noise) and the clip",
        "",
        f"V = 0: {refs['zero (V = 0)']:.4g}; MC mean squared stderr "
        f"{s['mc_mean_squared_stderr']:.1e}; episodes cut at T: "
        f"{s['episodes_cut_at_T']['mean']:.2%}.",
        "",
        "| reference | MSE | clip binds on (share of sampled trajectories) |",
        "|---|---|---|",
    ]
    for k, v in refs.items():
        if isinstance(v, dict):
            cf = v.get("clipped_fraction")
            lines.append(
                f"| {k} | {_cell(v)} (n = {v['n']}) | "
                + (f"{cf['mean']:.1%} ± {cf['std']:.1%}" if cf else "-")
                + " |"
            )
    lines += [
        "",
        "GPOPE's clip on the private runs (share of sampled trajectories whose "
        "direction exceeded h, mean over iterations, mean ± std over trials): "
        + "; ".join(
            f"ε = {r['epsilon']:g}: "
            f"{r['GPOPE Poisson (replace-one)']['clipped_fraction']['mean']:.1%}"
            for r in rows
        )
        + ".",
        "",
        "## DP-LSL: the evaluated-task λ sweep (mean MSE; shown, not used)",
        "",
        "| ε | baseline | λ used | "
        + " | ".join(f"λ = {la:g}" for la in s["lsl_grid"])
        + " |",
        "|---|---|---|" + "---|" * len(s["lsl_grid"]),
    ]
    for row in rows:
        for n in names:
            if n.startswith("DP-LSL"):
                sw = row[n]["evaluated_task_sweep"]
                lines.append(
                    f"| {row['epsilon']:g} | {n} | {row[n]['lambda']:g} | "
                    + " | ".join(f"{sw[f'{la:g}']:.3g}" for la in s["lsl_grid"])
                    + " |"
                )
    for rho_name, sw in res["lsl_no_noise_by_lambda"].items():
        lines.append(
            f"| no noise | LSL [{rho_name}] | - | "
            + " | ".join(f"{sw[f'{la:g}']:.3g}" for la in s["lsl_grid"])
            + " |"
        )
    runs = res.get("runs") or [{"epsilons": [r["epsilon"] for r in rows], **res}]
    lines.append("")
    for r in runs:
        eps_txt = ", ".join(f"{e:g}" for e in r["epsilons"])
        lines.append(
            f"Run time (ε = {eps_txt}) {r['seconds']:.0f} s; load: "
            f"{r.get('uptime') or '?'}."
        )
    lines.append("")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    eps = [r["epsilon"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = ["GPOPE Poisson (replace-one)"] + [
        f"{b}{suf} [{rho}]"
        for rho in RHOS
        for b in ("DP-LSW", "DP-LSL")
        for _, suf in CALIBRATIONS
    ]
    for n in names:
        mean = np.array([r[n]["mean"] for r in rows])
        lo = np.array([r[n]["ci95"][0] for r in rows])
        hi = np.array([r[n]["ci95"][1] for r in rows])
        style = "o-" if n.startswith("GPOPE") else ("s--" if "uniform" in n else "^:")
        ax.errorbar(
            eps,
            mean,
            yerr=[mean - np.maximum(lo, mean * 1e-3), hi - mean],
            fmt=style,
            capsize=3,
            label=n,
            lw=2 if n.startswith("GPOPE") else 1,
        )
    refs = res["references"]
    ax.axhline(refs["zero (V = 0)"], color="grey", lw=0.8, label="V = 0")
    ax.axhline(
        refs["LSTD (data)"]["mean"],
        color="green",
        lw=0.8,
        ls=":",
        label="LSTD (no noise)",
    )
    if "GPOPE no noise, clip h" in refs:
        ax.axhline(
            refs["GPOPE no noise, clip h"]["mean"],
            color="k",
            lw=0.8,
            ls="--",
            label="GPOPE no noise (clip h)",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ε (replace-one), δ = 1e-5")
    ax.set_ylabel("MSE of V-hat at evaluation states")
    ax.set_title(f"Mountain Car on-policy, {res['setting']['trials']} trials")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--chunk", type=int, default=10, help="trials per vmapped chunk")
    ap.add_argument("--reference-trials", type=int, default=20)
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--threads", default=None, help="1: single-threaded XLA")
    ap.add_argument("--name", default=NAME)
    ap.add_argument("--replot", action="store_true")
    ap.add_argument(
        "--add",
        action="store_true",
        help="run only the epsilons not in NAME.json and add their rows to it (the "
        "stored rows and references are kept; no GPOPE references are rerun)",
    )
    ap.add_argument(
        "--from-partial",
        action="store_true",
        help="assemble the trials a cut-short run finished (NAME.partial.npz)",
    )
    args = ap.parse_args()
    if args.trials < 2:
        ap.error("--trials must be >= 2 (a sample std needs two trials).")
    path = RESULTS / f"{args.name}.json"
    if args.replot:
        res = json.loads(path.read_text())
    else:
        stored = json.loads(path.read_text()) if args.add else None
        epsilons = args.epsilons
        if stored is not None:
            have = {float(r["epsilon"]) for r in stored["rows"]}
            epsilons = [e for e in epsilons if float(e) not in have]
            print(f"--add: stored epsilons {sorted(have)} kept; running {epsilons}")
            if not epsilons:
                return
        load_before = uptime()
        res = run(
            args.trials,
            args.chunk,
            epsilons,
            0 if stored is not None else args.reference_trials,
            partial=RESULTS / f"{args.name}.partial.npz",
            from_partial=args.from_partial,
        )
        res["uptime"] = f"before: {load_before}; after: {uptime()}"
        if stored is not None:
            res = merge_rows(stored, res)
        if not args.from_partial:
            (RESULTS / f"{args.name}.partial.npz").unlink(missing_ok=True)
        RESULTS.mkdir(parents=True, exist_ok=True)
        dump_json(path, res, indent=2)
    md = render_md(res)
    (RESULTS / f"{args.name}.md").write_text(md)
    plot(res, RESULTS / f"{args.name}.png")
    print(md)


if __name__ == "__main__":
    main()
