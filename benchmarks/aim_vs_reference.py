"""Our AIM (``synth.fit_aim``) side by side with the authors' reference implementation
(private-pgm's ``mechanisms/aim.py``) on the same discretised umaze table and budget.

The reference is not a dependency and none of its code is in this repository: pass the
folder holding its ``mechanisms/`` files (``aim.py``, ``mechanism.py``, ``cdp2adp.py``),
e.g. extracted from a checkout of https://github.com/ryan112358/private-pgm with
``git archive HEAD mechanisms | tar -x -C /tmp/private-pgm``. Its file targets an mbi
API with ``estimation.mirror_descent(domain, measurements, iters, potentials=...)``;
mbi 2.0.0 has ``estimation.MirrorDescent().estimate(..., warm_start=...)``, which the
shim below maps it onto (the same estimator), returning the model with its ``cliques``
as a list, as the reference extends them; nothing else of the reference is changed.

Both run on the codes of seed s's 20k umaze members (the marginal baselines' data and
public bins, s' - s on its one-step bound), with the workload of every 2-way marginal,
24 rounds, a 20 MB model cap and 1000 mirror-descent iterations, and both spend rho =
1 / (2 sigma^2) of the one Gaussian our pipelines calibrate by dp-accounting at (eps,
delta = 1e-6). The reference converts (eps, delta) to rho itself (Canonne, Kamath &
Steinke's bound, ``cdp2adp.cdp_rho``); that rho is reported beside ours and then
overridden, so the two spend the same budget. Metric: AIM's own, the workload error
(mean over the 66 pairs of half the L1 distance between the normalised 2-way
marginals of the data and of the 20k synthetic rows), and the same for the 1-way
marginals; plus the cliques each selected, its rounds and its annealings.

    python benchmarks/aim_vs_reference.py --reference /tmp/private-pgm --seeds 0 1 2

Writes ``benchmarks/results/aim_vs_reference.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import re
import sys
import time
from pathlib import Path

import jax
import numpy as np
import scipy.stats
from _results import dump_json, summary  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import synth
from privrl_jax.pipelines import marginal
from privrl_jax.pipelines.privorl_n import load_data
from privrl_jax.privacy import ExponentialMechanism

RESULTS = Path(__file__).resolve().parent / "results"
CONFIG = "marginal/aim_umaze_delta"


def workload_error(codes: np.ndarray, synth_codes: np.ndarray, sizes, k: int) -> float:
    """Mean over every k-way marginal of 0.5 * ||x / N - y / N'||_1 (AIM's metric)."""
    errs = []
    for cl in itertools.combinations(range(codes.shape[1]), k):
        shape = tuple(int(sizes[i]) for i in cl)

        def hist(c, cl=cl, shape=shape):
            flat = np.ravel_multi_index(tuple(c[:, i] for i in cl), shape)
            h = np.bincount(flat, minlength=int(np.prod(shape))).astype(float)
            return h / h.sum()

        errs.append(0.5 * np.abs(hist(codes) - hist(synth_codes)).sum())
    return float(np.mean(errs))


def _shim_mbi():
    """Maps the reference's ``estimation.mirror_descent`` onto mbi 2.0.0's estimator."""
    import mbi  # noqa: PLC0415

    class ListCliques:
        """The fitted model as the reference expects it: ``cliques`` a list (mbi
        2.0.0 returns a tuple, which the reference extends with ``+ [cl]``)."""

        def __init__(self, model):
            self._model = model

        @property
        def cliques(self):
            return list(self._model.cliques)

        def __getattr__(self, name):
            return getattr(self._model, name)

    def mirror_descent(domain, measurements, iters, potentials=None, callback_fn=None):
        return ListCliques(
            mbi.estimation.MirrorDescent().estimate(
                domain,
                measurements,
                iters=iters,
                warm_start=potentials,
                callback_fn=callback_fn,
            )
        )

    mbi.estimation.mirror_descent = mirror_descent
    return mbi


def run_reference(ref_dir: Path, codes, disc, rho: float, seed: int, args) -> dict:
    """The reference AIM on ``codes`` at ``rho`` (its own rho overridden)."""
    mbi = _shim_mbi()
    sys.path.insert(0, str(ref_dir / "mechanisms"))
    from aim import AIM  # noqa: PLC0415  (the reference, from --reference)

    names = list(disc.names)
    dataset = mbi.Dataset(
        {n: np.asarray(codes[:, i]) for i, n in enumerate(names)},
        mbi.Domain(names, list(disc.sizes)),
    )
    mech = AIM(
        args.epsilon_for_rho,
        args.delta,
        rounds=args.rounds,
        max_model_size=args.max_model_size,
        max_iters=args.iters,
    )
    own_rho = float(mech.rho)
    mech.rho = rho
    np.random.seed(seed)  # the reference draws from NumPy's global generator
    workload = [(cl, 1.0) for cl in itertools.combinations(names, 2)]
    out = io.StringIO()
    t0 = time.time()
    with contextlib.redirect_stdout(out):
        _, synth_ds = mech.run(dataset, workload, num_synth_rows=len(codes))
    log = out.getvalue()
    # Annealings after rounds 1 .. T-2, which double a later non-final round's epsilon
    # (the last round spends the rho left): the ones run_ours can count.
    picks = [m.start() for m in re.finditer("Measuring Clique", log)]
    second_last = picks[-2] if len(picks) >= 2 else 0
    selected = [
        tuple(re.findall(r"'([^']+)'", m))
        for m in re.findall(r"Measuring Clique (\(.*?\))", log)
    ]
    return {
        "codes": np.column_stack([np.asarray(synth_ds.to_dict()[n]) for n in names]),
        "selected": selected,
        "anneals": log[:second_last].count("Reducing sigma"),
        "own_rho": own_rho,
        "seconds": time.time() - t0,
    }


def run_ours(codes, disc, sigma: float, seed: int, args) -> dict:
    """``synth.fit_aim`` with the same settings."""
    t0 = time.time()
    fit = synth.fit_aim(
        jax.random.key(1000 + seed),
        codes,
        disc,
        noise_multiplier=sigma,
        num_rows=len(codes),
        iters=args.iters,
        sample_seed=seed,
        max_clique_size=2,
        max_model_size=args.max_model_size,
        rounds=args.rounds,
        round_iters=args.iters,
    )
    # An annealing doubles the next selection's epsilon; the last round's epsilon is
    # the rho left, so it is not counted.
    eps_t = [
        m.epsilon for _, m in fit.mechanisms if isinstance(m, ExponentialMechanism)
    ]
    anneals = sum(
        abs(b / a - 2.0) < 1e-6 for a, b in zip(eps_t[:-2], eps_t[1:-1], strict=True)
    )
    return {
        "codes": fit.codes,
        "selected": [tuple(c) for c in fit.selected],
        "anneals": anneals,
        "seconds": time.time() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reference", type=Path, required=True)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--rounds", type=int, default=24)
    ap.add_argument("--max-model-size", type=float, default=20.0)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=0, help="first N members (0: all)")
    ap.add_argument("--name", default="aim_vs_reference")
    args = ap.parse_args()
    if not (args.reference / "mechanisms" / "aim.py").is_file():
        raise SystemExit(
            f"--reference {args.reference}: no mechanisms/aim.py there; extract "
            "private-pgm's mechanisms/ folder into it (see this script's docstring)."
        )
    args.delta = 1e-6
    rows = []
    for eps in args.epsilons:
        for seed in args.seeds:
            cfg = marginal.load(CONFIG, [f"seed={seed}", f"privacy.epsilon={eps}"])
            public, sensitive, _ = load_data(cfg)
            task = marginal.build_task(cfg, public, sensitive)
            disc = task.disc
            codes = disc.discretise(
                synth.transition_table(sensitive, next_obs_delta=True)
            )
            if args.rows:
                codes = codes[: args.rows]
            rho = 1.0 / (2 * task.sigma**2)
            args.epsilon_for_rho = eps
            row = {"epsilon": eps, "seed": seed, "rho": rho, "sigma": task.sigma}
            for who, fn in (
                ("ours", lambda: run_ours(codes, disc, task.sigma, seed, args)),
                (
                    "reference",
                    lambda: run_reference(args.reference, codes, disc, rho, seed, args),
                ),
            ):
                res = fn()
                syn = res.pop("codes")
                res["workload_error_2way"] = workload_error(codes, syn, disc.sizes, 2)
                res["workload_error_1way"] = workload_error(codes, syn, disc.sizes, 1)
                res["selected"] = [list(c) for c in res["selected"]]
                row[who] = res
                print(
                    f"eps {eps:g} seed {seed} {who}: 2-way error "
                    f"{res['workload_error_2way']:.4f}, {len(res['selected'])} "
                    f"selections, {res['anneals']} anneals, {res['seconds']:.0f} s",
                    flush=True,
                )
            rows.append(row)
            _write(args, rows)  # after every row: a cut run keeps what it did


def _write(args, rows: list[dict]) -> None:
    RESULTS.mkdir(exist_ok=True)
    meta = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    dump_json(RESULTS / f"{args.name}.json", {"args": meta, "rows": rows})
    lines = [
        "# AIM: ours vs the reference implementation (private-pgm)",
        "",
        "`python benchmarks/aim_vs_reference.py --seeds "
        f"{' '.join(map(str, args.seeds))}`: seed s's 20k umaze members, bins of "
        f"`{CONFIG}`, workload of every 2-way "
        f"marginal, {args.rounds} rounds, {args.max_model_size:g} MB cap, "
        f"{args.iters} iterations, the same rho. Workload error: mean over the "
        "marginals of half the L1 distance of the normalised counts (lower is "
        "better). Mean ± sample std (ddof = 1) [95% t half-width]; paired t-test "
        "over seeds.",
        "",
        "| epsilon | rho (ours; the reference's own) | 2-way error, ours | 2-way "
        "error, reference | paired p | 1-way error, ours / reference | selections, "
        "ours / reference | anneals, ours / reference | first 4 picks the same |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for eps in args.epsilons:
        rs = [r for r in rows if r["epsilon"] == eps]
        if not rs:
            continue

        def fmt(vals):
            s = summary(vals)
            return f"{s['mean']:.4f} ± {s['std']:.4f} [±{s['ci95']:.4f}]"

        ours = [r["ours"]["workload_error_2way"] for r in rs]
        ref = [r["reference"]["workload_error_2way"] for r in rs]
        p = (
            f"{scipy.stats.ttest_rel(ours, ref).pvalue:.2g}"
            if len(rs) > 1 and np.std(np.subtract(ours, ref)) > 0
            else "-"
        )
        one = (
            f"{np.mean([r['ours']['workload_error_1way'] for r in rs]):.4f} / "
            f"{np.mean([r['reference']['workload_error_1way'] for r in rs]):.4f}"
        )
        sel = (
            f"{np.mean([len(r['ours']['selected']) for r in rs]):.1f} / "
            f"{np.mean([len(r['reference']['selected']) for r in rs]):.1f}"
        )
        ann = (
            f"{np.mean([r['ours']['anneals'] for r in rs]):.1f} / "
            f"{np.mean([r['reference']['anneals'] for r in rs]):.1f}"
        )
        same = sum(
            [sorted(c) for c in r["ours"]["selected"][:4]]
            == [sorted(c) for c in r["reference"]["selected"][:4]]
            for r in rs
        )
        lines.append(
            f"| {eps:g} | {rs[0]['rho']:.4g}; {rs[0]['reference']['own_rho']:.4g} | "
            f"{fmt(ours)} | {fmt(ref)} | {p} | {one} | {sel} | {ann} | "
            f"{same}/{len(rs)} seeds |"
        )
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
