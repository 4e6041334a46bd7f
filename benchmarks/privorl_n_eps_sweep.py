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
the law of a private run's. No agents are trained here: on the -v1 umaze IQL learns from
real data only after ~15k updates (benchmarks/README.md), an agent sweep at that budget
is hours on 2 cores.

    python benchmarks/privorl_n_eps_sweep.py --seeds 0 1 2 3 4
    python benchmarks/privorl_n_eps_sweep.py --tables-only      # tabulate finished runs

Writes ``benchmarks/results/privorl_n_eps_sweep.{json,md,png}``; runs go to ``--out``
(resumable).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import scipy.stats
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax.pipelines import privorl_n

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
METRICS = {  # key -> (label, better)
    "free_cell_share": ("share in the sensitive maze's free cells", "higher"),
    "sliced_wasserstein": ("sliced Wasserstein to the sensitive rows", "lower"),
    "marginal": ("marginal score (1 - mean KS)", "higher"),
    "correlation": ("correlation score", "higher"),
}


def summary(values: list[float]) -> dict[str, float]:
    """Mean, sample std (ddof = 1) and the 95% Student-t interval's half-width over
    seeds."""
    v = np.asarray(values, np.float64)
    n = v.size
    sd = float(v.std(ddof=1)) if n > 1 else float("nan")
    half = (
        float(scipy.stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n))
        if n > 1
        else float("nan")
    )
    return {"n": n, "mean": float(v.mean()), "std": sd, "ci95": half}


def metric_table(
    rows: list[tuple[str, list[dict]]],
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Per row, the :func:`summary` of each of :data:`METRICS` over its seeds' scores, and
    the Markdown table of them (rows without scores are left out)."""
    table = {
        name: {k: summary([s[k] for s in scores]) for k in METRICS}
        for name, scores in rows
        if scores
    }
    head = (
        "| row | seeds | "
        + " | ".join(f"{label} ({better})" for label, better in METRICS.values())
        + " |"
    )
    lines = [head, "|" + "---|" * (2 + len(METRICS))]
    for name, stats in table.items():
        cells = [
            f"{s['mean']:.3f} ± {s['std']:.3f} [±{s['ci95']:.3f}]"
            for s in stats.values()
        ]
        lines.append(
            f"| {name} | {next(iter(stats.values()))['n']} | "
            + " | ".join(cells)
            + " |"
        )
    return table, lines


def _eps_name(eps: float) -> str:
    return "inf" if math.isinf(eps) else f"{eps:g}"


def main() -> None:
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
    args = ap.parse_args()
    base = [
        f"data.sensitive_size={args.sensitive_size}",
        "data.public_size=20000",
        "data.holdout_size=2000",
        "synthesis.num_samples=20000",
        "eval.agents=[]",
        "eval.mia=false",
        "eval.plots=false",
        "eval.anchors=true",
        "audit.canaries=0",
        *args.overrides,
    ]

    runs: list[dict] = []
    for seed in args.seeds:
        first = None
        for eps in args.epsilons:
            run_dir = Path(args.out) / f"seed{seed}_eps{_eps_name(eps)}"
            reuse = [] if first is None else [f"pretrain.reuse_from={first}"]
            cfg = privorl_n.load(
                args.config,
                [
                    *base,
                    f"seed={seed}",
                    f"privacy.epsilon={eps}",
                    f"privacy.noise_seed={1000 + seed}",
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
                print(f"seed {seed}, eps {_eps_name(eps)} -> {run_dir}", flush=True)
                rep = privorl_n.run(cfg, run_dir)
            first = first or run_dir
            audit = rep["audit"]
            runs.append(
                {
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
            )

    # One anchor value per seed (every run of a seed scores the same pre-trained model
    # and holdout).
    rows: list[tuple[str, float | None, list[dict]]] = []
    first_of_seed = {r["seed"]: r for r in reversed(runs)}
    rows.append(
        (
            "pre-training only (Table IV)",
            0.0,
            [r["pretrain_only"] for r in first_of_seed.values()],
        )
    )
    for eps in args.epsilons:
        rows.append(
            (
                f"eps = {_eps_name(eps)}",
                eps,
                [r["release"] for r in runs if r["epsilon"] == eps],
            )
        )
    rows.append(
        ("real holdout", None, [r["real_holdout"] for r in first_of_seed.values()])
    )
    table, lines = metric_table([(name, scores) for name, _, scores in rows])
    sigma = {
        _eps_name(e): next(
            (r["noise_multiplier"] for r in runs if r["epsilon"] == e), None
        )
        for e in args.epsilons
    }
    md = "\n".join(
        [
            "# PrivORL-n: fidelity against epsilon (CPU scale)",
            "",
            f"maze2d-umaze-dense-v1 sensitive ({args.sensitive_size} transitions, 2000 "
            "held out), public = medium + "
            "large (20k each), the quickstart's model and fine-tuning (10 epochs, "
            "batch 1024, C = 1, K = 4); "
            "mean ± sample std (ddof = 1) [95% t half-width] over seeds. Noise "
            "multipliers: "
            + ", ".join(f"eps {k}: {v:.3f}" for k, v in sigma.items() if v is not None)
            + ".",
            "",
            *lines,
            "",
        ]
    )
    print(md)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    dump_json(
        out / f"{args.name}.json",
        {"runs": runs, "table": table, "overrides": base},
        indent=2,
    )
    (out / f"{args.name}.md").write_text(md)
    _plot(rows, table, out / f"{args.name}.png")


def _plot(rows, table, path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    finite = [e for _, e, _ in rows if e not in (None, 0.0) and not math.isinf(e)]
    inf_x = (
        max(finite) * 4 if finite else 1.0
    )  # eps = inf drawn one step right of the largest eps
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.4))
    for ax, (key, (label, better)) in zip(axes, METRICS.items()):
        xs, ms, cs = [], [], []
        for name, eps, _ in rows:
            if name not in table or eps in (None, 0.0):
                continue
            xs.append(inf_x if math.isinf(eps) else eps)
            ms.append(table[name][key]["mean"])
            cs.append(table[name][key]["ci95"])
        ax.errorbar(xs, ms, yerr=cs, marker="o", capsize=3, label="release (95% CI)")
        for name, style in (
            ("pre-training only (Table IV)", "--"),
            ("real holdout", ":"),
        ):
            if name in table:
                s = table[name][key]
                ax.axhline(s["mean"], ls=style, color="gray", label=name)
                ax.axhspan(
                    s["mean"] - s["ci95"],
                    s["mean"] + s["ci95"],
                    color="gray",
                    alpha=0.15,
                )
        ax.set_xscale("log")
        ax.set_xticks(xs, [("inf" if x == inf_x else f"{x:g}") for x in xs])
        ax.set_xlabel("epsilon")
        ax.set_title(f"{label}\n({better} is better)", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
