"""PrivORL Table XIV at CPU scale, measured: PrivORL-n fine-tuned with sigma calibrated
by PLD, paired by seed with the stored sweep's RDP-calibrated rows.

The protocol is that of ``benchmarks/privorl_n_eps_sweep.py --agents iql`` as its stored
``results/privorl_n_eps_sweep_agents.json`` ran it (its ``overrides`` and ``config`` are
rebuilt by that script's ``base_overrides`` and checked equal before any run): the
quickstart's model and fine-tuning on maze2d-umaze-dense-v1 (20k training transitions +
2k holdout, collected from ``seed``), 20k synthetic transitions, IQL trained 30k updates
on the release and scored as the mean of the last 5 evaluations (one per 1k updates, 50
episodes each) of one agent seed. The only change is ``privacy.accountant=pld``: the
plan (Poisson q = B / N, ceil(epochs / q) steps, C) is the same, sigma is calibrated
under PLD. The anchors' agents (real data, pre-training only) are not retrained
(``eval.train_real_agents=false``, ``eval.anchor_agents=false``); each seed's later
runs reuse its first run's pre-training (``pretrain.reuse_from``).

Why the pairing is sharp: the noise is seeded (``privacy.noise_seed = 1000 + seed``, as
in the sweep; those runs are labelled not private) and its secret fixes both the noise
key and the Poisson sampler's stream (``privacy.DPSecret.from_seed``); the plan's q and
steps do not depend on the accountant, so an RDP and a PLD run of one seed sample the
same batches and draw the same standard normals z, and their step-t noise is sigma C z
(``privacy._aggregation.add_noise_blocks``) with only sigma differing. The sensitive
rows are checked to be the sweep's by the real holdout's fidelity
(``_results.check_same_data``), and the RDP sigma this script computes for each
run's plan by the stored run's noise multiplier. The stored rows were made on another
host (the sweep's ``kept_runs_from`` provenance): runs are bit-reproducible on one host,
not across CPUs, so the pairs share data, batches and noise bits, not every rounding.

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        python benchmarks/privorl_pld_runs.py --seeds 0 1 2
    python benchmarks/privorl_pld_runs.py --tables-only   # tabulate finished runs

Runs are seed-major (eps 1 then 10 for seed 0, then seed 1, ...) and go to ``--out``; a
run directory with a report.json is read, not rerun, a run recorded in the results file
whose directory is gone is kept, and the results are rewritten after every run. Writes
``benchmarks/results/privorl_pld_agents.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import privorl_n_eps_sweep as sweep_script
from _results import (
    check_same_data,
    dump_json,
    eps_name,
    load_line,
    metric_table,
    paired_vs,
    summary,
    uptime,
    write_text,
)

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "results" / "privorl_n_eps_sweep_agents.json"
CONFIG = "privorl_n/quickstart"
AGENT = "agent_iql"
METRICS = {
    AGENT: ("IQL score (30000 updates)", "higher"),
    "free_cell_share": ("share in the sensitive maze's free cells", "higher"),
    "sliced_wasserstein": ("sliced Wasserstein to the sensitive rows", "lower"),
}
# The anchors' agents are the sweep's (same rows); fidelity anchors stay (cheap, and
# the real holdout's is the data check).
NO_ANCHOR_AGENTS = ["eval.train_real_agents=false", "eval.anchor_agents=false"]


def sweep_protocol(sweep: dict) -> list[str]:
    """The overrides every sweep run got before its seed and epsilon, rebuilt by
    ``privorl_n_eps_sweep.base_overrides`` for ``--agents iql`` at the stored agent
    budget; exits with one line unless they are the stored sweep's."""
    args = sweep_script.parse_args(
        ["--agents", "iql", "--agent-updates", str(sweep.get("agent_updates"))]
    )
    base = sweep_script.base_overrides(args)
    if sweep["overrides"] != base or sweep.get("config", CONFIG) != CONFIG:
        raise SystemExit(
            f"{SWEEP}: its overrides {sweep['overrides']} / config "
            f"{sweep.get('config')} are not what privorl_n_eps_sweep.py builds for "
            f"--agents iql ({base}, {CONFIG}); the pairs would not be comparable"
        )
    if "eval.agent_updates=30000" not in base:
        raise SystemExit(f"{SWEEP}: not the 30k-update agent sweep")
    return base


def run_overrides(
    base: list[str], seed: int, eps: float, extra: list[str], reuse: Path | None
) -> list[str]:
    """One run's overrides: the sweep's (``base``, seed, epsilon, noise seed), no
    anchor agents, the pre-training of ``reuse`` if given, then ``extra`` (last:
    they win)."""
    return [
        *base,
        f"seed={seed}",
        f"privacy.epsilon={eps}",
        f"privacy.noise_seed={1000 + seed}",
        *NO_ANCHOR_AGENTS,
        *([f"pretrain.reuse_from={reuse}"] if reuse is not None else []),
        *extra,
    ]


def plan_epsilons(overrides: list[str], dataset_size: int) -> dict[str, dict]:
    """The run's plan (config :data:`CONFIG` with ``overrides``) on ``dataset_size``
    units calibrated under each accountant: sigma, steps, q and the epsilon both
    accountants say that sigma spends (at the run's delta)."""
    from privrl_jax.pipelines import privorl_n  # noqa: PLC0415 (jax)

    out = {}
    for acc in ("rdp", "pld"):
        cfg = privorl_n.load(CONFIG, [*overrides, f"privacy.accountant={acc}"])
        plan = privorl_n.make_plan(cfg, dataset_size)
        out[acc] = {
            "noise_multiplier": plan.noise_multipliers[0],
            "steps": plan.steps,
            "sampling_rate": plan.sampling_rate,
            "epsilon_rdp": plan.epsilon(cfg.privacy.delta, "rdp").epsilon,
            "epsilon_pld": plan.epsilon(cfg.privacy.delta, "pld").epsilon,
        }
    return out


def record(
    variant: str, seed: int, eps: float, rep: dict, plans: dict, seconds: float | None
) -> dict:
    """The results file's entry of one finished run (``rep``: its report with the
    audit under ``audit``; ``plans``: :func:`plan_epsilons`)."""
    iql = rep["agents_synthetic"]["iql"]
    audit = rep["audit"]
    cfg = rep["config"]
    return {
        "variant": variant,
        "seed": seed,
        "epsilon": eps,
        "accountant": cfg["privacy"]["accountant"],
        "num_samples": cfg["synthesis"]["num_samples"],
        "noise_multiplier": rep["finetune"]["noise_multiplier"],
        "steps": rep["finetune"]["steps"],
        "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
        "epsilon_spent_pld": rep["privacy"]["pld"]["epsilon"],
        "plans": plans,
        "agent_score": iql["score_mean"],
        "agent_final_evals": [
            e["score_mean"] for e in iql["per_seed"][0]["curve"][-5:]
        ],
        "release": audit["fidelity"],
        "pretrain_only": audit["anchors"]["pretrain_only"],
        "real_holdout": audit["anchors"]["real_holdout"],
        "wall_time_s": rep["wall_time_s"],
        "measured_s": seconds,
    }


def sweep_rows(sweep: dict, seeds: list[int], epsilons: list[float]) -> dict:
    """The stored sweep's releases: (seed, epsilon) -> {scores, sigma}."""
    return {
        (r["seed"], r["epsilon"]): r["release"]
        | {
            AGENT: r["agents"]["release"]["iql"],
            "noise_multiplier": r["noise_multiplier"],
            "steps": r["steps"],
        }
        for r in sweep["runs"]
        if r["seed"] in seeds and r["epsilon"] in epsilons
    }


def check_pairs(runs: list[dict], sweep: dict) -> list[str]:
    """What makes a run's pairing with the sweep's row of its seed and epsilon
    unsound, one line each: other sensitive rows (the real holdout's fidelity
    differs), another plan (steps), or an RDP sigma for this plan that is not the
    stored run's; empty when every run pairs."""
    bad = [f"seed {s}: other sensitive rows" for s in check_same_data(runs, sweep)]
    ref = sweep_rows(sweep, [r["seed"] for r in runs], [r["epsilon"] for r in runs])
    for r in runs:
        t = ref.get((r["seed"], r["epsilon"]))
        name = f"seed {r['seed']} eps {eps_name(r['epsilon'])}"
        if t is None:
            bad.append(f"{name}: no stored sweep row")
        elif r["steps"] != t["steps"]:
            bad.append(f"{name}: {r['steps']} steps, the sweep's {t['steps']}")
        elif not math.isclose(
            r["plans"]["rdp"]["noise_multiplier"], t["noise_multiplier"], rel_tol=1e-6
        ):
            bad.append(
                f"{name}: RDP sigma {r['plans']['rdp']['noise_multiplier']:.6f} for "
                f"this plan, the sweep ran {t['noise_multiplier']:.6f}"
            )
    return bad


def paired_table(
    runs: list[dict],
    sweep: dict,
    variants: list[tuple[str, str]],
    epsilons: list[float],
    ref_label: str,
) -> tuple[dict, list[str], list[str], dict, dict, list[str]]:
    """Rows (``variants``: (variant key, label)) beside the sweep's rows at each
    epsilon, over the seeds with runs: the metric table, the paired differences
    variant - sweep of every metric (:func:`_results.paired_vs`) and their
    Markdown lines; returns (table, lines, pair lines, pairs, rows, row order)."""
    seeds = sorted({r["seed"] for r in runs})
    ref = sweep_rows(sweep, seeds, epsilons)
    rows: dict[str, dict[int, dict]] = {}
    order = []
    for e in epsilons:
        a = f"{ref_label} eps = {eps_name(e)} (sweep)"
        # Only over the seeds a variant has at this epsilon: the pairs' seeds.
        mine = {r["seed"] for r in runs if r["epsilon"] == e}
        rows[a] = {s: v for (s, ee), v in ref.items() if ee == e and s in mine}
        order.append(a)
        for key, label in variants:
            b = f"{label} eps = {eps_name(e)}"
            rows[b] = {
                r["seed"]: r["release"] | {AGENT: r["agent_score"]}
                for r in runs
                if r["variant"] == key and r["epsilon"] == e
            }
            order.append(b)
    order = [n for n in order if rows[n]]
    table, lines = metric_table([(n, list(rows[n].values())) for n in order], METRICS)
    pairs: dict[str, dict] = {}
    pair_lines = [
        "| pair (b - a, same seed) | seeds | "
        + " | ".join(f"{lab} diff [95% t] (b higher; p)" for lab, _ in METRICS.values())
        + " |",
        "|" + "---|" * (2 + len(METRICS)),
    ]
    for e in epsilons:
        a = f"{ref_label} eps = {eps_name(e)} (sweep)"
        for _, label in variants:
            b = f"{label} eps = {eps_name(e)}"
            res = {k: paired_vs(rows, a, b, k) for k in METRICS}
            if any(v is None for v in res.values()):
                continue
            pairs[f"{a} -> {b}"] = res
            n = res[AGENT]["n"]
            cells = [
                f"{v['mean']:+.3f} [±{v['ci95']:.3f}] ({v['rose']}/{n}; p "
                + ("-" if v["p"] is None else f"{v['p']:.2g}")
                + ")"
                for v in res.values()
            ]
            pair_lines.append(f"| {b} - {a} | {n} | " + " | ".join(cells) + " |")
    return table, lines, pair_lines, pairs, rows, order


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_pld"))
    ap.add_argument("--name", default="privorl_pld_agents")
    ap.add_argument(
        "--tables-only", action="store_true", help="tabulate finished runs; start none"
    )
    args = ap.parse_args()
    variants = [("pld", ["privacy.accountant=pld"])]
    run_study(args, variants, write_pld)


def run_study(
    args: argparse.Namespace,
    variants: list[tuple[str, list[str]]],
    write: Callable[[Path, argparse.Namespace, list[dict], dict], str],
    pretrain_from: Callable[[int], Path | None] = lambda seed: None,
) -> None:
    """Runs (or resumes) every (seed, variant, epsilon) seed-major (``variants``:
    (key, extra overrides)), checks each against the sweep, and rewrites the results
    with ``write(res_dir, args, runs, sweep)`` (returns ``uptime``) after every run.
    A seed's first new run pre-trains unless ``pretrain_from(seed)`` names a finished
    run to reuse; its later runs reuse it."""
    from privrl_jax.pipelines import privorl_n  # noqa: PLC0415 (jax)

    sweep = json.loads(SWEEP.read_text())
    base = sweep_protocol(sweep)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = ROOT / "benchmarks" / "results"
    stored = stored_runs_by_variant(res / f"{args.name}.json")
    todo = [
        (s, key, extra, e)
        for s in args.seeds
        for key, extra in variants
        for e in args.epsilons
    ]
    runs: list[dict] = []
    first: dict[int, Path] = {}
    for i, (seed, key, extra, eps) in enumerate(todo):
        run_dir = out / f"{key}_seed{seed}_eps{eps_name(eps)}"
        done = (run_dir / "report.json").exists()
        if not done and (key, seed, eps) in stored:
            runs.append(stored[(key, seed, eps)])
            continue
        if not done and args.tables_only:
            continue
        # A reused run holds no pre-training of its own: always point at the original.
        reuse = pretrain_from(seed) or first.get(seed)
        overrides = run_overrides(base, seed, eps, extra, reuse)
        t0 = time.time()
        if not done:
            print(
                f"{time.strftime('%H:%M:%S')} [{i + 1}/{len(todo)}] {key} seed {seed} "
                f"eps {eps_name(eps)} -> {run_dir}",
                flush=True,
            )
            # Not when done: a rerun of a finished run would redo its evaluation.
            privorl_n.run(privorl_n.load(CONFIG, overrides), run_dir)
        rep = json.loads((run_dir / "report.json").read_text())
        rep["audit"] = json.loads((run_dir / "audit" / "audit.json").read_text())
        plans = plan_epsilons(overrides, rep["privacy"]["dataset_size"])
        prev = stored.get((key, seed, eps), {}).get("measured_s")
        seconds = time.time() - t0 if not done else prev
        runs.append(record(key, seed, eps, rep, plans, seconds))
        # The run that holds the pre-training (a reusing run has none of its own).
        first.setdefault(seed, reuse or run_dir)
        if not done:
            print(
                f"{time.strftime('%H:%M:%S')} [{i + 1}/{len(todo)}] {key} seed {seed} "
                f"eps {eps_name(eps)}: IQL {runs[-1]['agent_score']:.1f}, "
                f"sigma {runs[-1]['noise_multiplier']:.4f}, {seconds:.0f} s",
                flush=True,
            )
        bad = check_pairs(runs, sweep)
        if bad:
            raise SystemExit("; ".join(bad) + f": these runs do not pair with {SWEEP}")
        write(res, args, runs, sweep)
    load = write(res, args, runs, sweep)
    print((res / f"{args.name}.md").read_text())
    print(f"uptime: {load}")
    assert all(
        r["epsilon_spent_rdp" if r["accountant"] == "rdp" else "epsilon_spent_pld"]
        <= r["epsilon"] * (1 + 1e-9)
        for r in runs
    ), "a run spent more than its budget"


def stored_runs_by_variant(path: Path) -> dict[tuple[str, int, float], dict]:
    """The records of an earlier results file keyed (variant, seed, epsilon), as
    the former ``table1_agents.stored_runs``: a fresh checkout (no runs/) keeps them."""
    if not path.exists():
        return {}
    return {
        (r["variant"], int(r["seed"]), float(r["epsilon"])): r
        for r in json.loads(path.read_text())["runs"]
    }


def write_pld(
    res: Path, args: argparse.Namespace, runs: list[dict], sweep: dict
) -> str:
    """The PLD study's results files; returns ``uptime``."""
    load = uptime()
    table, lines, pair_lines, pairs, rows, order = paired_table(
        runs, sweep, [("pld", "PLD")], args.epsilons, "RDP"
    )
    sig = [
        "| eps | steps | q | sigma RDP | sigma PLD | PLD / RDP | RDP plan: eps by RDP "
        "/ by PLD | PLD plan: eps by RDP / by PLD | PLD runs' ledger: eps by RDP / "
        "by PLD |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sigmas = {}
    for e in args.epsilons:
        rs = [r for r in runs if r["epsilon"] == e]
        if not rs:
            continue
        p = rs[0]["plans"]
        sigmas[eps_name(e)] = {
            "rdp": p["rdp"],
            "pld": p["pld"],
            "ratio": p["pld"]["noise_multiplier"] / p["rdp"]["noise_multiplier"],
            "ledger_eps_rdp": [r["epsilon_spent_rdp"] for r in rs],
            "ledger_eps_pld": [r["epsilon_spent_pld"] for r in rs],
        }
        sig.append(
            f"| {eps_name(e)} | {p['pld']['steps']} | {p['pld']['sampling_rate']:.4f} "
            f"| {p['rdp']['noise_multiplier']:.4f} | {p['pld']['noise_multiplier']:.4f}"
            f" | {sigmas[eps_name(e)]['ratio']:.4f} | {p['rdp']['epsilon_rdp']:.3f} / "
            f"{p['rdp']['epsilon_pld']:.3f} | {p['pld']['epsilon_rdp']:.3f} / "
            f"{p['pld']['epsilon_pld']:.3f} | "
            f"{max(sigmas[eps_name(e)]['ledger_eps_rdp']):.3f} / "
            f"{max(sigmas[eps_name(e)]['ledger_eps_pld']):.3f} |"
        )
    md = "\n".join(
        [
            "# PrivORL Table XIV at CPU scale, measured: PrivORL-n with sigma "
            "calibrated by PLD vs RDP",
            "",
            "The protocol of `privorl_n_eps_sweep_agents.md` (maze2d-umaze-dense-v1, "
            "20000 training + 2000 holdout transitions, the quickstart's model and "
            "fine-tuning, 20000 synthetic transitions, IQL 30000 updates, score = mean "
            "of the last 5 evaluations of one agent seed), noise seeded 1000 + seed; "
            "the only change is `privacy.accountant=pld`. RDP rows: the sweep's "
            "stored runs of the same seeds (same sensitive rows, checked on the real "
            "holdout's fidelity; same batches and noise draws z, only sigma differs). "
            "Mean ± sample std (ddof = 1) [95% t half-width] over seeds.",
            "",
            *sig,
            "",
            *lines,
            "",
            "Within-seed differences PLD - RDP (mean [95% t half-width] (seeds where "
            "PLD is higher / seeds; two-sided paired t-test p)):",
            "",
            *pair_lines,
            "",
            *per_seed_lines(rows, order),
            "",
            wall_line(runs),
            "",
        ]
    )
    dump_json(
        res / f"{args.name}.json",
        {
            "runs": runs,
            "table": table,
            "pairs_vs_sweep": pairs,
            "sigmas": sigmas,
            "seeds": sorted({r["seed"] for r in runs}),
            "overrides": [*sweep["overrides"], *NO_ANCHOR_AGENTS],
            "config": CONFIG,
            "sweep": str(SWEEP.relative_to(ROOT)),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "uptime": load,
        },
        ran=not args.tables_only,
        indent=2,
    )
    write_text(res / f"{args.name}.md", md + load_line(res / f"{args.name}.json"))
    return load


def per_seed_lines(rows: dict[str, dict[int, dict]], order: list[str]) -> list[str]:
    """IQL score / free-cell share / sliced Wasserstein per seed and row."""
    seeds = sorted({s for n in order for s in rows[n]})
    out = [
        "Per seed (IQL score / free-cell share / sliced Wasserstein):",
        "",
        "| seed | " + " | ".join(order) + " |",
        "|" + "---|" * (1 + len(order)),
    ]
    for s in seeds:
        cells = [
            f"{rows[n][s][AGENT]:.1f} / {rows[n][s]['free_cell_share']:.4f} / "
            f"{rows[n][s]['sliced_wasserstein']:.4f}"
            if s in rows[n]
            else "-"
            for n in order
        ]
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    return out


def wall_line(runs: list[dict]) -> str:
    """Run times: the pipeline's wall time and this script's measured one."""
    if not runs:
        return ""
    w = summary([r["wall_time_s"] for r in runs])
    return (
        f"{len(runs)} runs; pipeline wall time {w['mean']:.0f} s mean "
        f"({min(r['wall_time_s'] for r in runs):.0f}-"
        f"{max(r['wall_time_s'] for r in runs):.0f} s) per run (pre-training in "
        "each seed's first run, fine-tuning, synthesis, IQL, audit); per run: "
        + ", ".join(
            f"seed {r['seed']} {r['variant']} eps {eps_name(r['epsilon'])} "
            f"{r['wall_time_s']:.0f} s"
            for r in runs
        )
        + "."
    )


if __name__ == "__main__":
    main()
