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

from _results import (  # benchmarks/_results.py
    HOLDOUT_ROW,
    PRETRAIN_ROW,
    dump_json,
    eps_name,
    metric_table,
    plot_eps_sweep,
)

from privrl_jax.pipelines import privorl_n

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, math.inf)
METRICS = {  # key -> (label, better)
    "free_cell_share": ("share in the sensitive maze's free cells", "higher"),
    "sliced_wasserstein": ("sliced Wasserstein to the sensitive rows", "lower"),
    "marginal": ("marginal score (1 - mean KS)", "higher"),
    "correlation": ("correlation score", "higher"),
}


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
            run_dir = Path(args.out) / f"seed{seed}_eps{eps_name(eps)}"
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
                print(f"seed {seed}, eps {eps_name(eps)} -> {run_dir}", flush=True)
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
    table, lines = metric_table([(name, scores) for name, _, scores in rows], METRICS)
    sigma = {
        eps_name(e): next(
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
    plot_eps_sweep(rows, table, METRICS, out / f"{args.name}.png")


if __name__ == "__main__":
    main()
