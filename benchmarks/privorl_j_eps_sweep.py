"""PrivORL-j's privacy-utility curve at CPU scale: fidelity of the synthetic
trajectories to the sensitive task against epsilon, with the anchors that show whether
the measurement can see the DP fine-tuning at all (the PrivORL-n protocol of
``privorl_n_eps_sweep.py``, for the trajectory-level pipeline).

Rows:

- **pre-training only** (PrivORL Table IV): trajectories sampled, with the release's
  sampler, key and size, from the publicly pre-trained model before any DP step
  (epsilon = 0: it read no sensitive trajectory);
- **epsilon in {0.5, 1, 2, 5, 10, inf}**: the release after trajectory-level DP
  fine-tuning (inf: no noise);
- **real holdout**: the sensitive trajectories never trained on (another sample of the
  sensitive law: the floor).

Metrics (audit: they read the sensitive steps): the share of positions in the sensitive
maze's free cells (real data 1.0), the sliced Wasserstein distance to the sensitive
steps in the public normaliser's scale (every set compared on as many steps as the
holdout has), the KS marginal / correlation scores, and TrajScore F1 (windows of H
steps, the run's encoder fitted on public windows). Mean, sample std (ddof = 1) and a
95% Student-t interval over seeds, and the within-seed differences between successive
epsilons. Every seed has its own data, pre-training and noise; each seed pre-trains
once, in its first run, and its other epsilons copy that finished public pre-training
(``privorl_j_results.reuse_pretrain``: it reads no sensitive data and its randomness is
the public seed, so it is the one every epsilon would train). The DP noise is seeded
(``privacy.noise_seed``) so the table reproduces: those runs are labelled not private,
and their noise has the law of a private run's. No agents are trained: on the -v1 umaze
IQL learns from real data only after ~15k updates (benchmarks/README.md), and agents on
7 rows x 5 seeds are hours on 2 cores.

    python benchmarks/privorl_j_eps_sweep.py --seeds 0 1 2 3 4
    python benchmarks/privorl_j_eps_sweep.py --tables-only      # tabulate finished runs

Writes ``benchmarks/results/privorl_j_eps_sweep.{json,md,png}``; runs go to ``--out``
(resumable: a finished run directory of the same config is reused).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _results import (  # benchmarks/_results.py
    HOLDOUT_ROW,
    PRETRAIN_ROW,
    SWEEP_EPSILONS,
    dump_json,
    eps_name,
    fidelity_metrics,
    metric_table,
    paired_differences,
    plot_eps_sweep,
    write_text,
)
from privorl_j_results import reuse_pretrain

from privrl_jax.pipelines import privorl_j, qualify_config, to_dict

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = SWEEP_EPSILONS
METRICS = {**fidelity_metrics("steps"), "trajscore_f1": ("TrajScore F1", "higher")}


def _load_finished(run_dir: Path, cfg: privorl_j.PrivORLJConfig) -> dict | None:
    """The report (with its audit) of a finished run of ``cfg`` in ``run_dir``, else
    None."""
    done = run_dir / "report.json"
    if not done.exists():
        return None
    rep = json.loads(done.read_text())
    if rep["config"] != to_dict(cfg):
        return None  # the pipeline re-audits (eval changed) or refuses (else)
    rep["audit"] = json.loads((run_dir / "audit" / "audit.json").read_text())
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--config", default="privorl_j/cpu")
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_j_eps_sweep"))
    ap.add_argument(
        "--set",
        dest="overrides",
        nargs="*",
        default=[],
        help="extra overrides for every run (written into the results file)",
    )
    ap.add_argument(
        "--tables-only", action="store_true", help="tabulate finished runs; start none"
    )
    ap.add_argument("--name", default="privorl_j_eps_sweep")
    args = ap.parse_args()
    source = qualify_config(args.config, "privorl_j")
    base = ["eval.agents=[]", "eval.anchors=true", *args.overrides]

    runs: list[dict] = []
    cfg = None
    for seed in args.seeds:
        for eps in args.epsilons:
            run_dir = Path(args.out) / f"seed{seed}_eps{eps_name(eps)}"
            cfg = privorl_j.load(
                source,
                [
                    *base,
                    f"seed={seed}",
                    f"privacy.epsilon={eps}",
                    f"privacy.noise_seed={1000 + seed}",
                ],
            )
            rep = _load_finished(run_dir, cfg)
            if rep is None and args.tables_only:
                continue
            if rep is None:
                if not (run_dir / "checkpoints" / "pretrain").exists():
                    reuse_pretrain(
                        run_dir, Path(args.out).glob(f"seed{seed}_eps*"), cfg
                    )
                print(f"seed {seed}, eps {eps_name(eps)} -> {run_dir}", flush=True)
                t = time.time()
                rep = privorl_j.run(cfg, run_dir)
                print(
                    f"seed {seed}, eps {eps_name(eps)}: {time.time() - t:.0f} s",
                    flush=True,
                )
            audit = rep["audit"]
            runs.append(
                {
                    "seed": seed,
                    "epsilon": eps,
                    "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
                    "noise_multiplier": rep["finetune"]["noise_multiplier"],
                    "steps": rep["finetune"]["steps"],
                    "release": audit["fidelity"]
                    | {"trajscore_f1": audit["trajscore"]["f1"]},
                    "pretrain_only": audit["anchors"]["pretrain_only"],
                    "real_holdout": audit["anchors"]["real_holdout"],
                    "wall_time_s": rep["wall_time_s"],
                }
            )
    if cfg is None or not runs:
        print("no finished run")
        return

    # One anchor value per seed (every run of a seed scores the same pre-trained model
    # and holdout).
    first_of_seed = {r["seed"]: r for r in reversed(runs)}
    rows: list[tuple[str, float | None, list[dict]]] = [
        (PRETRAIN_ROW, 0.0, [r["pretrain_only"] for r in first_of_seed.values()]),
        *[
            (
                f"eps = {eps_name(eps)}",
                eps,
                [r["release"] for r in runs if r["epsilon"] == eps],
            )
            for eps in args.epsilons
        ],
        (HOLDOUT_ROW, None, [r["real_holdout"] for r in first_of_seed.values()]),
    ]
    table, lines = metric_table([(name, s) for name, _, s in rows], METRICS)
    paired, paired_lines = paired_differences(runs, list(args.epsilons), METRICS)
    sigma = {
        eps_name(e): next(
            (r["noise_multiplier"] for r in runs if r["epsilon"] == e), None
        )
        for e in args.epsilons
    }
    steps = sorted({r["steps"] for r in runs})
    d, pc, fc, sc = cfg.data, cfg.pretrain, cfg.finetune, cfg.synthesis
    md = "\n".join(
        [
            "# PrivORL-j: fidelity against epsilon (CPU scale)",
            "",
            f"`{args.config}` with {' '.join(f'`{o}`' for o in base)}: sensitive "
            f"{d.sensitive_env} ({d.sensitive_size} transitions, "
            f"{d.holdout_trajectories} trajectories held out), public "
            f"{' + '.join(d.public_envs)} ({d.public_size} each); H = {d.horizon}, at "
            f"most {d.max_fragments} fragments; {pc.steps} public pre-training steps; "
            f"trajectory-level DP-SGD, {fc.epochs:g} epochs of {fc.batch_size} "
            "expected "
            f"trajectories ({'/'.join(map(str, steps))} steps), delta = "
            f"{cfg.privacy.delta:g}; {sc.num_trajectories} synthetic trajectories of "
            f"{sc.episode_length} steps. Mean ± sample std (ddof = 1) [95% t "
            "half-width] over seeds. Noise multipliers: "
            + ", ".join(f"eps {k}: {v:.3f}" for k, v in sigma.items() if v is not None)
            + ".",
            "",
            *lines,
            "",
            "Within-seed differences between successive epsilons (later minus "
            "earlier): mean [95% t half-width], seeds where it rose.",
            "",
            *paired_lines,
            "",
        ]
    )
    print(md)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    dump_json(
        out / f"{args.name}.json",
        {
            "config": args.config,
            "overrides": base,
            "runs": runs,
            "table": table,
            "paired_differences": paired,
        },
        ran=not args.tables_only,
        indent=2,
    )
    write_text(out / f"{args.name}.md", md)
    plot_eps_sweep(rows, table, METRICS, out / f"{args.name}.png")


if __name__ == "__main__":
    main()
