"""PrivORL-n's privacy-utility curve at CPU scale: fidelity to the sensitive task
against epsilon,
with the anchors that show whether the measurement can see the DP fine-tuning at all.

Rows (PrivORL Fig. 6 / Tables IV and VII, CPU scale):

- **pre-training only** (Table IV): samples of the publicly pre-trained model before any
  DP step (epsilon = 0: it read no sensitive row);
- **epsilon in {0.5, 1, 2, 5, 10, inf}**: the release after DP fine-tuning (inf: no
  noise);
- **real holdout**: sensitive rows never trained on (another sample of the sensitive
  law: the floor).

Metrics (audit: they read the sensitive rows): the share of positions in the sensitive
maze's free cells (real data 1.0; the public medium + large data 0.17), the sliced
Wasserstein distance to the sensitive rows in the public normaliser's scale (every table
compared on as many rows as the holdout has), and the KS marginal / correlation scores.
Mean, sample std (ddof = 1) and a 95% Student-t interval over seeds; every seed has its
own data, pre-training and noise.

The sensitive set is kept small (``--sensitive-size``, default 20k transitions; the
quickstart's 100k) so that the DP noise on the mean gradient, sigma C / (q N), is large
enough to cost fidelity: that is the regime a privacy-utility curve must show. Each seed
pre-trains once, in its first run; the other epsilons start from that model
(``pretrain.reuse_from``), which is the model they would have trained
(tests/pipelines/test_privorl_n.py). The DP noise is seeded (``privacy.noise_seed``) so
the table can be reproduced: those runs are labelled not private, and their noise has
the law of a private run's.

By default no agents are trained (the fidelity sweep). ``--agents iql`` adds the agent
rows: every run trains IQL on its release for ``--agent-updates`` (default 30k: on the
-v1 umaze IQL learns from real data only after ~15k updates, benchmarks/README.md
"IQL on real maze2d-umaze-dense-v1 data: the update budget"), scored as the mean of the
last 5 evaluations (one per 1k updates, 50 episodes each) of one agent seed; each seed's
first run also trains it on the real sensitive training rows
(``eval.train_real_agents``) and on the pre-training-only samples
(``eval.anchor_agents``). About 4 CPU-minutes an
agent on 2 cores, so keep that mode to a few epsilons. The real-data agent's evaluation
curve is kept (``real_curves``), and the tables ask whether the budget trained it: its
score's rise over the last 5 evaluations (``real_data_budget``).

    python benchmarks/privorl_n_eps_sweep.py --seeds 0 1 2 3 4
    python benchmarks/privorl_n_eps_sweep.py --tables-only      # tabulate finished runs
    python benchmarks/privorl_n_eps_sweep.py --agents iql --epsilons 1 10 inf \\
        --name privorl_n_eps_sweep_agents --out runs/privorl_n_eps_sweep_agents

``--maze medium`` makes maze2d-medium-dense-v1 the sensitive task and the two other
mazes (umaze + large) the public data (``_results.MAZES``), at the same sizes and keys;
``--maze large`` likewise (public umaze + medium).

Writes ``benchmarks/results/NAME.{json,md,png}`` (``--name``; agent mode also
``NAME_fidelity.png``); runs go to ``--out`` (resumable: a run with a report.json is
read, not rerun). ``--keep-runs-from NAME.json`` tabulates that file's runs with this
invocation's (other seeds at the same protocol; refused otherwise):

    python benchmarks/privorl_n_eps_sweep.py --agents iql --epsilons 1 10 inf \\
        --seeds 4 --keep-runs-from benchmarks/results/privorl_n_eps_sweep_agents.json \\
        --name privorl_n_eps_sweep_agents --out runs/privorl_n_eps_sweep_agents
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _results import (  # benchmarks/_results.py
    HOLDOUT_ROW,
    MAZES,
    PRETRAIN_ROW,
    SWEEP_EPSILONS,
    dump_json,
    eps_name,
    fidelity_metrics,
    maze_overrides,
    metric_table,
    paired_differences,
    paired_rows,
    plot_eps_sweep,
    summary,
    write_text,
)

from privrl_jax.pipelines import privorl_n

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = SWEEP_EPSILONS
METRICS = fidelity_metrics("rows")
# Agent mode: the agent is trained on the real training rows, its fidelity columns are
# the holdout's (another sample of the same law; the training rows would be perfect).
REAL_ROW = "real data"


def main() -> None:
    args = parse_args()
    base = base_overrides(args)
    # Refused before any run starts, not after an hour of them.
    kept = keep_runs(args.keep_runs_from, args, base) if args.keep_runs_from else None
    stored = kept["runs"] if kept else []

    runs: list[dict] = []
    started = False  # a re-tabulation keeps the stored runs' provenance
    for seed in args.seeds:
        first = None
        for eps in args.epsilons:
            run_dir = Path(args.out) / f"seed{seed}_eps{eps_name(eps)}"
            reuse = [] if first is None else [f"pretrain.reuse_from={first}"]
            # The seed's first run also trains the anchors' agents (real training rows,
            # pre-training-only samples): one value per seed. The eval section is not
            # part of what reuse_from checks (privorl_n/train.py pretrain_dir).
            anchor_agents = bool(args.agents) and first is None
            cfg = privorl_n.load(
                args.config,
                [
                    *base,
                    f"seed={seed}",
                    f"privacy.epsilon={eps}",
                    f"privacy.noise_seed={1000 + seed}",
                    f"eval.train_real_agents={str(anchor_agents).lower()}",
                    f"eval.anchor_agents={str(anchor_agents).lower()}",
                    *reuse,
                ],
            )
            if (run_dir / "report.json").exists():
                rep = json.loads((run_dir / "report.json").read_text())
                rep["audit"] = json.loads(
                    (run_dir / "audit" / "audit.json").read_text()
                )
            elif args.tables_only:
                continue
            else:
                started = True
                print(
                    f"{time.strftime('%H:%M:%S')} seed {seed}, eps {eps_name(eps)} -> "
                    f"{run_dir}",
                    flush=True,
                )
                rep = privorl_n.run(cfg, run_dir)
                print(
                    f"{time.strftime('%H:%M:%S')} seed {seed}, eps {eps_name(eps)}: "
                    f"{rep['wall_time_s']:.0f} s",
                    flush=True,
                )
            first = first or run_dir
            audit = rep["audit"]
            run = {
                "seed": seed,
                "epsilon": eps,
                "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
                "noise_multiplier": rep["finetune"]["noise_multiplier"],
                "steps": rep["finetune"]["steps"],
                "release": audit["fidelity"],
                "pretrain_only": audit["anchors"]["pretrain_only"],
                "real_holdout": audit["anchors"]["real_holdout"],
                "wall_time_s": rep["wall_time_s"],
            }
            if args.agents:
                run["agents"] = {
                    "release": _scores(rep.get("agents_synthetic")),
                    "pretrain_only": _scores(
                        audit["anchors"].get("agents_pretrain_only")
                    ),
                    "real": _scores(audit.get("agents_real")),
                }
                # Kept to ask whether the budget trains the real-data agent at all.
                run["real_curves"] = _curves(audit.get("agents_real"))
            runs.append(run)

    runs = pooled(stored, runs, args.epsilons)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    payload, md = tabulate(args, runs, out)
    print(md)
    # Where the stored seeds' runs (and their provenance) came from.
    kept_from = {}
    if kept:
        kept_from["kept_runs_from"] = {
            "path": str(args.keep_runs_from),
            "seeds": sorted({r["seed"] for r in stored}),
            "provenance": kept.get("provenance"),
        }
    dump_json(
        out / f"{args.name}.json",
        {
            "runs": runs,
            **payload,
            "overrides": base,
            "config": args.config,
            **kept_from,
        },
        ran=started,
        indent=2,
    )
    write_text(out / f"{args.name}.md", md)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``argv``; default ``sys.argv[1:]``)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--sensitive-size", type=int, default=20_000)
    ap.add_argument("--config", default="privorl_n/quickstart")
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_n_eps_sweep"))
    ap.add_argument(
        "--set",
        dest="overrides",
        nargs="*",
        default=[],
        help="extra overrides for every run",
    )
    ap.add_argument(
        "--tables-only", action="store_true", help="tabulate finished runs; start none"
    )
    ap.add_argument("--name", default="privorl_n_eps_sweep")
    ap.add_argument(
        "--agents",
        nargs="*",
        default=[],
        help="agents to train on every release (e.g. iql); none: the fidelity sweep",
    )
    ap.add_argument("--agent-updates", type=int, default=30_000)
    ap.add_argument(
        "--maze",
        default="umaze",
        choices=MAZES,
        help="the sensitive maze; the public data are the other two mazes",
    )
    ap.add_argument(
        "--keep-runs-from",
        type=Path,
        help="a results JSON of this script whose runs (same protocol, other seeds) "
        "are tabulated with this invocation's",
    )
    return ap.parse_args(argv)


def base_overrides(args: argparse.Namespace) -> list[str]:
    """The overrides every run of this invocation gets (before its seed, epsilon and
    noise seed): stored as the results JSON's ``overrides``."""
    if args.agents:
        agent_base = [
            f"eval.agents=[{','.join(args.agents)}]",
            f"eval.agent_updates={args.agent_updates}",
            "eval.agent_chunk=1000",
            "eval.final_evals=5",
            "eval.agent_seeds=1",
        ]
    else:
        agent_base = ["eval.agents=[]"]
    return [
        f"data.sensitive_size={args.sensitive_size}",
        "data.public_size=20000",
        "data.holdout_size=2000",
        "synthesis.num_samples=20000",
        *agent_base,
        "eval.mia=false",
        "eval.plots=false",
        "eval.anchors=true",
        "audit.canaries=0",
        *maze_overrides(args.maze),
        *args.overrides,
    ]


def keep_runs(path: Path, args: argparse.Namespace, base: list[str]) -> dict:
    """The results JSON at ``path``, whose ``runs`` are pooled with this
    invocation's; exits with one line unless they ran the same protocol (overrides,
    config, agents and their updates, epsilons) and none of their (seed, epsilon) is
    requested again."""
    saved = json.loads(Path(path).read_text())
    # Files written before the config was recorded ran the default one.
    theirs = {
        "overrides": saved["overrides"],
        "config": saved.get("config", "privorl_n/quickstart"),
        "agents": saved.get("agents", []),
        "agent_updates": saved.get("agent_updates") if args.agents else None,
        "epsilons": sorted({r["epsilon"] for r in saved["runs"]}),
    }
    ours = {
        "overrides": base,
        "config": args.config,
        "agents": list(args.agents),
        "agent_updates": args.agent_updates if args.agents else None,
        "epsilons": sorted(set(args.epsilons)),
    }
    for key, value in theirs.items():
        if value != ours[key]:
            if key == "overrides":  # long lists: name the entries that differ
                value = [v for v in value if v not in base]
                ours[key] = [v for v in base if v not in theirs[key]]
            raise SystemExit(
                f"--keep-runs-from {path}: its {key} {value} differ from this "
                f"invocation's {ours[key]}; seeds are pooled only at one protocol"
            )
    both = sorted(
        (r["seed"], eps_name(r["epsilon"]))
        for r in saved["runs"]
        if r["seed"] in args.seeds and r["epsilon"] in args.epsilons
    )
    if both:
        raise SystemExit(
            f"--keep-runs-from {path}: (seed, eps) {both} are both stored and requested"
        )
    return saved


def pooled(stored: list[dict], runs: list[dict], epsilons: list[float]) -> list[dict]:
    """``stored`` and ``runs`` in the order one invocation over all their seeds lists
    them (by seed, then as in ``epsilons``): the tables do not depend on which seeds
    were stored."""
    return sorted(
        stored + runs, key=lambda r: (r["seed"], epsilons.index(r["epsilon"]))
    )


def tabulate(args: argparse.Namespace, runs: list[dict], out: Path) -> tuple[dict, str]:
    """The tables (JSON payload and Markdown) of ``runs`` (one dict per finished run,
    as stored under ``runs`` in the results JSON), and the plots, written to ``out``
    under ``args.name``."""
    # One anchor value per seed (every run of a seed scores the same pre-trained model
    # and holdout).
    rows: list[tuple[str, float | None, list[dict]]] = []
    first_of_seed = {r["seed"]: r for r in reversed(runs)}
    rows.append(
        (
            PRETRAIN_ROW,
            0.0,
            [r["pretrain_only"] for r in first_of_seed.values()],
        )
    )
    for eps in args.epsilons:
        rows.append(
            (
                f"eps = {eps_name(eps)}",
                eps,
                [r["release"] for r in runs if r["epsilon"] == eps],
            )
        )
    rows.append(
        (HOLDOUT_ROW, None, [r["real_holdout"] for r in first_of_seed.values()])
    )
    pub = MAZES[args.maze][1]
    sigma = {
        eps_name(e): next(
            (r["noise_multiplier"] for r in runs if r["epsilon"] == e), None
        )
        for e in args.epsilons
    }
    setup = (
        f"{MAZES[args.maze][0]} sensitive ({args.sensitive_size} transitions, 2000 "
        "held out), public = "
        + " + ".join(e.split("-")[1] for e in pub)
        + " (20k each), the quickstart's model and fine-tuning (10 epochs, "
        "batch 1024, C = 1, K = 4); "
        "mean ± sample std (ddof = 1) [95% t half-width] over seeds. Noise "
        "multipliers: "
        + ", ".join(f"eps {k}: {v:.3f}" for k, v in sigma.items() if v is not None)
        + "."
    )
    if args.agents:
        payload, md = _agent_tables(args, runs, setup, out)
    else:
        table, lines = metric_table(
            [(name, scores) for name, _, scores in rows], METRICS
        )
        md = "\n".join(
            ["# PrivORL-n: fidelity against epsilon (CPU scale)", "", setup, "", *lines]
        )
        md += "\n"
        payload = {"table": table}
        plot_eps_sweep(rows, table, METRICS, out / f"{args.name}.png")
    return payload, md


def _scores(agents: dict | None) -> dict[str, float] | None:
    """Agent name -> normalised score (mean of the final evaluations), or None when the
    run trained none."""
    if not agents:
        return None
    return {name: res["score_mean"] for name, res in agents.items()}


def _curves(agents: dict | None) -> dict[str, list[list[list[float]]]] | None:
    """Agent name -> per agent seed, its evaluation curve as [update, score] pairs; None
    when the run trained none."""
    if not agents:
        return None
    return {
        name: [
            [[p["step"], p["score_mean"]] for p in s.get("curve", [])]
            for s in res["per_seed"]
        ]
        for name, res in agents.items()
    }


# Evaluations per block of the budget check: the score is the last block's mean.
BUDGET_BLOCK = 5


def budget_gain(curve: list[list[float]], block: int = BUDGET_BLOCK) -> float | None:
    """The score's rise over the run's last ``block`` evaluations: the mean of the last
    ``block`` minus the mean of the ``block`` before (None when the curve is shorter).
    Well above zero, the agent was still learning when the budget ended."""
    if len(curve) < 2 * block:
        return None
    scores = [p[1] for p in curve]
    return sum(scores[-block:]) / block - sum(scores[-2 * block : -block]) / block


def budget_check(runs: list[dict], agents: list[str]) -> tuple[dict, list[str]]:
    """Per agent, the real-data agent's :func:`budget_gain` per data seed (its first
    agent seed's curve: the sweep trains one) and its :func:`summary` over seeds; and
    the Markdown lines (none without stored curves)."""
    out: dict[str, dict] = {}
    for a in agents:
        gains = {}
        for r in runs:
            curves = (r.get("real_curves") or {}).get(a)
            if curves and (g := budget_gain(curves[0])) is not None:
                gains[r["seed"]] = g
        if gains:
            out[a] = {"per_seed": gains} | summary(list(gains.values()))
    if not out:
        return out, []
    lines = [
        f"Is the budget enough? The real-data agent's score over its last "
        f"{BUDGET_BLOCK} evaluations minus the {BUDGET_BLOCK} before (mean [95% t "
        "half-width], per seed); well above zero, it was still learning when the "
        "budget ended:",
        "",
    ]
    for a, g in out.items():
        per = ", ".join(f"{g['per_seed'][s]:+.1f}" for s in sorted(g["per_seed"]))
        half = f" [±{g['ci95']:.1f}]" if g["n"] > 1 else ""
        lines.append(f"- {a}: {g['mean']:+.1f}{half} ({per})")
    return out, lines


def _agent_tables(
    args: argparse.Namespace, runs: list[dict], setup: str, out: Path
) -> tuple[dict, str]:
    """Agent mode's tables (each agent's score beside the fidelity of the same runs,
    and the within-seed differences) and plots; returns the JSON payload and the
    Markdown."""
    agent_metrics = {
        f"agent_{a}": (f"{a.upper()} score ({args.agent_updates} updates)", "higher")
        for a in args.agents
    }
    metrics = agent_metrics | METRICS

    def merged(fid: dict, agents: dict | None) -> dict | None:
        if agents is None:
            return None
        return fid | {f"agent_{a}": agents[a] for a in args.agents}

    # Row name -> seed -> scores; the anchors come from each seed's first run.
    by_row: dict[str, dict[int, dict]] = {}
    eps_of: dict[str, float | None] = {PRETRAIN_ROW: 0.0}
    for r in runs:
        ag = r["agents"]
        if ag["pretrain_only"] is not None:
            by_row.setdefault(PRETRAIN_ROW, {})[r["seed"]] = merged(
                r["pretrain_only"], ag["pretrain_only"]
            )
    for eps in args.epsilons:
        name = f"eps = {eps_name(eps)}"
        eps_of[name] = eps
        for r in runs:
            if r["epsilon"] == eps and r["agents"]["release"] is not None:
                by_row.setdefault(name, {})[r["seed"]] = merged(
                    r["release"], r["agents"]["release"]
                )
    eps_of[REAL_ROW] = None
    for r in runs:
        if r["agents"]["real"] is not None:
            by_row.setdefault(REAL_ROW, {})[r["seed"]] = merged(
                r["real_holdout"], r["agents"]["real"]
            )
    names = [n for n in eps_of if n in by_row]
    rows = [(n, eps_of[n], list(by_row[n].values())) for n in names]
    table, lines = metric_table([(n, sc) for n, _, sc in rows], metrics)

    rel = [f"eps = {eps_name(e)}" for e in args.epsilons]
    steps = [(PRETRAIN_ROW, rel[0]), *zip(rel, rel[1:]), (rel[-1], REAL_ROW)]
    steps += [(PRETRAIN_ROW, r) for r in rel[1:]] + [(PRETRAIN_ROW, REAL_ROW)]
    pairs, pair_lines = paired_rows(by_row, steps, agent_metrics)
    # The fidelity pairs of the same runs, for comparison (releases only).
    fid_pairs, fid_lines = paired_differences(
        [r for r in runs if r["agents"]["release"] is not None],
        list(args.epsilons),
        METRICS,
    )
    per_seed = [
        "| seed | " + " | ".join(names) + " |",
        "|" + "---|" * (1 + len(names)),
    ]
    for seed in sorted({s for n in names for s in by_row[n]}):
        cells = [
            " / ".join(
                f"{by_row[n][seed][k]:.1f}" if seed in by_row[n] else "-"
                for k in agent_metrics
            )
            for n in names
        ]
        per_seed.append(f"| {seed} | " + " | ".join(cells) + " |")
    wall = summary([r["wall_time_s"] for r in runs]) if len(runs) > 1 else None
    budget, budget_lines = budget_check(
        [r for r in runs if r["agents"]["real"] is not None], list(args.agents)
    )
    md = "\n".join(
        [
            "# PrivORL-n: agent scores and fidelity against epsilon (CPU scale)",
            "",
            setup,
            "",
            f"Agents: {', '.join(args.agents)} trained for {args.agent_updates} "
            "updates, score = mean of the last 5 evaluations (one per 1000 updates, 50 "
            "episodes each), one agent seed per row and data seed. "
            f"'{REAL_ROW}': the agent is trained on the sensitive training rows "
            f"({args.sensitive_size}; the 2000 held out are collected beside them); "
            "its fidelity columns are the "
            "real holdout's. Pre-training only and real data come from each seed's "
            "first run.",
            "",
            *lines,
            "",
            "Within-seed differences of the agent score (b - a; mean [95% t "
            "half-width], seeds where it rose):",
            "",
            *pair_lines,
            "",
            "Within-seed differences of the fidelity between successive epsilons "
            "(same runs):",
            "",
            *fid_lines,
            "",
            "Agent scores per seed:",
            "",
            *per_seed,
            "",
            *budget_lines,
            *([""] if budget_lines else []),
            (
                f"Wall time per run: {wall['mean']:.0f} s mean "
                f"({min(r['wall_time_s'] for r in runs):.0f}-"
                f"{max(r['wall_time_s'] for r in runs):.0f} s) over {len(runs)} runs."
                if wall
                else ""
            ),
            "",
        ]
    )
    plot_eps_sweep(
        rows,
        table,
        agent_metrics,
        out / f"{args.name}.png",
        anchors=((PRETRAIN_ROW, "--"), (REAL_ROW, ":")),
    )
    plot_eps_sweep(
        rows,
        table,
        METRICS,
        out / f"{args.name}_fidelity.png",
        anchors=((PRETRAIN_ROW, "--"), (REAL_ROW, ":")),
    )
    payload = {
        "table": table,
        "agent_pairs": pairs,
        "real_data_budget": budget,
        "fidelity_pairs": fid_pairs,
        "agent_updates": args.agent_updates,
        "agents": list(args.agents),
    }
    return payload, md


if __name__ == "__main__":
    main()
