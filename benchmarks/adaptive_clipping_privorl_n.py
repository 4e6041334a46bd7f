"""Adaptive clipping (issue 50 item 2) on PrivORL-n's DP fine-tuning, at tiny size:
a sweep of fixed clip norms against ``finetune.adaptive_clip_quantile`` at equal
epsilon.

Every run is ``privorl_n/test`` (600 sensitive transitions, a 32-wide 1-block denoiser
pre-trained 40 steps on 800 public rows) with ``finetune.epochs=5`` (94 DP steps,
expected batch 32), no agents, no MIA, no canaries, no anchors, at ``--epsilon``
(RDP, the config's delta). The rows differ only in the clip norm: a fixed C
(``finetune.l2_clip_norm``), or adaptive clipping from C0 = 1 toward the median of the
per-transition gradient norms (``privacy.AdaptiveClipping``, Andrew et al. 2021; the
count's noise is inside the same epsilon). Per seed, the rows share one pre-training
(``pretrain.reuse_from``) and the noise seed ``1000 + seed`` (so labelled not private;
the law of a private run's). Scores: the audit's fidelity of the release against the
sensitive holdout (sliced Wasserstein, lower; marginal score, higher).

The fine-tuning optimizer is Adam, which is invariant to the scale of its input: where
every unit is clipped (C below every norm), the noisy mean is C times a C-free vector,
and every such C gives the same run (to Adam's epsilon). The grid is therefore wide
(0.1 to 1000), so that it reaches the norms.

This is a smoke-scale comparison: at this size the pre-trained model is poor and the
scores are noisy; read the paired differences and their intervals, not the levels.
As in ``adaptive_clipping.py``, choosing the best fixed C reads the private data once
per grid point, unaccounted; the adaptive row is one accounted run.

Usage: python benchmarks/adaptive_clipping_privorl_n.py [--seeds 0 1 2 3 4]
Writes benchmarks/results/adaptive_clipping_privorl_n.{json,md} after every run; runs
go to ``--out`` (a run with a report.json is read, not rerun).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _results import summary, with_stored_runs, write_results

RESULTS = Path(__file__).resolve().parent / "results"
CONFIG = "privorl_n/test"
BASE = [
    "finetune.epochs=5",
    "eval.agents=[]",
    "eval.mia=false",
    "eval.plots=false",
    "audit.canaries=0",
    "eval.anchors=false",
]
SCORES = {"sliced_wasserstein": "lower", "marginal": "higher"}


def row_name(clip: float | None, quantile: float) -> str:
    return f"fixed C = {clip:g}" if clip is not None else f"adaptive q = {quantile:g}"


def one_run(seed, clip, args, out: Path, first: Path | None) -> tuple[Path, dict]:
    """One run (or its stored report): the record the table reads."""
    from privrl_jax.pipelines import privorl_n  # noqa: PLC0415

    name = f"seed{seed}_" + (f"C{clip:g}" if clip is not None else "adaptive")
    run_dir = out / name
    if not (run_dir / "report.json").exists():
        clip_keys = (
            [f"finetune.l2_clip_norm={clip}"]
            if clip is not None
            else [
                f"finetune.l2_clip_norm={args.c0}",
                f"finetune.adaptive_clip_quantile={args.quantile}",
            ]
        )
        cfg = privorl_n.load(
            CONFIG,
            [
                *BASE,
                f"seed={seed}",
                f"privacy.epsilon={args.epsilon}",
                f"privacy.noise_seed={1000 + seed}",
                *clip_keys,
                *([f"pretrain.reuse_from={first}"] if first else []),
            ],
        )
        privorl_n.run(cfg, run_dir)
    rep = json.loads((run_dir / "report.json").read_text())
    audit = json.loads((run_dir / "audit" / "audit.json").read_text())
    final = {} if clip is not None else {"final_clip_norm": final_clip_norm(run_dir)}
    return run_dir, final | {
        "seed": seed,
        "row": row_name(clip, args.quantile),
        "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
        "noise_multiplier": rep["finetune"]["noise_multiplier"],
        "fidelity": {k: audit["fidelity"][k] for k in SCORES},
        "wall_time_s": rep["wall_time_s"],
    }


def final_clip_norm(run_dir: Path) -> float:
    """The clip norm the adaptive run ended with (fit checkpoints it with the state)."""
    import orbax.checkpoint as ocp  # noqa: PLC0415

    dp = run_dir / "checkpoints" / "dp"
    last = max(int(p.name) for p in dp.iterdir() if p.name.isdigit())
    tree = ocp.StandardCheckpointer().restore(dp / str(last) / "default")
    return float(tree["l2_clip_norm"])


def tabulate(runs: list[dict], args) -> tuple[dict, str]:
    rows = [row_name(c, args.quantile) for c in args.clips] + [
        row_name(None, args.quantile)
    ]
    rows = [r for r in rows if any(x["row"] == r for x in runs)]
    table = {
        r: {
            k: summary([x["fidelity"][k] for x in runs if x["row"] == r])
            for k in SCORES
        }
        | {"epsilon": sorted({x["epsilon_spent_rdp"] for x in runs if x["row"] == r})}
        for r in rows
    }
    adaptive = row_name(None, args.quantile)
    lines = [
        "# Adaptive clipping vs fixed clip norms on PrivORL-n fine-tuning (tiny size)",
        "",
        f"`{CONFIG}` + {', '.join(f'`{o}`' for o in BASE)}, epsilon = {args.epsilon} "
        "(RDP), the same noise multiplier in every row; mean ± std [95% t "
        "half-width] over seeds. Adaptive: target quantile "
        f"{args.quantile:g} of the per-transition gradient norms, C0 = {args.c0:g}, "
        "eta_C = 0.2, count noise std = expected batch / 20. Smoke scale: the "
        "levels are those of a 40-step pre-training. Choosing the best fixed C is "
        "not accounted (one private run per grid point); adaptive is one accounted "
        "run. Written by `benchmarks/adaptive_clipping_privorl_n.py`.",
        "",
        "| clip norm | seeds | accounted epsilon | "
        + " | ".join(f"{k} ({v})" for k, v in SCORES.items())
        + " |",
        "|---|---|---|" + "---|" * len(SCORES),
    ]
    for r in rows:
        t = table[r]
        n = next(iter(t[k] for k in SCORES))["n"]
        cells = [
            f"{t[k]['mean']:.4f} ± {t[k]['std']:.4f} [±{t[k]['ci95']:.4f}]"
            for k in SCORES
        ]
        eps = ", ".join(f"{e:.4f}" for e in t["epsilon"])
        lines.append(f"| {r} | {n} | {eps} | " + " | ".join(cells) + " |")
    diffs = {}
    if any(x["row"] == adaptive for x in runs):
        lines += ["", "Adaptive minus each fixed row, paired by seed:", ""]
        for r in rows:
            if r == adaptive:
                continue
            d = {}
            for k in SCORES:
                by_seed = {x["seed"]: x["fidelity"][k] for x in runs if x["row"] == r}
                pairs = [
                    x["fidelity"][k] - by_seed[x["seed"]]
                    for x in runs
                    if x["row"] == adaptive and x["seed"] in by_seed
                ]
                d[k] = summary(pairs)
            diffs[r] = d
            lines.append(
                f"- vs {r}: "
                + "; ".join(
                    f"{k} {d[k]['mean']:+.4f} [±{d[k]['ci95']:.4f}] (n = {d[k]['n']})"
                    for k in SCORES
                )
            )
    finals = [x["final_clip_norm"] for x in runs if "final_clip_norm" in x]
    final = summary(finals) if finals else None
    if final is not None:
        lines += [
            "",
            f"Adaptive's final clip norm: {final['mean']:.3g} ± {final['std']:.3g} "
            f"(n = {final['n']}; from C0 = {args.c0:g}).",
        ]
    payload = {
        "table": table,
        "adaptive_minus_fixed": diffs,
        "adaptive_final_clip_norm": final,
    }
    return payload, "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument(
        "--clips", type=float, nargs="+", default=[0.1, 1.0, 10.0, 100.0, 1000.0]
    )
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--quantile", type=float, default=0.5)
    ap.add_argument("--c0", type=float, default=1.0)
    ap.add_argument("--out", default="/tmp/adaptive_clipping_privorl_n")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args(argv)
    out, res = Path(args.out), Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    res.mkdir(parents=True, exist_ok=True)
    path = res / "adaptive_clipping_privorl_n.json"
    runs: list[dict] = []
    t0 = time.perf_counter()
    for seed in args.seeds:
        first = None
        for clip in [*args.clips, None]:
            run_dir, rec = one_run(seed, clip, args, out, first)
            first = first or run_dir
            runs.append(rec)
            merged = with_stored_runs(path, runs, lambda r: (r["seed"], r["row"]))
            payload, md = tabulate(merged, args)
            payload |= {
                "config": CONFIG,
                "overrides": BASE,
                "args": vars(args),
                "runs": merged,
                "wall_s_this_invocation": time.perf_counter() - t0,
            }
            write_results(res, "adaptive_clipping_privorl_n", payload, md)
            print(md, flush=True)


if __name__ == "__main__":
    main()
