"""Membership inference that can see a leak: PrivORL-n on a configuration that
memorises.

The loss-threshold attack (Matsumoto et al. 2023: the denoiser's loss at several noise
levels, the best level reported) on ``privorl_n/mia`` (200 sensitive transitions, no
pre-training, 300 epochs) at epsilon = 1, 10 and inf: members are the 200 training
transitions, non-members 200 held-out ones from the same task. At epsilon = inf the
model memorises and the attack must clearly beat chance (TPR at 1% FPR well above 0.01);
DP must bring it back towards chance.

Usage: ``python benchmarks/mia_memorise.py [--seeds 0] [--epsilons 1 10 inf] [--out
runs/mia]`` (about 5 minutes per run on 2 cores; a finished run directory is re-audited,
not retrained); writes benchmarks/results/mia_memorise.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from _results import dump_json, write_text  # noqa: E402  (benchmarks/_results.py)

from privrl_jax.pipelines import privorl_n

RESULTS = Path(__file__).resolve().parent / "results"
EPSILONS = (1.0, 10.0, math.inf)


def _mean_sd(xs: list[float]) -> str:
    import statistics  # noqa: PLC0415

    return (
        f"{statistics.mean(xs):.3f} ± {statistics.stdev(xs):.3f}"
        if len(xs) > 1
        else f"{xs[0]:.3f}"
    )


def _distance_attack(cfg, run_dir: Path) -> dict:
    """The audit's black-box attack on a finished run: distance from the first
    ``eval.mia_size``
    members and holdout rows to the closest row of its ``synthetic.hdf5``, in the public
    normaliser's scale (the same data, split and encoding as the run: fixed by its
    seed)."""
    from privrl_jax import data  # noqa: PLC0415
    from privrl_jax import eval as evaluation  # noqa: PLC0415

    public, members, holdout = privorl_n.load_data(cfg)
    # build_task refuses public and member data of other observation or action
    # dimensions (a ValueError), as the run does.
    task = privorl_n.build_task(cfg, public, members)
    x = lambda t: task.normalise(task.encode(t))  # noqa: E731
    syn = x(data.load_hdf5(run_dir / "synthetic.hdf5"))
    k = min(cfg.eval.mia_size, len(holdout), len(members))
    return evaluation.mia_metrics(
        evaluation.distance_to_closest_record_scores(x(members)[:k], syn),
        evaluation.distance_to_closest_record_scores(x(holdout)[:k], syn),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--out", default="runs/mia")
    ap.add_argument(
        "--tables-only",
        action="store_true",
        help="tabulate the finished runs under --out without running anything",
    )
    args = ap.parse_args()
    rows = []
    for seed in args.seeds:
        for eps in args.epsilons:
            run_dir = Path(args.out) / f"eps{eps:g}_s{seed}"
            cfg = privorl_n.load(
                "privorl_n/mia",
                [
                    f"privacy.epsilon={'.inf' if eps == math.inf else eps}",
                    f"seed={seed}",
                ],
            )
            if not args.tables_only:
                privorl_n.run(cfg, run_dir)
            elif not (run_dir / "audit" / "audit.json").exists():
                continue
            audit = json.loads((run_dir / "audit" / "audit.json").read_text())
            # Runs audited before the distance attack existed get it here, as the audit
            # computes it.
            dist = {
                f"distance_{k}": v
                for k, v in (
                    audit.get("mia_distance") or _distance_attack(cfg, run_dir)
                ).items()
            }
            rows.append({"epsilon": eps, "seed": seed, **audit["mia"], **dist})
            print(rows[-1], flush=True)
    lines = [
        "| epsilon | seed | AUC | TPR @ 10% FPR | TPR @ 1% FPR | best noise level |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['epsilon']:g} | {r['seed']} | {r['auc']:.3f} | "
            f"{r['tpr_at_10_fpr']:.3f} | "
            f"{r['tpr_at_1_fpr']:.3f} | {r.get('best_sigma', '-')} |"
        )
    summary = [
        "",
        "| attack | epsilon | seeds | AUC | TPR @ 10% FPR | TPR @ 1% FPR |",
        "|---|---|---|---|---|---|",
    ]
    for attack, pre in (
        ("loss threshold (white-box denoiser)", ""),
        ("distance to closest synthetic row (black-box)", "distance_"),
    ):
        for eps in sorted({r["epsilon"] for r in rows}):
            rs = [r for r in rows if r["epsilon"] == eps and f"{pre}auc" in r]
            if not rs:
                continue
            cell = lambda k: _mean_sd([r[pre + k] for r in rs])  # noqa: E731
            summary.append(
                f"| {attack} | {eps:g} | {len(rs)} | {cell('auc')} | "
                f"{cell('tpr_at_10_fpr')} | "
                f"{cell('tpr_at_1_fpr')} |"
            )
    text = (
        "# MIA on a memorising PrivORL-n (privorl_n/mia: 200 members, 200 "
        "non-members)\n\n"
        "Per-seed rows: the loss-threshold attack.\n\n"
        + "\n".join(lines)
        + "\n"
        + "\n".join(summary)
        + "\n\nMean ± sample std (ddof = 1) over seeds. "
        "Chance: AUC 0.5, TPR @ 10% FPR 0.10, "
        "TPR @ 1% FPR 0.01"
        " (the best of six noise levels, chosen on the same candidates, sits above "
        "that).\n"
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    dump_json(
        RESULTS / "mia_memorise.json",
        {"rows": rows},
        ran=not args.tables_only,
        indent=1,
    )
    write_text(RESULTS / "mia_memorise.md", text)


if __name__ == "__main__":
    main()
