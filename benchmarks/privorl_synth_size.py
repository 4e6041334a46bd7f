"""PrivORL Table XII at CPU scale: PrivORL-n's release size (synthesis.num_samples in
{5k, 50k, 100k, 500k, 1M}) at eps = 10, paired by seed with the stored sweep's
20000-row runs.

The protocol is ``benchmarks/privorl_pld_runs.py``'s (the stored agent sweep's, checked
equal before any run; RDP accountant, noise seeded 1000 + seed, IQL 30k updates on the
release, anchors' agents not retrained) with only ``synthesis.num_samples`` changed.
The pipeline cannot resample a finished run at another size (a rerun may change only
its ``eval`` and ``audit`` sections), so every size fine-tunes again; with the same
seed, noise seed and plan that fine-tune is the sweep's (up to the host's rounding),
and each seed's pre-training is reused from ``privorl_pld_runs.py``'s run of that seed
when it is there. Sampling runs at about 7,000-13,000 transitions/s on one core of the
2-CPU hosts (1M rows in 2 min 20 s), so the largest size costs little more than its
agent.

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        python benchmarks/privorl_synth_size.py --seeds 0 1 2
    python benchmarks/privorl_synth_size.py --tables-only

Runs are seed-major (every size of seed 0 first); writes
``benchmarks/results/privorl_synth_size.{json,md}``, rewritten after every run.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _results import dump_json, load_line, uptime, write_text
from privorl_pld_runs import (
    CONFIG,
    NO_ANCHOR_AGENTS,
    ROOT,
    SWEEP,
    paired_table,
    per_seed_lines,
    run_study,
    wall_line,
)

SIZES = (5000, 50_000, 100_000, 500_000, 1_000_000)


def variants(sizes: list[int]) -> list[tuple[str, list[str]]]:
    """(key, overrides) of each release size."""
    return [(f"n{n}", [f"synthesis.num_samples={n}"]) for n in sizes]


def write_size(
    res: Path, args: argparse.Namespace, runs: list[dict], sweep: dict
) -> str:
    """The size study's results files; returns ``uptime``."""
    load = uptime()
    table, lines, pair_lines, pairs, rows, order = paired_table(
        runs,
        sweep,
        [(f"n{n}", f"{n} rows") for n in args.sizes],
        args.epsilons,
        "20000 rows",
    )
    md = "\n".join(
        [
            "# PrivORL Table XII at CPU scale: PrivORL-n's synthetic data size",
            "",
            "The protocol of `privorl_n_eps_sweep_agents.md` (maze2d-umaze-dense-v1, "
            "20000 training + 2000 holdout transitions, the quickstart's model and "
            "RDP-calibrated fine-tuning, IQL 30000 updates, score = mean of the last 5 "
            "evaluations of one agent seed), noise seeded 1000 + seed; only "
            "`synthesis.num_samples` changes. 20000 rows: the sweep's stored runs of "
            "the same seeds (same sensitive rows, checked on the real holdout). "
            "The sliced Wasserstein compares 2000 rows of each table (the holdout's "
            "size: its floor depends on the sizes); the free-cell share reads every "
            "release row. The stored 20000-row runs were made on another host (same "
            "data, plan and noise bits, not every rounding). Mean ± "
            f"sample std (ddof = 1) [95% t half-width] over seeds; "
            f"{len(runs)} of {len(args.seeds) * len(args.sizes)} runs.",
            "",
            *lines,
            "",
            "Within-seed differences size - 20000 rows (mean [95% t half-width] "
            "(seeds where b is higher / seeds; two-sided paired t-test p)):",
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
            "seeds": sorted({r["seed"] for r in runs}),
            "sizes": list(args.sizes),
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


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_synth_size"))
    ap.add_argument("--pretrain-from", default=str(ROOT / "runs" / "privorl_pld"))
    ap.add_argument("--name", default="privorl_synth_size")
    ap.add_argument("--tables-only", action="store_true")
    args = ap.parse_args()
    args.epsilons = [10.0]

    def pretrain_from(seed: int) -> Path | None:
        run = Path(args.pretrain_from) / f"pld_seed{seed}_eps1"
        return run if (run / "report.json").exists() else None

    run_study(args, variants(args.sizes), write_size, pretrain_from)


if __name__ == "__main__":
    main()
