"""PGM, MST and AIM (PrivORL Table I's marginal-based baselines, through mbi) beside
PrivORL-n's epsilon sweep at CPU scale: the same sensitive data, split, budget and
fidelity metrics.

Each seed's data are exactly those of ``benchmarks/privorl_n_eps_sweep.py`` for that
seed: maze2d- umaze-dense-v1, 20k sensitive transitions + 2k holdout collected with key
``1000 * seed``, public medium + large (20k each; read only by the audit's normaliser).
They are collected once per seed into ``--out`` and given to every run as files (the
holdout split is the same function of the seed). Metrics (audit, they read the sensitive
rows): share of positions in the sensitive maze's free cells, sliced Wasserstein
distance in the public normaliser's scale, KS marginal and correlation scores; mean,
sample std (ddof = 1) and 95% Student-t half-width over seeds. The noise is seeded
(``privacy.noise_seed = 1000 + seed``, as in the PrivORL-n sweep), so the runs are
labelled not private; their noise has the law of a private run's.

    python benchmarks/marginal_baselines.py --seeds 0 1 2
    python benchmarks/marginal_baselines.py --seeds 0 1 2 --models aim \
        --name marginal_baselines_aim

Needs the baselines extra (``pip install -e ".[baselines]"``). Writes
``benchmarks/results/marginal_baselines.{json,md}``; runs go to ``--out`` (finished runs
are reused).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import jax
import numpy as np
from _results import (  # noqa: E402  (benchmarks/_results.py)
    dump_json,
    fidelity_metrics,
    maze_overrides,
    metric_table,
    uptime,
)

from privrl_jax import data
from privrl_jax.pipelines import marginal
from privrl_jax.pipelines.privorl_n import collect_transitions

ROOT = Path(__file__).resolve().parents[1]
METRICS = fidelity_metrics("rows")
RELEASES = {  # how each model spends the rho of the calibrated Gaussian
    "pgm": "PGM: 23 marginals in one release",
    "mst": "MST: three releases sharing rho in thirds",
    "aim": "AIM: the 1-way marginals, then rounds of an exponential-mechanism "
    "selection and a Gaussian measurement, the last spending the rho left",
    "privsyn": "PrivSyn: its DenseMarg releases",
}


def _data_files(out: Path, seed: int, maze: str = "umaze") -> tuple[Path, Path]:
    """The seed's sensitive (members + holdout) and public transitions, as the pipelines
    collect them, with ``maze`` (a key of ``_results.MAZES``) the sensitive task."""
    cfg = marginal.load("marginal/pgm_umaze", [f"seed={seed}", *maze_overrides(maze)])
    d = cfg.data
    tag = "" if maze == "umaze" else f"_{maze}"
    sens, pub = (
        out / f"data_seed{seed}{tag}_sensitive.hdf5",
        out / f"data_seed{seed}{tag}_public.hdf5",
    )
    if not sens.exists():
        full = collect_transitions(
            d.sensitive_env,
            d.sensitive_size + d.holdout_size,
            seed * 1000,
            d.action_noise,
        )
        data.save_hdf5(sens, jax.tree_util.tree_map(np.asarray, full))
    if not pub.exists():
        parts = [
            collect_transitions(e, d.public_size, seed * 1000 + 1 + i, d.action_noise)
            for i, e in enumerate(d.public_envs)
        ]
        public = jax.tree_util.tree_map(
            lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts
        )
        data.save_hdf5(pub, public)
    return sens, pub


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--models", nargs="+", default=["pgm", "mst"])
    ap.add_argument("--out", default=str(ROOT / "runs" / "marginal_baselines"))
    ap.add_argument(
        "--set",
        dest="overrides",
        nargs="*",
        default=[],
        help="extra overrides for every run",
    )
    ap.add_argument("--name", default="marginal_baselines")
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
                    cfg = marginal.load(
                        f"marginal/{model}_umaze",
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
                    rep = marginal.run(cfg, run_dir)
                runs.append(
                    {
                        "model": model,
                        "seed": seed,
                        "epsilon": eps,
                        "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
                        "noise_multiplier": rep["finetune"]["noise_multiplier"],
                        "releases": rep["finetune"]["releases"],
                        "selected": rep["finetune"].get(
                            "selected_cliques", rep["finetune"].get("selected_tree")
                        ),
                        "release": rep["audit"]["fidelity"],
                        "real_holdout": rep["audit"]["anchors"]["real_holdout"],
                        "wall_time_s": rep["wall_time_s"],
                    }
                )

    rows = [
        (
            f"{m.upper()} eps = {e:g}",
            [r["release"] for r in runs if (r["model"], r["epsilon"]) == (m, e)],
        )
        for m in args.models
        for e in args.epsilons
    ]
    first = {r["seed"]: r for r in runs}
    rows.append(("real holdout", [r["real_holdout"] for r in first.values()]))
    table, lines = metric_table(rows, METRICS)
    sigma = {
        f"{e:g}": next(r["noise_multiplier"] for r in runs if r["epsilon"] == e)
        for e in args.epsilons
    }
    load = uptime()
    md = "\n".join(
        [
            f"# {' / '.join(m.upper() for m in args.models)} beside PrivORL-n: "
            "fidelity at epsilon 1 and 10 (CPU scale)",
            "",
            "maze2d-umaze-dense-v1 sensitive (20000 transitions, 2000 held out), the "
            "data of "
            "`privorl_n_eps_sweep.md` for the same seeds; bins from public bounds (32 "
            "per observation "
            "coordinate, 16 per action coordinate, 16 for the reward on [0, 1]); mbi "
            "mirror descent, 1000 "
            "iterations; 20000 rows sampled. Mean ± sample std (ddof = 1) [95% t "
            "half-width] over seeds. "
            "Noise multiplier of the whole release (one Gaussian's rho; "
            + "; ".join(RELEASES[m] for m in args.models)
            + "): "
            + ", ".join(f"eps {k}: {v:.3f}" for k, v in sigma.items())
            + "."
            + (
                f" Overrides of every run: `{' '.join(args.overrides)}`."
                if args.overrides
                else ""
            ),
            "",
            *lines,
            "",
            f"Wall time {time.time() - t0:.0f} s for the runs not reused; `uptime` at "
            f"the end: {load}; "
            f"{os.cpu_count()} CPUs.",
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
