"""Why paper-zone POOL at w + d = 6 / 8 is worse than the behaviour policy (issue 24).

Experiment 2 at the shipped bonus_scale 0.003 (``results/pool_exp2_wd.md``) gives gap
0.457 / 0.441 at w + d = 6 / 8 against the behaviour policy's 0.406 / 0.395; at 0.01
it was 0.304 / 0.328. This script measures, per w + d (``pool.zones=paper``, M = 10,
rho = 10, 2000 episodes, the same data keys r and noise keys 1000 + r as experiment 2):

* data per cell: pairs with feedback per stage (Definition 2 needs all 2w coordinates
  below lambda = 0.9), cells K, cells with no pair, cells with n~ <= E_rho (Gamma = C H,
  Q = 0), the median exact count of the covered ones, the share of pairs in them;
* the bonus against Q: on covered cells v_max * mean (Q before the bonus), the
  privacy term and the variance term of Gamma, the share of covered cells the bonus
  zeroes, sigma and E_rho against the counts;
* a factorial of the pipeline's own pieces, every variant planned by one backward
  pass (``planning.pessimistic_q`` on the released or exact statistics): noise yes /
  no x pessimism E_rho of rho = 10 yes / no (E_rho = 0) x bonus_scale 0 / 0.003 /
  0.01. "noise, E_rho" is POOL (checked against ``planning.pool_plan``: same noise
  keys, the Q tables agree to float32 rounding); "no noise, no E_rho" is NonPrivate;
* the zones with the exact Q at every basis point (``pool_zones_exact.exact_q``),
  alone and with the cells zeroed where POOL zeroes them (does the zeroing, i.e.
  staying on the data's support, rescue perfect values?);
* the greedy policy of each: gap, mean order and post-order level per product
  against the SAA base-stock level, the share of decisions that order nothing, the
  share where every candidate's Q_bar is 0 (the tie goes to the first candidate,
  the zero order), the share of chosen pairs in a cell with n~ <= E_rho, and the
  share beyond the feedback boundary.

Measurement only: noise from public keys, NOT PRIVATE. Mean, sample std (ddof = 1)
and the 95% t half-width over runs; Welch's t-test where two variants are compared.

    PYTHONPATH=. python benchmarks/pool_wd_diagnosis.py [--runs 10]
        [--products 1 2 3 4 8]

``--select ZONES:W ...`` instead chooses bonus_scale at w products and that zone type
by the rule of ``pool_experiments.py --only select_shift`` on the same public stand-in
of another distribution (``results/pool_select_shift_wd.{json,md}``; ``--select-md``
rewrites the Markdown from the JSON):

    PYTHONPATH=. python benchmarks/pool_wd_diagnosis.py --select paper:3 additive:3
        additive:2 paper:4 --stand-runs 3 --runs 10
"""

from __future__ import annotations

import argparse
import json
import math
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pool_experiments  # noqa: E402
from _results import dump_json, summary  # noqa: E402  (benchmarks/_results.py)
from pool_experiments import SHIFT_SCALES, SHIFTED_STAND_IN, Bench, _load  # noqa: E402
from pool_zones_exact import exact_q, q_at  # noqa: E402
from scipy import stats

from privrl_jax import planning
from privrl_jax.envs import collect_inventory_data, inventory_stage, sample_demand
from privrl_jax.planning._benchmark import zero_start
from privrl_jax.planning._pool import (
    bonus_iota,
    data_cells,
    geometry_cell,
    geometry_value,
    noise_bound,
    pessimistic_q,
    state_values,
)
from privrl_jax.privacy._aggregation import add_noise

RESULTS = Path(__file__).parent / "results"
RHO = 10.0
# (name, noisy statistics, E_rho of rho = 10 in the pessimism, bonus_scale)
VARIANTS = (
    ("POOL s=0.003 (shipped)", True, True, 0.003),
    ("POOL s=0.01", True, True, 0.01),
    ("POOL s=0 (only n~ <= E_rho zeroed)", True, True, 0.0),
    ("noise, no E_rho, s=0.003", True, False, 0.003),
    ("no noise, E_rho, s=0.003", False, True, 0.003),
    ("no noise, E_rho, s=0.01", False, True, 0.01),
    ("no noise, E_rho, s=0 (n <= E_rho zeroed)", False, True, 0.0),
    ("NonPrivate s=0.003 (no noise, no E_rho)", False, False, 0.003),
)


def _seg(cells_h: jax.Array, values: jax.Array, k: int) -> jax.Array:
    ids = jnp.where(cells_h >= 0, cells_h, k)
    return jax.ops.segment_sum(values, ids, num_segments=k + 1)[:k]


def backward_pass(
    data, geom, actions, noise_std: float, e_rho: float, pc: planning.PoolConfig, key
):
    """Q tables [H, K] and per-stage (n~, S~, S2~) of Algorithm 1 with weight-1 cells.

    The same releases as ``planning.pool_plan`` (counts with fold_in(key, 0), stage
    h's sums with fold_in(key, 1 + h)), but the noise std and the E_rho of the
    pessimism are set apart, so noise and pessimism can be switched separately
    (``noise_std = 0``: no noise drawn).
    """
    return _backward_pass(
        data, geom, actions, noise_std, e_rho, key, pc=pc, noisy=noise_std > 0
    )


@partial(jax.jit, static_argnames=("pc", "noisy"))
def _backward_pass(data, geom, actions, noise_std, e_rho, key, *, pc, noisy):
    horizon, k = geom.horizon, geom.num_cells
    iota = bonus_iota(horizon, k, pc.failure_prob)
    cells = data_cells(geom, data)
    ones = jnp.ones(cells.shape[0])
    counts = jnp.stack([_seg(cells[:, h], ones, k) for h in range(horizon)])
    if noisy:
        counts = add_noise(counts, jax.random.fold_in(key, 0), noise_std)
    q_next = jnp.zeros((k,), jnp.float32)
    qs, sums_all = [None] * horizon, [None] * horizon
    for h in reversed(range(horizon)):
        if h + 1 < horizon:
            v = state_values(geom, h + 1, q_next, data.next_observations[:, h], actions)
        else:
            v = jnp.zeros(cells.shape[0])
        y = jnp.clip((data.rewards[:, h] + v) / (horizon - h), 0.0, 1.0)
        y = jnp.where(jnp.isnan(y), 0.0, y)
        sums = jnp.stack([_seg(cells[:, h], y, k), _seg(cells[:, h], y * y, k)])
        if noisy:
            sums = add_noise(sums, jax.random.fold_in(key, 1 + h), noise_std)
        v_max = jnp.float32(horizon - h)
        q_next = pessimistic_q(
            counts[h], sums[0], sums[1], v_max, e_rho, iota, horizon, pc
        )
        qs[h], sums_all[h] = q_next, sums
    return jnp.stack(qs), counts, jnp.stack(sums_all)


def cell_diagnostics(exact_counts, counts, sums, e_rho, pc, horizon, iota) -> dict:
    """Per-cell coverage and the size of Gamma's two terms against Q (all stages)."""
    n_ex = np.asarray(exact_counts, np.float64)  # [H, K]
    n = np.asarray(counts, np.float64)
    s1, s2 = (np.asarray(x, np.float64) for x in (sums[:, 0], sums[:, 1]))
    vmax = (horizon - np.arange(horizon))[:, None].astype(np.float64)
    covered = n > e_rho
    nn = np.where(covered, n, 1.0)
    mean = np.clip(s1 / nn, 0, 1)
    var_y = np.clip(s2 / nn, 0, 1) - mean**2
    var = vmax**2 * np.where(var_y > 1e-6, var_y, 0.0)
    g_var = pc.c1 * np.sqrt(var * iota / np.where(covered, n - e_rho, 1.0))
    g_priv = pc.c2 * vmax * e_rho * iota / nn
    q0 = vmax * mean
    cov = covered
    pairs = n_ex.sum(1)  # pairs with feedback per stage
    return {
        "pairs_with_feedback_per_stage": float(pairs.mean()),
        "cells_empty": float((n_ex == 0).sum(1).mean()),
        "cells_uncovered": float((~covered).sum(1).mean()),
        "cells_covered": float(covered.sum(1).mean()),
        "median_count_covered": float(np.median(n_ex[cov])) if cov.any() else 0.0,
        "share_pairs_in_covered": float((n_ex * cov).sum() / max(n_ex.sum(), 1.0)),
        # Gamma's terms on covered cells, relative to Q before the bonus (v_max mean),
        # at bonus_scale 1: multiply by s for the planner's Gamma.
        "median_q_before_bonus_over_vmax": float(np.median((q0 / vmax)[cov])),
        "median_privacy_term_over_vmax_s1": float(np.median((g_priv / vmax)[cov])),
        "median_variance_term_over_vmax_s1": float(np.median((g_var / vmax)[cov])),
        "share_covered_zeroed_s0.003": float(
            np.mean((q0 <= 0.003 * (g_var + g_priv))[cov])
        ),
        "share_covered_zeroed_s0.01": float(
            np.mean((q0 <= 0.01 * (g_var + g_priv))[cov])
        ),
        "median_abs_noise_over_count_covered": float(
            np.median(np.abs(n - n_ex)[cov] / np.maximum(n_ex[cov], 1.0))
        ),
    }


@partial(jax.jit, static_argnames="num_episodes")
def greedy_rollouts(key, params, geom, q_tables, actions, counts, e_rho, num_episodes):
    """The greedy policy's episodes from zero inventory, with per-decision facts.

    The key scheme of ``envs.rollout_costs`` (so the mean cost equals
    ``planning.greedy_policy_cost``'s). Per decision: order [w], post-order level
    [w], cost, whether every candidate's clipped Q_bar is 0, whether the chosen
    pair's cell has n~ <= E_rho, whether the pair is beyond the boundary.
    """
    horizon, w = params.max_steps_in_episode, params.num_products

    def episode(k):
        _, k_steps = jax.random.split(k)
        level = jnp.zeros(w)

        def body(level, inp):
            h, kk = inp
            _, k_dem = jax.random.split(kk)
            qv = jax.vmap(
                lambda a: geometry_value(
                    geom, h, q_tables[h], jnp.concatenate([level, a])
                )
            )(actions)
            qv = jnp.clip(qv, 0.0, horizon - h)
            a = actions[jnp.argmax(qv)]
            b = jnp.concatenate([level, a])
            cell = geometry_cell(geom, h, b)
            out = inventory_stage(level, a, sample_demand(k_dem, params, h), params)
            facts = (
                a,
                jnp.minimum(level + a, 1.0),
                out.cost,
                jnp.max(qv) <= 0.0,
                counts[h, cell] <= e_rho,
                ~jnp.all(b < params.boundary[h]),
            )
            return out.next_level, facts

        hs = jnp.arange(horizon)
        _, facts = jax.lax.scan(body, level, (hs, jax.random.split(k_steps, horizon)))
        return facts

    return jax.vmap(episode)(jax.random.split(key, num_episodes))


def policy_facts(b: Bench, geom, actions, q, counts, e_rho) -> dict:
    a, y, cost, all_zero, uncovered, beyond = greedy_rollouts(
        b.ek, b.params, geom, q, actions, counts, e_rho, b.n_eval
    )
    return {
        "gap": planning.relative_gap(float(cost.sum(-1).mean()), b.c_star),
        "mean_order": float(a.mean()),
        "mean_post_order_level": float(y.mean()),
        "share_zero_order": float(jnp.mean(jnp.all(a == 0.0, -1))),
        "share_all_candidates_zero": float(all_zero.mean()),
        "share_chosen_cell_uncovered": float(uncovered.mean()),
        "share_chosen_beyond_boundary": float(beyond.mean()),
    }


def run_products(w: int, runs: int, eval_episodes: int) -> dict:
    t0 = time.perf_counter()
    cfg = _load(
        [
            f"env.num_products={w}",
            "pool.method=pool",
            f"privacy.rho={RHO}",
            "pool.num_zones=10",
        ]
    )
    b = Bench.from_config(cfg, eval_episodes)
    geom, actions, params, horizon = b.geom, b.actions, b.params, cfg.env.horizon
    mech = planning.pool_mechanism(RHO, horizon)
    k = geom.num_cells
    e_rho = noise_bound(mech, horizon, k, cfg.pool.failure_prob)
    iota = bonus_iota(horizon, k, cfg.pool.failure_prob)
    # The behaviour policy's facts from zero inventory (what "ordering like the data"
    # looks like).
    beh = collect_inventory_data(b.ek, zero_start(params), b.behaviour, eval_episodes)
    out = {
        "w+d": 2 * w,
        "cells": int(k),
        "noise_std": mech.noise_std,
        "e_rho": e_rho,
        "iota": iota,
        "behaviour_gap": b.behaviour_gap,
        "behaviour_mean_order": float(beh.actions.mean()),
        "behaviour_mean_post_order_level": float(
            jnp.minimum(beh.observations + beh.actions, 1.0).mean()
        ),
        "saa_levels": b.saa_levels,
        "variants": {},
        "cells_diag": [],
        "check_max_abs_q_vs_pool_plan": 0.0,
    }
    qex = exact_q(params)
    qt_exact = jnp.stack(
        [q_at(qex, h, geom.points[h].reshape(-1, 2 * w), w) for h in range(horizon)]
    )
    names = [v[0] for v in VARIANTS] + [
        "exact Q at basis points (no data)",
        "exact Q, zeroed where POOL s=0.003 zeroes",
        "exact Q, zeroed where POOL s=0.01 zeroes",
    ]
    facts = {n: [] for n in names}
    for r in range(runs):
        data = collect_inventory_data(
            jax.random.fold_in(jax.random.key(r), 0),
            params,
            b.behaviour,
            cfg.env.num_episodes,
        )
        key = jax.random.key(1000 + r)
        cells = data_cells(geom, data)
        exact_counts = jnp.stack(
            [_seg(cells[:, h], jnp.ones(cells.shape[0]), k) for h in range(horizon)]
        )
        q_pool = {}
        for name, noisy, pess, sc in VARIANTS:
            pc = planning.PoolConfig(bonus_scale=sc)
            q, counts, sums = backward_pass(
                data,
                geom,
                actions,
                mech.noise_std if noisy else 0.0,
                e_rho if pess else 0.0,
                pc,
                key,
            )
            if noisy and pess:
                q_pool[sc] = q
            if name.startswith("POOL s=0.003"):
                ref = planning.pool_plan(key, data, geom, actions, mech, pc).q_tables
                out["check_max_abs_q_vs_pool_plan"] = max(
                    out["check_max_abs_q_vs_pool_plan"],
                    float(jnp.max(jnp.abs(ref - q))),
                )
                # The rollouts here against the pipeline's evaluation of the same Q.
                out.setdefault("check_gap_vs_greedy_policy_cost", []).append(
                    b.greedy_gap(geom, q)
                )
                out["cells_diag"].append(
                    cell_diagnostics(
                        exact_counts, counts, sums, e_rho, pc, horizon, iota
                    )
                )
            f = policy_facts(b, geom, actions, q, counts, e_rho if pess else 0.0)
            if name.startswith("POOL s=0.003"):
                out["check_gap_vs_greedy_policy_cost"][-1] -= f["gap"]
            f["share_cells_q_zero"] = float(jnp.mean(q <= 0.0))
            facts[name].append(f)
        noisy_counts = add_noise(
            exact_counts, jax.random.fold_in(key, 0), mech.noise_std
        )
        for name, q in (
            (names[-3], qt_exact),
            (names[-2], jnp.where(q_pool[0.003] <= 0, 0.0, qt_exact)),
            (names[-1], jnp.where(q_pool[0.01] <= 0, 0.0, qt_exact)),
        ):
            f = policy_facts(b, geom, actions, q, noisy_counts, e_rho)
            f["share_cells_q_zero"] = float(jnp.mean(q <= 0.0))
            facts[name].append(f)
        print(
            f"w+d={2 * w} run {r}: "
            + ", ".join(f"{n.split(' (')[0]} {facts[n][-1]['gap']:.3f}" for n in names),
            flush=True,
        )
    for name in names:
        rows = facts[name]
        agg = {}
        for key_ in rows[0]:
            vals = [x[key_] for x in rows]
            s = summary(vals)
            agg[key_] = {
                "mean": s["mean"],
                "std": s["std"],
                "ci95": s["ci95"],
                "values": vals,
            }
        out["variants"][name] = agg
    shipped = out["variants"][names[0]]["gap"]["values"]
    out["welch_p_vs_shipped"] = {
        n: float(
            stats.ttest_ind(
                out["variants"][n]["gap"]["values"], shipped, equal_var=False
            ).pvalue
        )
        for n in names[1:]
    }
    d = out["cells_diag"]
    out["cell_stats"] = {key_: float(np.mean([x[key_] for x in d])) for key_ in d[0]}
    out["wall_s"] = time.perf_counter() - t0
    return out


def _fmt(a: dict, digits: int = 3) -> str:
    h = a["ci95"]
    hs = "" if h is None or h != h else f" [{h:.{digits}f}]"
    return f"{a['mean']:.{digits}f} ± {a['std']:.{digits}f}{hs}"


def _md(res: dict) -> str:
    lines = [
        "# POOL, paper zones: why w + d = 6 / 8 lose to the behaviour policy",
        "",
        res["setting"] + ".",
        "",
        "## Data per cell and the bonus (POOL s = 0.003; means over runs and stages)",
        "",
        "| w+d | cells K | pairs with feedback / stage | empty cells | cells n~ <= "
        "E_rho | covered | median n (covered) | pairs in covered cells | sigma | "
        "E_rho | iota | Q before bonus / v_max | privacy term / v_max at s=1 | "
        "variance term / v_max at s=1 | covered zeroed at 0.003 / 0.01 |",
        "|" + "---|" * 15,
    ]
    for r in res["rows"]:
        c = r["cell_stats"]
        lines.append(
            f"| {r['w+d']} | {r['cells']} | {c['pairs_with_feedback_per_stage']:.0f} | "
            f"{c['cells_empty']:.1f} | {c['cells_uncovered']:.1f} | "
            f"{c['cells_covered']:.1f} | {c['median_count_covered']:.0f} | "
            f"{c['share_pairs_in_covered']:.3f} | {r['noise_std']:.3f} | "
            f"{r['e_rho']:.2f} | {r['iota']:.2f} | "
            f"{c['median_q_before_bonus_over_vmax']:.3f} | "
            f"{c['median_privacy_term_over_vmax_s1']:.2f} | "
            f"{c['median_variance_term_over_vmax_s1']:.2f} | "
            f"{c['share_covered_zeroed_s0.003']:.3f} / "
            f"{c['share_covered_zeroed_s0.01']:.3f} |"
        )
    lines += [
        "",
        "## The greedy policy of each variant (mean ± sample std [95% t half-width] "
        "over runs; p: Welch against POOL s=0.003)",
        "",
        "| w+d | variant | gap | p | cells with Q = 0 | mean order | post-order "
        "level | zero orders | all candidates 0 | chosen cell n~ <= E_rho | chosen "
        "beyond boundary |",
        "|" + "---|" * 11,
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['w+d']} | behaviour (SAA level {r['saa_levels'][0]:.2f}) | "
            f"{r['behaviour_gap']:.3f} | | | {r['behaviour_mean_order']:.3f} | "
            f"{r['behaviour_mean_post_order_level']:.3f} | | | | |"
        )
        for name, v in r["variants"].items():
            p = r["welch_p_vs_shipped"].get(name)
            lines.append(
                f"| {r['w+d']} | {name} | {_fmt(v['gap'])} | "
                + (f"{p:.1e}" if p is not None else "")
                + f" | {v['share_cells_q_zero']['mean']:.3f} | "
                f"{v['mean_order']['mean']:.3f} | "
                f"{v['mean_post_order_level']['mean']:.3f} | "
                f"{v['share_zero_order']['mean']:.3f} | "
                f"{v['share_all_candidates_zero']['mean']:.3f} | "
                f"{v['share_chosen_cell_uncovered']['mean']:.3f} | "
                f"{v['share_chosen_beyond_boundary']['mean']:.3f} |"
            )
    lines += [
        "",
        "Check: the backward pass of this script against `planning.pool_plan` (same "
        "noise keys), max |Q difference| over runs: "
        + ", ".join(
            f"w+d={r['w+d']}: {r['check_max_abs_q_vs_pool_plan']:.1e}"
            for r in res["rows"]
        )
        + "; the rollouts' gap minus `planning.greedy_policy_cost`'s, max |.|: "
        + ", ".join(
            f"{max(abs(x) for x in r['check_gap_vs_greedy_policy_cost']):.1e}"
            for r in res["rows"]
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def select_per_dimension(
    zones: str, w: int, runs_stand: int, runs_eval: int, eval_episodes: int
) -> dict:
    """bonus_scale by the rule of ``pool_experiments --only select_shift`` at w
    products.

    The same public stand-in of another distribution (:data:`SHIFTED_STAND_IN`, data
    keys 100 + r), the same scales and rho grid and the same rule (smallest gap
    averaged over rho; ties: the larger scale), but at ``w`` products and
    ``pool.zones=zones``. Beside it, the evaluated task (default config at w
    products, data keys r) at rho = 10 for every scale, so the choice's cost shows.
    """
    pool_experiments.ZONES[:] = [f"pool.zones={zones}"]
    try:
        base = [f"env.num_products={w}", "env.num_episodes=2000"]
        gap_s, stand = pool_experiments._scale_sweep(
            [*SHIFTED_STAND_IN, *base],
            runs_stand,
            eval_episodes,
            SHIFT_SCALES,
            pool_experiments.RHOS,
            100,
        )
        b = Bench.from_config(_load(base), eval_episodes)
        evaluated = []
        for sc in SHIFT_SCALES:
            cfg = _load(
                [
                    *base,
                    "pool.method=pool",
                    f"privacy.rho={RHO}",
                    f"pool.bonus_scale={sc}",
                ]
            )
            gaps = [b.run(cfg, b.geom, r) for r in range(runs_eval)]
            sm = summary(gaps)
            evaluated.append(
                {
                    "scale": sc,
                    **sm,
                    "gaps": gaps,
                    # One-sample t-test against the behaviour policy's gap (a constant
                    # of the evaluation, common random numbers).
                    "p_vs_behaviour": float(
                        stats.ttest_1samp(gaps, b.behaviour_gap).pvalue
                    ),
                }
            )
            print(f"{zones} w+d={2 * w} evaluated s={sc}: {sm['mean']:.3f}", flush=True)
    finally:
        pool_experiments.ZONES[:] = ["pool.zones=paper"]
    chosen = min(stand, key=lambda x: (round(x["average"], 6), -x["scale"]))["scale"]
    return {
        "zones": zones,
        "w+d": 2 * w,
        "stand_in_behaviour_gap": gap_s,
        "stand_in": stand,
        "chosen": chosen,
        "chosen_interior": SHIFT_SCALES[0] < chosen < SHIFT_SCALES[-1],
        "evaluated_behaviour_gap": b.behaviour_gap,
        "evaluated_rho10": evaluated,
    }


def _md_select(res: dict) -> str:
    lines = [
        "# POOL: bonus_scale chosen per dimension on the shifted public stand-in",
        "",
        res["setting"] + ".",
        "",
        "Stand-in: the rule's average gap over rho in {0.1, 1, 5, 10, 20, 40} per "
        "scale (chosen in bold). Evaluated: gap at rho = 10, mean ± sample std [95% t "
        "half-width]; p: one-sample t-test against the behaviour policy's gap.",
        "",
    ]
    for r in res["rows"]:
        lines += [
            f"## {r['zones']} zones, w + d = {r['w+d']} (behaviour: stand-in "
            f"{r['stand_in_behaviour_gap']:.3f}, evaluated "
            f"{r['evaluated_behaviour_gap']:.3f}); chosen {r['chosen']:g}"
            f" (interior: {r['chosen_interior']})",
            "",
            "| bonus_scale | stand-in average | stand-in, rho = 10 | evaluated, "
            "rho = 10 | p vs behaviour |",
            "|---|---|---|---|---|",
        ]
        at10 = _chosen_at_rho(r, RHO)
        for st, ev in zip(r["stand_in"], r["evaluated_rho10"]):
            bold = "**" if st["scale"] == r["chosen"] else ""
            star = " (smallest)" if st["scale"] == at10 else ""
            lines.append(
                f"| {bold}{st['scale']:g}{bold} | {st['average']:.3f} | "
                f"{_stand_gap(st, RHO):.3f}{star} | "
                f"{ev['mean']:.3f} ± {ev['std']:.3f} [{ev['ci95']:.3f}] | "
                f"{ev['p_vs_behaviour']:.1e} |"
            )
        lines += [
            "",
            f"The rule over the rho grid picks {r['chosen']:g}; the same rule at "
            "rho = 10 alone (smallest stand-in gap at rho = 10; ties: the larger "
            f"scale) would pick {at10:g}.",
            "",
        ]
    return "\n".join(lines)


def _stand_gap(row: dict, rho: float) -> float:
    return row["gaps"][list(pool_experiments.RHOS).index(rho)]


def _chosen_at_rho(r: dict, rho: float) -> float:
    """The stand-in's pick when the rule is applied at one rho (ties: larger scale)."""
    return min(
        r["stand_in"], key=lambda x: (round(_stand_gap(x, rho), 6), -x["scale"])
    )["scale"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--products", type=int, nargs="*", default=[1, 2, 3, 4])
    ap.add_argument("--eval-episodes", type=int, default=4000)
    ap.add_argument(
        "--select",
        nargs="*",
        default=None,
        metavar="ZONES:W",
        help="instead of the diagnosis: the per-dimension bonus_scale selection, "
        "e.g. paper:3 paper:4 additive:2 (stand-in --stand-runs runs a cell, "
        "evaluated --runs)",
    )
    ap.add_argument("--stand-runs", type=int, default=5)
    ap.add_argument(
        "--select-md",
        action="store_true",
        help="rewrite results/pool_select_shift_wd.md from its JSON (no runs)",
    )
    args = ap.parse_args()
    if args.select_md:
        res = json.loads((RESULTS / "pool_select_shift_wd.json").read_text())
        (RESULTS / "pool_select_shift_wd.md").write_text(_md_select(res))
        print(_md_select(res))
        return
    if args.select:
        res = {
            "setting": f"stand-in {list(SHIFTED_STAND_IN)} at w products, data keys "
            f"100 + r, {args.stand_runs} runs a cell; evaluated: pool/default at w "
            f"products, data keys r, noise keys 1000 + r, {args.runs} runs; M = 10, "
            f"2000 episodes, {args.eval_episodes} evaluation episodes; NOT PRIVATE "
            "(public noise keys)",
            "rows": [],
        }
        for item in args.select:
            zones, w = item.split(":")
            res["rows"].append(
                select_per_dimension(
                    zones, int(w), args.stand_runs, args.runs, args.eval_episodes
                )
            )
            # Written after every setting, so a cut run keeps what finished.
            dump_json(RESULTS / "pool_select_shift_wd.json", res, indent=2)
            (RESULTS / "pool_select_shift_wd.md").write_text(_md_select(res))
        print(_md_select(res))
        return
    rows = []
    for w in args.products:
        rows.append(run_products(w, args.runs, args.eval_episodes))
        print(f"w+d={2 * w} done in {rows[-1]['wall_s']:.0f}s", flush=True)
    res = {
        "setting": f"pool.zones=paper, M = 10, rho = {RHO} (zCDP), H = 5, lambda = "
        f"0.9, 2000 episodes, {args.runs} runs (data keys r, noise keys 1000 + r), "
        f"{args.eval_episodes} evaluation episodes; NOT PRIVATE (public noise keys)",
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    dump_json(RESULTS / "pool_wd_diagnosis.json", res, indent=2)
    (RESULTS / "pool_wd_diagnosis.md").write_text(_md(res))
    print(_md(res))


if __name__ == "__main__":
    assert math.isfinite(RHO)
    main()
