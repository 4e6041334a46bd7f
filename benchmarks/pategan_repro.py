"""Issue 26: is the PATE-GAN baseline's fixed-seed run reproducible, and what moves it?

The PATE-GAN run of ``privorl_table1`` (umaze) at seed 0, epsilon 1 (config
``pategan/umaze``, ``privacy.noise_seed = 1000``, the data of
``_results.data_files``), repeated in fresh processes: twice as it is, on one CPU
instead of all, with XLA's single-threaded Eigen, and under XLA CPU code-generation
flags that change only the floating-point rounding (``--xla_cpu_max_isa``, fast
math). Each run records its
fidelity and a SHA-256 of the released arrays; the table says which runs are bit-equal
to the first.

    python benchmarks/pategan_repro.py

Writes ``benchmarks/results/pategan_repro.{json,md}``; runs go to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# tag -> (what it changes, extra environment of its process)
VARIANTS = {
    "as_is": ("nothing (first run)", {}),
    "as_is_again": ("nothing (second run, fresh process)", {}),
    "one_cpu": (
        "pinned to one CPU (sched_setaffinity)",
        {"PATEGAN_REPRO_CPUS": "1"},
    ),
    "eigen_single_thread": (
        "--xla_cpu_multi_thread_eigen=false",
        {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"},
    ),
    "isa_avx512": (
        "--xla_cpu_max_isa=AVX512",
        {"XLA_FLAGS": "--xla_cpu_max_isa=AVX512"},
    ),
    "isa_avx2": (
        "--xla_cpu_max_isa=AVX2",
        {"XLA_FLAGS": "--xla_cpu_max_isa=AVX2"},
    ),
    "isa_avx": ("--xla_cpu_max_isa=AVX", {"XLA_FLAGS": "--xla_cpu_max_isa=AVX"}),
    "isa_sse4_2": (
        "--xla_cpu_max_isa=SSE4_2",
        {"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2"},
    ),
    "fast_math": (
        "--xla_cpu_enable_fast_math=true",
        {"XLA_FLAGS": "--xla_cpu_enable_fast_math=true"},
    ),
}
# The committed row (3449004, host platform ...-fc-v1045, 'AMD EPYC'), for comparison.
COMMITTED = {
    "free_cell_share": 0.02005,
    "sliced_wasserstein": 0.7525275371917237,
    "marginal": 0.39759615384615377,
    "correlation": 0.8930926851048472,
}
KEYS = ("free_cell_share", "sliced_wasserstein", "marginal", "correlation")


def _child(run_dir: Path, sens: str, pub: str, eps: float) -> None:
    """One run in this process; prints its fidelity and the release's hash."""
    cpus = os.environ.get("PATEGAN_REPRO_CPUS")
    if cpus:  # before JAX starts its threads
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: int(cpus)])
    import jax
    import numpy as np

    from privrl_jax import data
    from privrl_jax.pipelines import pategan

    cfg = pategan.load(
        "pategan/umaze",
        [
            "seed=0",
            f"privacy.epsilon={eps}",
            "privacy.noise_seed=1000",
            f"data.sensitive_file={sens}",
            f"data.public_files=[{pub}]",
        ],
    )
    rep = pategan.run(cfg, run_dir)
    syn = data.load_hdf5(run_dir / "synthetic.hdf5")
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(syn):  # the fields, in a fixed order
        h.update(np.ascontiguousarray(leaf).tobytes())
    print(
        "RESULT "
        + json.dumps(
            {
                "fidelity": rep["audit"]["fidelity"],
                "release_sha256": h.hexdigest(),
                "last_round": rep["finetune"].get("last_round"),
                "wall_time_s": rep["wall_time_s"],
            }
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", default=str(ROOT / "runs" / "pategan_repro"))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--name", default="pategan_repro")
    ap.add_argument("--child", nargs=3, metavar=("RUN_DIR", "SENS", "PUB"))
    args = ap.parse_args()
    if args.child:
        _child(Path(args.child[0]), args.child[1], args.child[2], args.epsilon)
        return

    from _results import data_files as _data_files  # noqa: E402  (benchmarks/)
    from _results import dump_json, uptime  # noqa: E402  (benchmarks/_results.py)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sens, pub = _data_files(out, 0)
    t0 = time.time()
    runs = []
    for tag in args.variants:
        what, env = VARIANTS[tag]
        run_dir = out / tag
        if run_dir.exists():
            subprocess.run(["rm", "-rf", str(run_dir)], check=True)

        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--epsilon",
                str(args.epsilon),
                "--child",
                str(run_dir),
                str(sens),
                str(pub),
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
        res = json.loads(line[len("RESULT ") :])
        runs.append({"variant": tag, "changes": what, **res})
        print(tag, {k: res["fidelity"][k] for k in KEYS}, flush=True)

    first = runs[0]["release_sha256"]
    lines = [
        "| run | what it changes | release bit-equal to the first | "
        + " | ".join(KEYS)
        + " |",
        "|---|---|---|" + "---|" * len(KEYS),
    ]
    for r in runs:
        lines.append(
            f"| {r['variant']} | {r['changes']} | "
            f"{'yes' if r['release_sha256'] == first else 'no'} | "
            + " | ".join(f"{r['fidelity'][k]:.4f}" for k in KEYS)
            + " |"
        )
    lines.append(
        "| committed table (3449004) | host ...-fc-v1045 'AMD EPYC' | - | "
        + " | ".join(f"{COMMITTED[k]:.4f}" for k in KEYS)
        + " |"
    )
    load = uptime()
    from privrl_jax import provenance

    host = provenance()
    md = "\n".join(
        [
            "# PATE-GAN seed 0, epsilon "
            f"{args.epsilon:g}: reruns and what moves them (issue 26)",
            "",
            "Config `pategan/umaze`, `seed=0`, `privacy.noise_seed=1000`, the seed-0 "
            "data of `_results.data_files`; each run in a fresh process. One run a "
            "row (no spread). This host: "
            f"`{host['platform']}`, {host['processor']}, "
            f"instruction sets {', '.join(host['cpu_isa'])}. The committed table's "
            "host: `Linux-6.18.44-fc-v1045-x86_64-with-glibc2.36`, 'AMD EPYC' "
            "(instruction sets not recorded then).",
            "",
            *lines,
            "",
            f"Wall time {time.time() - t0:.0f} s; `uptime` at the end: {load}; "
            f"{os.cpu_count()} CPUs.",
            "",
        ]
    )
    print(md)
    res_dir = ROOT / "benchmarks" / "results"
    dump_json(
        res_dir / f"{args.name}.json",
        {"runs": runs, "committed_3449004": COMMITTED, "uptime": load},
        indent=2,
    )
    (res_dir / f"{args.name}.md").write_text(md)


if __name__ == "__main__":
    main()
