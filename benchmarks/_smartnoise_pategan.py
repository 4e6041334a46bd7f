"""smartnoise-synth's PATE-GAN on a numeric table: the other venv's half of
``benchmarks/pategan_vs_smartnoise.py`` (run with smartnoise-synth's interpreter, never
imported by privrl_jax).

Reads ``--rows`` (float [N, d], the sensitive rows) and ``--bounds`` (float [2, d],
public lower / upper per column), fits ``snsynth.pytorch.nn.PATEGAN`` with a
``MinMaxTransformer`` per column on those bounds (no epsilon spent on bounds), samples
``--samples`` rows to ``--out`` (.npy) and writes what smartnoise's own accountant says,
with counters of its vote queries, to ``--info`` (.json).

``--exact-votes`` (not private) replaces the Laplace noise of its votes by none while
its accountant keeps charging the queries as if noised, so the run trains for exactly
the iterations of the private run at the same ``--epsilon``. ``--out-uniform`` also
writes a sample drawn from the latent law the generator was trained on
(``torch.rand``), besides smartnoise's ``sample`` (``torch.randn``).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch
from snsynth.pytorch.nn import pategan as sn_pategan
from snsynth.transform import MinMaxTransformer, TableTransformer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", required=True)
    ap.add_argument("--bounds", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, required=True)
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exact-votes", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--out-uniform", default=None)
    ap.add_argument("--info", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)  # smartnoise draws its vote noise from np.random

    rows = np.load(args.rows)
    lo, hi = np.load(args.bounds)
    tt = TableTransformer(
        [MinMaxTransformer(lower=float(a), upper=float(b)) for a, b in zip(lo, hi)]
    )

    stats = {"queries": 0, "label_one": 0.0, "vote_share": 0.0, "alphas": None}
    real_pate, real_acc = sn_pategan.pate, sn_pategan.moments_acc

    def pate(data, teachers, lap_scale):
        # lap_scale is the inverse Laplace scale: 1e12 leaves the votes exact
        labels, votes = real_pate(
            data, teachers, 1e12 if args.exact_votes else lap_scale
        )
        stats["queries"] += int(votes.numel())
        stats["label_one"] += float(labels.sum())
        stats["vote_share"] += float(votes.sum()) / len(teachers)
        stats["lap_scale"] = lap_scale
        return labels, votes

    def moments_acc(num_teachers, votes, lap_scale, l_list):
        a = real_acc(num_teachers, votes, lap_scale, l_list)
        stats["alphas"] = a if stats["alphas"] is None else stats["alphas"] + a
        return a

    sn_pategan.pate, sn_pategan.moments_acc = pate, moments_acc
    model = sn_pategan.PATEGAN(epsilon=args.epsilon, delta=args.delta)
    t0 = time.time()
    model.fit(rows, transformer=tt, continuous_columns=list(range(rows.shape[1])))
    fit_s = time.time() - t0
    np.save(args.out, np.asarray(model.sample(args.samples), dtype=np.float64))
    if args.out_uniform:
        # training feeds the generator torch.rand noise; smartnoise's generate, randn
        with torch.no_grad():
            z = torch.rand(args.samples, model.latent_dim).double()
            syn = tt.inverse_transform(model.generator(z).numpy())
        np.save(args.out_uniform, np.asarray(syn, dtype=np.float64))

    l_list = np.arange(1, 101)
    alphas = stats["alphas"].numpy()
    # smartnoise's loop: eps = min_l (alpha(l) + log(1/delta)) / l over l = 1..100
    eps_final = float(np.min((alphas - math.log(args.delta)) / l_list))
    q = max(stats["queries"], 1)
    info = {
        "epsilon_target": args.epsilon,
        "delta": args.delta,
        "exact_votes": args.exact_votes,
        "num_teachers": model.num_teachers,
        "batch_size": model.batch_size,
        "teacher_iters": model.teacher_iters,
        "student_iters": model.student_iters,
        "latent_dim": model.latent_dim,
        "laplace_inverse_scale": stats["lap_scale"],
        "laplace_std": math.sqrt(2) / stats["lap_scale"],
        "vote_queries": stats["queries"],
        "iterations": stats["queries"] // (model.batch_size * model.student_iters),
        "epsilon_smartnoise_final": eps_final,
        "label_one_share": stats["label_one"] / q,
        "teacher_real_vote_share": stats["vote_share"] / q,
        "preprocessor_epsilon": float(tt.odometer.spent[0]),
        "fit_s": fit_s,
        "torch": torch.__version__,
    }
    with open(args.info, "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
