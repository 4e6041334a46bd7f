"""PATE-GAN and PrePATE-GAN (PrivORL Table I's GAN baselines) beside PGM at CPU scale:
the same sensitive data, split, budget and fidelity metrics as
``_results.data_files``.

Each seed's data are those of ``_results.data_files`` (and so of
``privorl_n_eps_sweep.py``): maze2d-umaze-dense-v1, 20k sensitive transitions + 2k
holdout, public medium + large (20k each: the normaliser and PrePATE-GAN's pre-training
read them). The PGM rows are read from ``results/marginal_baselines_delta.json`` (PGM
with s' - s binned on its public one-step bound) for the same seeds when it holds them.
The noise is seeded (``privacy.noise_seed = 1000 + seed``), so the runs are labelled not
private; their noise has the law of a private run's.

    python benchmarks/pategan_baselines.py --seeds 0

Writes ``benchmarks/results/pategan_baselines.{json,md}``; runs go to ``--out``
(finished runs are reused; the data files are shared with ``_results.data_files``'s
default ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from _results import data_files as _data_files  # noqa: E402  (benchmarks/)
from _results import (  # noqa: E402  (benchmarks/_results.py)
    dump_json,
    fidelity_metrics,
    metric_table,
    uptime,
)

from privrl_jax.pipelines import pategan

ROOT = Path(__file__).resolve().parents[1]
METRICS = fidelity_metrics("rows")
CONFIGS = {"pategan": "pategan/umaze", "pategan_pretrained": "pategan/umaze_pretrained"}
LABELS = {"pategan": "PATE-GAN", "pategan_pretrained": "PrePATE-GAN"}


def _pgm_rows(seeds: list[int], epsilons: list[float]) -> list[tuple[str, list[dict]]]:
    path = ROOT / "benchmarks" / "results" / "marginal_baselines_delta.json"
    if not path.exists():
        return []
    runs = json.loads(path.read_text())["runs"]
    return [
        (
            f"PGM (s' - s bins) eps = {e:g} (marginal_baselines_delta)",
            [
                r["release"]
                for r in runs
                if r["model"] == "pgm" and r["epsilon"] == e and r["seed"] in seeds
            ],
        )
        for e in epsilons
    ]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--models", nargs="+", default=list(CONFIGS))
    ap.add_argument("--out", default=str(ROOT / "runs" / "marginal_baselines"))
    ap.add_argument("--set", dest="overrides", nargs="*", default=[])
    ap.add_argument("--name", default="pategan_baselines")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    runs = []
    for seed in args.seeds:
        sens, pub = _data_files(out, seed)
        for model in args.models:
            for eps in args.epsilons:
                run_dir = out / f"{model}_seed{seed}_eps{eps:g}"
                if (run_dir / "report.json").exists():
                    rep = json.loads((run_dir / "report.json").read_text())
                    rep["audit"] = json.loads(
                        (run_dir / "audit" / "audit.json").read_text()
                    )
                else:
                    cfg = pategan.load(
                        CONFIGS[model],
                        [
                            f"seed={seed}",
                            f"privacy.epsilon={eps}",
                            f"privacy.noise_seed={1000 + seed}",
                            f"data.sensitive_file={sens}",
                            f"data.public_files=[{pub}]",
                            *args.overrides,
                        ],
                    )
                    print(f"{model} seed {seed} eps {eps:g} -> {run_dir}", flush=True)
                    rep = pategan.run(cfg, run_dir)
                fin = rep["finetune"]
                runs.append(
                    {
                        "model": model,
                        "seed": seed,
                        "epsilon": eps,
                        "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
                        "noise_multiplier": fin["noise_multiplier"],
                        "num_teachers": fin["num_teachers"],
                        "queries": fin["steps"],
                        "last_round": fin.get("last_round"),
                        "release": rep["audit"]["fidelity"],
                        "real_holdout": rep["audit"]["anchors"]["real_holdout"],
                        "wall_time_s": rep["wall_time_s"],
                    }
                )

    rows = [
        (
            f"{LABELS[m]} eps = {e:g}",
            [r["release"] for r in runs if (r["model"], r["epsilon"]) == (m, e)],
        )
        for m in args.models
        for e in args.epsilons
    ]
    rows += _pgm_rows(args.seeds, args.epsilons)
    first = {r["seed"]: r for r in runs}
    rows.append(("real holdout", [r["real_holdout"] for r in first.values()]))
    table, lines = metric_table(rows, METRICS)
    sigma = {
        f"{e:g}": next(r["noise_multiplier"] for r in runs if r["epsilon"] == e)
        for e in args.epsilons
    }
    r0 = runs[0]
    load = uptime()
    md = "\n".join(
        [
            "# PATE-GAN / PrePATE-GAN beside PGM: fidelity at epsilon 1 and 10 (CPU "
            "scale)",
            "",
            "maze2d-umaze-dense-v1 sensitive (20000 transitions, 2000 held out), the "
            "data of `marginal_baselines.md` for the same seeds. "
            f"{r0['num_teachers']} teachers, {r0['queries']} Gaussian vote queries "
            "accounted data-independently; vote-count noise std: "
            + ", ".join(f"eps {k}: {v:.1f}" for k, v in sigma.items())
            + f" (majority threshold {r0['num_teachers'] / 2:g}). 20000 rows sampled. "
            "Mean ± sample std (ddof = 1) [95% t half-width] over seeds."
            + (
                f" Overrides of every run: `{' '.join(args.overrides)}`."
                if args.overrides
                else ""
            ),
            "",
            *lines,
            "",
            f"Wall time {time.time() - t0:.0f} s for the runs not reused; `uptime` at "
            f"the end: {load}; {os.cpu_count()} CPUs.",
            "",
        ]
    )
    print(md)
    res = ROOT / "benchmarks" / "results"
    res.mkdir(parents=True, exist_ok=True)
    dump_json(
        res / f"{args.name}.json",
        {"runs": runs, "table": table, "overrides": args.overrides, "uptime": load},
        indent=2,
    )
    (res / f"{args.name}.md").write_text(md)
    assert all(
        math.isfinite(r["epsilon_spent_rdp"])
        and r["epsilon_spent_rdp"] <= r["epsilon"] * (1 + 1e-9)
        for r in runs
    ), "a run spent more than its budget"


if __name__ == "__main__":
    main()
