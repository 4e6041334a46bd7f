"""Black-box audits of our DP synthetic-data generators: epsilon accounted vs epsilon
demonstrated from the released rows alone (``audit.audit_synthesizer``; Annamalai,
Ganev & De Cristofaro, USENIX Security 2024, with the one-run bound of Steinke, Nasr &
Jagielski 2023).

Sensitive data: ``--n`` transitions of maze2d-umaze-dense-v1 (key 0), as the rows of
the marginal baselines' table (s, a, r, s' - s, done). Each generator is trained once
per epsilon on them plus the canaries that won their coin; only its release is scored.

- **PGM / MST** (``synth.fit_pgm`` / ``synth.fit_mst`` on the public bins of
  ``configs/marginal/{pgm,mst}_umaze_delta.yaml``, sigma calibrated by dp-accounting as
  ``pipelines.marginal`` does, delta = 1e-6). Canaries: ``audit.empty_cell_canaries``
  in a plane of two columns whose 2-way marginal the generator measures (``PLANES``;
  PGM: the (x, y) position, outside the U-maze's corridors), on the generator's own
  bins, each alone in an empty cell with an empty ring around it; score: the log
  kernel density of the release at the canary's point of that plane (bandwidth a
  quarter bin). The release has ``--sample-factor`` x n rows (a public size).
- **bounding-box canaries** (diagnostic, epsilon = inf): PGM audited with
  ``audit.out_of_distribution_canaries`` (outside the data's bounding box) and the
  default score: the public bins clip those canaries into their edge bins.
- **PrivORL-n** (``--privorl-n``; its tiny test config, ``pipelines.privorl_n.run``):
  canaries at positions outside the maze's bounding box (ring of 2 half-diagonals),
  scored by the distance of the nearest synthetic position.

Usage: ``python benchmarks/audit_blackbox.py [--n 2000] [--m 150] [--privorl-n]``;
writes benchmarks/results/audit_blackbox.{json,md}. Needs the baselines extra (mbi).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import data, envs, synth
from privrl_jax.pipelines import marginal, privorl_n
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit import density_scores

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DELTA = 1e-6
POS = (0, 1)  # the (x, y) position columns of the table
# The canaries' plane per generator: a 2-way marginal the generator measures. PGM's
# fixed tree has (obs0, obs1); MST's noiseless selection on the sensitive rows does not
# (it links x and y through the reward) but takes (obs3, next_obs1), velocity y and
# the step's y change, second of its 55 pairs.
PLANES = {"pgm": (0, 1), "mst": (3, 8)}


def _sensitive_table(n: int, env_name: str, action_noise: float) -> np.ndarray:
    tr = envs.collect_dataset(jax.random.key(0), env_name, n, action_noise=action_noise)
    return synth.transition_table(tr, next_obs_delta=True)


def _marginal_synthesizer(model: str, cfg, disc, sigma: float, num_rows: int):
    """(rows, key) -> released rows of PGM / MST: discretise on the public bins, fit,
    sample ``num_rows`` (public), decode uniformly within the bins."""
    cliques = synth.default_transition_cliques(4, 2)
    kw = dict(noise_multiplier=sigma, num_rows=num_rows, iters=cfg.model.iters)

    def synthesize(rows: np.ndarray, key: jax.Array) -> np.ndarray:
        codes = disc.discretise(rows)
        k_noise, k_decode = jax.random.split(key)
        if model == "pgm":
            fit = synth.fit_pgm(k_noise, codes, disc, cliques=cliques, **kw)
        else:
            fit = synth.fit_mst(k_noise, codes, disc, **kw)
        return disc.undiscretise(k_decode, fit.codes)

    return synthesize


def _marginal_rows(
    args, table: np.ndarray, models, epsilons, iters: int
) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        cfg = marginal.load(
            f"marginal/{model}_umaze_delta",
            [f"privacy.delta={DELTA}", f"model.iters={iters}"],
        )
        disc = marginal.public_discretisation(cfg, 4, 2)
        plane = PLANES[model] if args.plane is None else tuple(args.plane)
        x, y = disc.columns[plane[0]], disc.columns[plane[1]]
        canaries = audit.empty_cell_canaries(
            table,
            args.m,
            11,
            columns=plane,
            low=(x.low, y.low),
            high=(x.high, y.high),
            cells=(x.num_bins, y.num_bins),
        )
        lo = np.array([x.low, y.low])
        width = np.array([x.high - x.low, y.high - y.low]) / [x.num_bins, y.num_bins]

        def score(released, c, plane=plane, lo=lo, width=width):
            # In bin units (the two columns' scales differ), a kernel of a quarter bin.
            cells = lambda a: (a[:, list(plane)] - lo) / width  # noqa: E731
            return density_scores(cells(released), cells(c), bandwidth=0.25)

        for eps in epsilons:
            cfg_e = marginal.load(
                f"marginal/{model}_umaze_delta",
                [f"privacy.delta={DELTA}", f"privacy.epsilon={eps}"],
            )
            sigma = marginal.noise_multiplier(cfg_e)
            t0 = time.time()
            res = audit.audit_synthesizer(
                _marginal_synthesizer(
                    model, cfg, disc, sigma, args.sample_factor * table.shape[0]
                ),
                table,
                args.m,
                jax.random.key(100 + int(min(eps, 999))),
                delta=DELTA,
                canaries=canaries,
                score=score,
                k_positive=args.m // 4,
            )
            name = (
                f"{model.upper()} (mbi, {iters} iters), empty-cell canaries in "
                f"({x.name}, {y.name})"
            )
            rows.append(_row(name, eps, sigma, res, t0))
            print(_md_row(rows[-1]), flush=True)
    return rows


def _bounding_box_row(args, table: np.ndarray) -> dict[str, Any]:
    """PGM at epsilon = inf with out-of-bounding-box canaries: what the bins do."""
    cfg = marginal.load(
        "marginal/pgm_umaze_delta",
        [f"privacy.delta={DELTA}", f"model.iters={args.iters}"],
    )
    disc = marginal.public_discretisation(cfg, 4, 2)
    key = jax.random.key(7)
    canaries = audit.out_of_distribution_canaries(table, args.m, key)
    lo = np.array([c.low if c.values is None else min(c.values) for c in disc.columns])
    hi = np.array([c.high if c.values is None else max(c.values) for c in disc.columns])
    clipped = float(np.mean((canaries < lo) | (canaries > hi)))
    t0 = time.time()
    res = audit.audit_synthesizer(
        _marginal_synthesizer("pgm", cfg, disc, 0.0, args.sample_factor * len(table)),
        table,
        args.m,
        key,
        delta=DELTA,
        canaries=canaries,
        k_positive=args.m // 4,
    )
    row = _row(
        f"PGM (mbi, {args.iters} iters), bounding-box canaries", math.inf, 0.0, res, t0
    )
    row["canary_coordinates_outside_public_bounds"] = clipped
    print(_md_row(row), f"({clipped:.0%} of canary coordinates clipped)", flush=True)
    return row


def _privorl_n_rows(args, table: np.ndarray) -> list[dict[str, Any]]:
    """PrivORL-n on its tiny test config, through the pipeline (files in, files out)."""
    rows = []
    pos = table[:, list(POS)]
    ring = audit.out_of_distribution_canaries(pos, args.m_privorl, 21)
    donors = table[np.random.default_rng(22).integers(0, len(table), args.m_privorl)]
    canaries = donors.copy()
    canaries[:, list(POS)] = ring
    work = Path(tempfile.mkdtemp(prefix="audit_blackbox_privorl_n_"))
    base = privorl_n.load("privorl_n/test", []).data
    public_files = []
    for i, env_name in enumerate(base.public_envs):  # collected once, for every epsilon
        public_files.append(work / f"public{i}.hdf5")
        pub = envs.collect_dataset(
            jax.random.key(1 + i),
            env_name,
            base.public_size,
            action_noise=base.action_noise,
        )
        data.save_hdf5(public_files[-1], jax.tree_util.tree_map(np.asarray, pub))
    for eps in args.epsilons:

        def synthesize(rows_in: np.ndarray, key: jax.Array, eps=eps) -> np.ndarray:
            # The audit's key seeds the run's noise (a test run, labelled not private).
            seed = int(jax.random.randint(key, (), 0, 2**30))
            run_dir = work / f"eps{eps:g}"
            f = work / f"sensitive_eps{eps:g}.hdf5"
            data.save_hdf5(
                f, synth.table_transitions(rows_in, 4, 2, next_obs_delta=True)
            )
            cfg = privorl_n.load(
                "privorl_n/test",
                [
                    f"privacy.epsilon={eps}",
                    f"privacy.delta={DELTA}",
                    f"privacy.noise_seed={seed}",
                    f"data.sensitive_file={f}",
                    f"data.public_files=[{','.join(map(str, public_files))}]",
                    "data.holdout_size=2",  # the fewest the audit metrics take
                    f"finetune.epochs={args.privorl_epochs}",
                    f"synthesis.num_samples={args.sample_factor * len(table)}",
                    "eval.agents=[]",
                    "eval.mia=false",
                    "eval.anchors=false",
                    "eval.plots=false",
                ],
            )
            rep = privorl_n.run(cfg, run_dir)
            rows.append({"privorl_n_report": rep.get("finetune", {})})
            out = data.load_hdf5(run_dir / "synthetic.hdf5")
            return synth.transition_table(out, next_obs_delta=True)

        t0 = time.time()
        res = audit.audit_synthesizer(
            synthesize,
            table,
            args.m_privorl,
            jax.random.key(200 + int(min(eps, 999))),
            delta=DELTA,
            canaries=canaries,
            score=lambda r, c: density_scores(r, c, columns=POS),
            k_positive=args.m_privorl // 4,
        )
        info = rows.pop()
        rows.append(_row("PrivORL-n (test config)", eps, None, res, t0))
        rows[-1]["noise_multiplier"] = info["privorl_n_report"].get("noise_multiplier")
        print(_md_row(rows[-1]), flush=True)
    return rows


def _row(method: str, eps: float, sigma, res, t0: float) -> dict[str, Any]:
    bound = res.result.epsilon_lower_bound
    if bound > eps:
        raise RuntimeError(
            f"{method}: epsilon demonstrated {bound:.3f} > accounted {eps}: a privacy "
            "bug."
        )
    audit_info = res.to_dict()
    audit_info["bound"] = audit_info.pop("method")  # "one_run": which bound
    return {
        "method": method,
        "epsilon": eps,
        "noise_multiplier": sigma,
        **audit_info,
        "wall_time_s": round(time.time() - t0, 1),
    }


def _md_row(r: dict[str, Any]) -> str:
    eps = "∞ (σ = 0)" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
    return (
        f"| {r['method']} | {eps} | {r['epsilon_lower_bound']:.2f} "
        f"(ceiling {r['max_epsilon']:.2f}) | {r['m']} ({r['included']} in) | "
        f"{r['correct']} / {r['guesses']} |"
    )


HEADER = (
    "| method | ε accounted | ε demonstrated ≥ (95%) | m | canaries guessed right |\n"
    "|---|---|---|---|---|"
)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=2_000, help="sensitive transitions")
    ap.add_argument("--m", type=int, default=150, help="canaries (marginal methods)")
    ap.add_argument("--models", nargs="*", default=["pgm", "mst"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0, math.inf])
    ap.add_argument("--iters", type=int, default=1000, help="mbi estimation iters")
    ap.add_argument("--sample-factor", type=int, default=1, help="released rows / n")
    ap.add_argument("--no-bounding-box", action="store_true")
    ap.add_argument(
        "--plane", nargs=2, type=int, default=None, help="canary columns (all models)"
    )
    ap.add_argument("--privorl-n", action="store_true")
    ap.add_argument("--m-privorl", type=int, default=100)
    ap.add_argument("--privorl-epochs", type=float, default=20.0)
    ap.add_argument("--name", default="audit_blackbox")
    ap.add_argument(
        "--append",
        action="store_true",
        help="redo only this run's families (marginal / PrivORL-n) in the stored file",
    )
    args = ap.parse_args()
    t0 = time.time()
    env_cfg = marginal.load("marginal/pgm_umaze_delta", []).data
    table = _sensitive_table(args.n, env_cfg.sensitive_env, env_cfg.action_noise)
    rows: list[dict[str, Any]] = []
    if args.append:  # keep the stored rows of the families this run does not redo
        marginal_run = bool(args.models) or not args.no_bounding_box
        rows = [
            r
            for r in json.loads((RESULTS / f"{args.name}.json").read_text())["rows"]
            if (r["method"].startswith("PrivORL-n") and not args.privorl_n)
            or (not r["method"].startswith("PrivORL-n") and not marginal_run)
        ]

    def save() -> None:  # after every stage, so a later failure keeps the numbers
        rows.sort(key=lambda r: r["method"].startswith("PrivORL-n"))  # stable
        md = "\n".join([HEADER, *(_md_row(r) for r in rows)])
        RESULTS.mkdir(parents=True, exist_ok=True)
        payload = {
            "n": args.n,
            "delta": DELTA,
            "iters": args.iters,
            "sample_factor": args.sample_factor,
            "rows": rows,
            "wall_time_s": round(time.time() - t0, 1),
        }
        dump_json(
            RESULTS / f"{args.name}.json", json.loads(json.dumps(payload)), indent=2
        )
        (RESULTS / f"{args.name}.md").write_text(md + "\n")

    rows += _marginal_rows(args, table, args.models, args.epsilons, args.iters)
    if args.iters != 1000 and "pgm" in args.models:  # the shipped estimation
        rows += _marginal_rows(args, table, ["pgm"], [math.inf], 1000)
    save()
    if not args.no_bounding_box:
        rows.append(_bounding_box_row(args, table))
        save()
    if args.privorl_n:
        rows += _privorl_n_rows(args, table)
        save()
    print("\n".join([HEADER, *(_md_row(r) for r in rows)]))


if __name__ == "__main__":
    main()
