"""Our PATE-GAN beside smartnoise-synth's (1.0.8) on the same sensitive rows, scored by
the same scorers against the same sensitive rows and holdout.

The data are those of ``benchmarks/pategan_baselines.py`` (and so of
``_results.data_files``): maze2d-umaze-dense-v1, seed 0, 20k sensitive transitions +
2k holdout, public medium + large. Both GANs see the same table: the sensitive
transitions in our encoding (s' - s), normalised with the public normaliser (written to
``--work``/``sensitive_rows_seed{seed}.npy``). smartnoise's PATE-GAN gets a
``MinMaxTransformer`` per column on public bounds (the public rows' min / max; [0, 1] on
one-hot columns), so it spends no epsilon on bounds; its release is mapped back through
the same normaliser and decoder as ours and its actions clipped to the same bounds.

smartnoise runs in its own venv (``--sn-python``, default ``/tmp/snvenv/bin/python``;
smartnoise-synth 1.0.8 with torch CPU) through ``benchmarks/_smartnoise_pategan.py``.
Its PATE-GAN fixes what its API does not expose: teachers = N / 1000 (20 here, ours
100), Laplace vote noise of inverse scale 1e-3 (std 1414 on a count of 20 teachers) at
every epsilon, and its epsilon sets only how many iterations it trains (its moments
accountant stops when the next iteration would exceed it). Ours is read from the runs
``pategan_baselines.py`` keeps (``--out``; made here when missing, with its overrides).

    python benchmarks/pategan_vs_smartnoise.py

Writes ``benchmarks/results/pategan_vs_smartnoise.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from pathlib import Path

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
from _results import data_files as _data_files  # noqa: E402  (benchmarks/)
from _results import (  # noqa: E402  (benchmarks/_results.py)
    dump_json,
    fidelity_metrics,
    metric_table,
    uptime,
)

from privrl_jax import data, diffusion, privacy
from privrl_jax.pipelines import pategan
from privrl_jax.pipelines.privorl_n import fidelity_scorer, load_data

ROOT = Path(__file__).resolve().parents[1]
METRICS = fidelity_metrics("rows")
DELTA = 1e-6


def _ours(out: Path, seed: int, eps: float, sens: Path, pub: Path) -> Path:
    run_dir = out / f"pategan_seed{seed}_eps{eps:g}"
    if not (run_dir / "report.json").exists():
        cfg = pategan.load(
            "pategan/umaze",
            [
                f"seed={seed}",
                f"privacy.epsilon={eps}",
                f"privacy.noise_seed={1000 + seed}",
                f"data.sensitive_file={sens}",
                f"data.public_files=[{pub}]",
            ],
        )
        print(f"ours eps {eps:g} -> {run_dir}", flush=True)
        pategan.run(cfg, run_dir)
    return run_dir


def _smartnoise(
    sn_python: str, work: Path, tag: str, eps: float, n: int, seed: int, exact: bool
) -> dict:
    """smartnoise's fit (reused when its files exist): its info, its ``sample`` rows
    and, with exact votes, rows from the training latent law (``rows_uniform``)."""
    out, info = work / f"sn_{tag}.npy", work / f"sn_{tag}.json"
    uni = work / f"sn_{tag}_uniform.npy"
    if not info.exists():
        print(f"smartnoise {tag} ...", flush=True)
        subprocess.run(
            [
                sn_python,
                str(ROOT / "benchmarks" / "_smartnoise_pategan.py"),
                f"--rows={work / f'sensitive_rows_seed{seed}.npy'}",
                f"--bounds={work / f'public_bounds_seed{seed}.npy'}",
                f"--epsilon={eps}",
                f"--delta={DELTA}",
                f"--samples={n}",
                f"--seed={seed}",
                f"--out={out}",
                f"--info={info}",
                *(["--exact-votes", f"--out-uniform={uni}"] if exact else []),
            ],
            check=True,
        )
    res = {"rows": np.load(out), **json.loads(info.read_text())}
    if exact:
        res["rows_uniform"] = np.load(uni)
    return res


def _laplace_votes_epsilon(sn: dict) -> float:
    """dp-accounting's RDP epsilon (at ``DELTA``) of smartnoise's vote queries: each a
    Laplace of scale 1 / lap_scale on a count that one row moves by <= 1."""
    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.LaplaceDpEvent(1.0 / sn["laplace_inverse_scale"]),
        sn["vote_queries"],
    )
    return privacy.compute_epsilon(ev, DELTA, accountant="rdp").epsilon


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument(
        "--exact-votes-epsilon",
        type=float,
        default=10.0,
        help="smartnoise with exact votes for this epsilon's iterations, and ours "
        "at eps = inf (0: skip both)",
    )
    ap.add_argument("--sn-python", default="/tmp/snvenv/bin/python")
    ap.add_argument("--out", default=str(ROOT / "runs" / "marginal_baselines"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "pategan_vs_smartnoise"))
    args = ap.parse_args()
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    seed = args.seed
    sens, pub = _data_files(out, seed)

    cfg = pategan.load(
        "pategan/umaze",
        [
            f"seed={seed}",
            f"data.sensitive_file={sens}",
            f"data.public_files=[{pub}]",
        ],
    )
    public, sensitive, holdout = load_data(cfg)
    task = pategan.build_task(cfg, public, sensitive)
    layout, norm, pub_rows = task.layout, task.norm, task.public_rows
    sens_arrays = jax.tree_util.tree_map(jnp.asarray, sensitive)
    rows = np.asarray(
        diffusion.normalise(norm, diffusion.flatten_transitions(sens_arrays, layout))
    )
    hot = np.asarray(layout.one_hot_mask(), bool)
    bounds = np.stack(
        [
            np.where(hot, 0.0, pub_rows.min(0)),
            np.where(hot, 1.0, pub_rows.max(0)),
        ]
    )
    np.save(work / f"sensitive_rows_seed{seed}.npy", rows)
    np.save(work / f"public_bounds_seed{seed}.npy", bounds)
    n_syn = cfg.synthesis.num_samples
    lo_a, hi_a = cfg.synthesis.action_bounds
    score = fidelity_scorer(
        sensitive,
        layout,
        norm,
        cfg.data.sensitive_env,
        rows=len(holdout),
        seed=seed,
    )

    def decode(x: np.ndarray) -> data.Transitions:
        syn = diffusion.unflatten_transitions(
            diffusion.denormalise(norm, jnp.asarray(x, jnp.float32)), layout
        )
        return syn.replace(actions=jnp.clip(syn.actions, lo_a, hi_a))

    results, table_rows = [], []
    ours_eps = args.epsilons + ([math.inf] if args.exact_votes_epsilon else [])
    for eps in ours_eps:
        run_dir = _ours(out, seed, eps, sens, pub)
        rep = json.loads((run_dir / "report.json").read_text())
        fin = rep["finetune"]
        fid = score(data.load_hdf5(run_dir / "synthetic.hdf5"))
        results.append(
            {
                "impl": "ours",
                "epsilon": eps,
                "private": math.isfinite(eps),
                "num_teachers": fin["num_teachers"],
                "vote_queries": fin["steps"],
                "vote_noise": f"Gaussian std {fin['vote_noise_std']:.1f}"
                if math.isfinite(eps)
                else "none",
                "epsilon_reported": rep["privacy"]["rdp"]["epsilon"],
                "epsilon_dp_accounting_rdp": rep["privacy"]["rdp"]["epsilon"],
                "accounting": "data-independent RDP (dp-accounting)",
                "label_one_share": fin["last_round"].get("label_mean"),
                "fidelity": fid,
                "run_dir": str(run_dir.relative_to(ROOT)),
            }
        )
        table_rows.append(
            (
                f"ours eps = {eps:g}"
                if math.isfinite(eps)
                else "ours exact votes (eps = inf, its 1000 queries)",
                [fid],
            )
        )
    sn_runs = [(f"eps{e:g}", e, False) for e in args.epsilons]
    if args.exact_votes_epsilon:
        e = args.exact_votes_epsilon
        sn_runs.append((f"exact_eps{e:g}", e, True))
    for tag, eps, exact in sn_runs:
        sn = _smartnoise(args.sn_python, work, tag, eps, n_syn, seed, exact)
        samples = [("", sn.pop("rows"))]
        if exact:
            samples.append((", rand latent", sn.pop("rows_uniform")))
        for suffix, x in samples:
            fid = score(decode(x))
            label = (
                f"smartnoise exact votes ({sn['iterations']} iterations, as at "
                f"eps = {eps:g}){suffix}"
                if exact
                else f"smartnoise eps = {eps:g}"
            )
            results.append(
                {
                    "impl": "smartnoise",
                    "tag": tag + suffix.replace(", rand latent", "_uniform"),
                    "epsilon": eps,
                    "private": not exact,
                    "latent_at_sampling": "rand" if suffix else "randn (its sample)",
                    "num_teachers": sn["num_teachers"],
                    "vote_queries": sn["vote_queries"],
                    "vote_noise": "none"
                    if exact
                    else f"Laplace std {sn['laplace_std']:.0f}",
                    "epsilon_reported": sn["epsilon_smartnoise_final"],
                    "epsilon_dp_accounting_rdp": _laplace_votes_epsilon(sn)
                    if not exact
                    else math.inf,
                    "accounting": "smartnoise moments accountant (PATE's "
                    "data-dependent form; its data-independent clamp "
                    "2 lam^2 l (l + 1) is what binds here)",
                    "label_one_share": sn["label_one_share"],
                    "smartnoise": sn,
                    "fidelity": fid,
                }
            )
            table_rows.append((label, [fid]))
    table_rows.append(("real holdout", [score(holdout)]))
    table, lines = metric_table(table_rows, METRICS)
    # one run a row: the mean alone (metric_table's spread columns would be nan)
    lines = lines[:2] + [
        f"| {name} | "
        + " | ".join(f"{st['mean']:.3f}" for k, st in stats.items())
        + " |"
        for name, stats in table.items()
    ]
    lines[0] = lines[0].replace("| row | seeds |", "| row |")
    lines[1] = "|---" * (1 + len(next(iter(table.values())))) + "|"

    acct = [
        "| row | teachers | vote queries | vote noise | epsilon as it reports it "
        "(delta 1e-6) | dp-accounting RDP epsilon of its queries | "
        "'real' label share |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, (label, _) in zip(results, table_rows):
        share = r["label_one_share"]
        acct.append(
            f"| {label} | {r['num_teachers']} | {r['vote_queries']} | "
            f"{r['vote_noise']} | {r['epsilon_reported']:.3f} | "
            f"{r['epsilon_dp_accounting_rdp']:.3f} | "
            + ("n/a" if share is None else f"{share:.3f}")
            + " |"
        )
    load = uptime()
    md = "\n".join(
        [
            "# PATE-GAN: ours beside smartnoise-synth 1.0.8, the same rows and scorers",
            "",
            "maze2d-umaze-dense-v1, seed 0 (the data of `pategan_baselines.md`): 20000 "
            "sensitive transitions, 2000 held out, both GANs fitted on the same "
            "public-normalised encoded rows; 20000 rows sampled from each; one run "
            "a row, so no spread. smartnoise: its defaults "
            "(batch 64, 5 teacher / 5 student iterations, latent 64), delta 1e-6, "
            "public MinMax bounds. 'real' label share: ours, the mean of the last "
            "round's 4 labels only (a coarse reading); smartnoise, the share of all "
            "its labels that are 'real'. smartnoise's exact-votes rows are not "
            "private (its vote noise removed; its accountant still charged the "
            "queries, so it trained its eps-10 iteration count); 'rand latent' samples "
            "its generator from torch.rand, the latent law it is trained on, instead "
            "of the torch.randn its sample() uses.",
            "",
            *lines,
            "",
            "Privacy accounting, as each implementation reports it:",
            "",
            *acct,
            "",
            f"Wall time {time.time() - t0:.0f} s for what was not reused; `uptime` at "
            f"the end: {load}; {os.cpu_count()} CPUs.",
            "",
        ]
    )
    print(md)
    res = ROOT / "benchmarks" / "results"
    res.mkdir(parents=True, exist_ok=True)
    dump_json(
        res / "pategan_vs_smartnoise.json",
        {"runs": results, "table": table, "bounds": bounds.tolist(), "uptime": load},
        indent=2,
    )
    (res / "pategan_vs_smartnoise.md").write_text(md)


if __name__ == "__main__":
    main()
