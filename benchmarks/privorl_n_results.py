"""PrivORL-n results on maze2d-umaze: privacy levels, ablations and seeds, side by side.

Each variant is the quickstart config plus overrides, run into its own directory under
``--out`` (reruns resume and skip finished variants). Prints a Markdown table and writes
``benchmarks/results/privorl_n_results.{json,md}``.

    python benchmarks/privorl_n_results.py                       # eps in {1, 10, inf},
    ablations, seed 0 python benchmarks/privorl_n_results.py --seeds 0 1 2 --variants
    eps10 dpdm_no_pretrain

Agents on the real data are trained once per seed (in the ``eps10`` run, which always
runs) and their score is shown on every row of that seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax.pipelines import privorl_n

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "eps1": ["privacy.epsilon=1.0"],
    "eps10": ["privacy.epsilon=10.0"],
    "eps_inf": ["privacy.epsilon=inf"],
    # Ablations at eps = 10 (PrivORL Sec. VIII-B / Fig. 4).
    "dpdm_no_pretrain": ["privacy.epsilon=10.0", "pretrain.steps=0"],
    "pdp_no_curiosity": ["privacy.epsilon=10.0", "pretrain.curiosity_rate=0.0"],
    "finecur": ["privacy.epsilon=10.0", "finetune.curiosity_rate=0.3"],
}
# Agents on the real sensitive data do not depend on the variant: trained once per seed,
# in this one.
REAL_AGENTS_IN = "eps10"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument(
        "--config", default=str(ROOT / "configs" / "privorl_n" / "quickstart.yaml")
    )
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_n_results"))
    ap.add_argument(
        "--set",
        dest="overrides",
        nargs="*",
        default=[],
        help="extra overrides for every run",
    )
    ap.add_argument(
        "--finished-only",
        action="store_true",
        help="tabulate finished runs; start none",
    )
    ap.add_argument(
        "--name",
        default="privorl_n_results",
        help="results file stem under benchmarks/results/",
    )
    args = ap.parse_args()

    def report(variant: str, seed: int) -> dict:
        run_dir = Path(args.out) / f"{variant}_seed{seed}"
        real = "true" if variant == REAL_AGENTS_IN else "false"
        overrides = [
            *VARIANTS[variant],
            f"seed={seed}",
            f"eval.train_real_agents={real}",
            *args.overrides,
        ]
        cfg = privorl_n.load(args.config, overrides)
        done = run_dir / "report.json"
        if done.exists():
            rep = json.loads(done.read_text())
            # The audit (real-data agents, fidelity, MIA) lives apart from the release.
            audit = run_dir / "audit" / "audit.json"
            rep["audit"] = json.loads(audit.read_text()) if audit.exists() else {}
            # A run finished under another eval protocol is re-audited: its release is
            # reused.
            if args.finished_only or rep["config"] == privorl_n.to_dict(cfg):
                return rep
        if args.finished_only:
            return {}
        return privorl_n.run(cfg, run_dir)

    rows = []
    # Seed-major, so an interrupted sweep has whole seeds; per seed the reference runs
    # first, so every variant's row can show the same seed's real-data score.
    for seed in args.seeds:
        reals = report(REAL_AGENTS_IN, seed).get("audit", {}).get("agents_real", {})
        for variant in args.variants:
            rep = report(variant, seed)
            audit = rep.get("audit", {})
            for algo, syn in rep.get("agents_synthetic", {}).items():
                real = reals.get(algo, {})
                rows.append(
                    {
                        "variant": variant,
                        "seed": seed,
                        "algo": algo,
                        "epsilon_rdp": rep["privacy"].get("rdp", {}).get("epsilon"),
                        "synthetic_score": syn.get("score_mean"),
                        "real_score": real.get("score_mean"),
                        "marginal": audit["fidelity"]["marginal"],
                        "correlation": audit["fidelity"]["correlation"],
                        "mia_tpr_at_10_fpr": audit.get("mia", {}).get("tpr_at_10_fpr"),
                        "mia_tpr_at_1_fpr": audit.get("mia", {}).get("tpr_at_1_fpr"),
                        "mia_auc": audit.get("mia", {}).get("auc"),
                        "wall_time_s": rep["wall_time_s"],
                    }
                )

    lines = [
        "| variant | algo | seeds | eps spent (RDP) | synthetic score | real score | "
        "syn/real | marginal | correlation | MIA TPR@10%FPR | MIA TPR@1%FPR | MIA AUC "
        "|",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in args.variants:
        for algo in sorted({r["algo"] for r in rows if r["variant"] == variant}):
            rs = [r for r in rows if r["variant"] == variant and r["algo"] == algo]
            syn = np.array([r["synthetic_score"] for r in rs], float)
            real = np.array([r["real_score"] for r in rs], float)
            mean = lambda k: (
                np.mean([r[k] for r in rs if r[k] is not None])
                if any(r[k] is not None for r in rs)
                else float("nan")
            )  # noqa: E731
            lines.append(
                f"| {variant} | {algo} | {len(rs)} | {mean('epsilon_rdp'):.2f} | "
                f"{syn.mean():.1f} ± {syn.std(ddof=1):.1f} | "
                f"{real.mean():.1f} ± {real.std(ddof=1):.1f} | "
                f"{syn.mean() / real.mean():.2f} | {mean('marginal'):.3f} | "
                f"{mean('correlation'):.3f} | {mean('mia_tpr_at_10_fpr'):.3f} | "
                f"{mean('mia_tpr_at_1_fpr'):.3f} | {mean('mia_auc'):.3f} |"
            )
    table = "\n".join(lines)
    # Per seed, so the spread of the ratio is visible next to the mean's ratio.
    per_seed = [
        f"- {r['variant']} {r['algo']} seed {r['seed']}: synthetic "
        f"{r['synthetic_score']:.1f} / real "
        f"{r['real_score']:.1f} = {r['synthetic_score'] / r['real_score']:.2f}"
        for r in rows
        if r["synthetic_score"] is not None and r["real_score"]
    ]
    table += "\n\nPer seed (syn / real):\n\n" + "\n".join(per_seed)
    print(table)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    dump_json(out / f"{args.name}.json", rows, indent=2)
    (out / f"{args.name}.md").write_text(
        f"# PrivORL-n on maze2d-umaze (quickstart scale)\n\n{table}\n"
    )


if __name__ == "__main__":
    main()
