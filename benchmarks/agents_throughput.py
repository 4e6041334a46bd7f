"""Agent updates per second: one jitted `lax.scan` chunk vs a Python loop of jitted
steps.

For each algorithm (CORL's default sizes unless --hidden is given) on a synthetic
maze-shaped dataset (obs 4, action 2, 100k transitions, batch 256): compile both
variants, then time K updates each way, --repeats times, and report the best.
Both variants run exactly the same update (`make_train_step`); the difference is
the per-update host dispatch the scan removes. Writes
benchmarks/results/agents_throughput.json and .md.

    PYTHONPATH=. python benchmarks/agents_throughput.py
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import _harness as h
import jax
import jax.numpy as jnp

from privrl_jax import agents
from privrl_jax.agents._train import make_train_chunk, make_train_step
from privrl_jax.data import Transitions


def synthetic_dataset(
    key: jax.Array, n: int, obs_dim: int = 4, act_dim: int = 2
) -> Transitions:
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return Transitions(
        observations=jax.random.normal(k1, (n, obs_dim)),
        actions=jax.random.uniform(k2, (n, act_dim), minval=-1, maxval=1),
        rewards=jax.random.bernoulli(k3, 0.1, (n,)).astype(jnp.float32),
        next_observations=jax.random.normal(k4, (n, obs_dim)),
        terminals=jnp.zeros((n,)),
        timeouts=jnp.zeros((n,)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["td3bc", "iql", "edac"])
    parser.add_argument("--updates", type=int, default=200, help="K for td3bc/iql")
    parser.add_argument("--edac-updates", type=int, default=20, help="K for edac")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--tag", default="agents_throughput")
    args = parser.parse_args()

    data = synthetic_dataset(jax.random.key(0), args.size)
    rows = []
    load_before = os.getloadavg()
    for name in args.algos:
        k = args.edac_updates if name == "edac" else args.updates
        agent = agents.make_agent(name)
        state = agent.init(jax.random.key(1), data)
        chunk = make_train_chunk(agent, batch_size=args.batch_size, num_updates=k)
        step = jax.jit(make_train_step(agent, batch_size=args.batch_size))
        keys = jax.random.split(jax.random.key(2), k)

        def run_scan():
            return chunk(state, data, jax.random.key(2))[0]

        def run_loop():
            s = state
            for key in keys:
                s, _ = step(s, data, key)
            return s

        _, compile_scan = h.timed(run_scan)
        _, compile_step = h.timed(lambda: step(state, data, keys[0]))
        scan_s = h.best_of(run_scan, args.repeats, warmup=0)
        loop_s = h.best_of(run_loop, args.repeats, warmup=0)
        row = {
            "algo": name,
            "config": {
                kk: (list(v) if isinstance(v, tuple) else v)
                for kk, v in vars(agent.config).items()
            },
            "updates_timed": k,
            "scan_updates_per_s": k / scan_s,
            "loop_updates_per_s": k / loop_s,
            "speedup": loop_s / scan_s,
            "compile_scan_s": compile_scan,
            "compile_step_s": compile_step,
        }
        rows.append(row)
        print(
            f"{name}: scan {row['scan_updates_per_s']:.1f} upd/s, loop "
            f"{row['loop_updates_per_s']:.1f} upd/s, x{row['speedup']:.2f}",
            flush=True,
        )

    cells = []
    for r in rows:
        c = r["config"]
        nets = f"{c['hidden_dims']}" + (
            f" x {c['num_critics']} critics" if "num_critics" in c else ""
        )
        cells.append(
            (
                r["algo"],
                nets,
                f"{r['scan_updates_per_s']:.1f}",
                f"{r['loop_updates_per_s']:.1f}",
                f"{r['speedup']:.2f}",
                f"{r['compile_scan_s']:.1f} / {r['compile_step_s']:.1f}",
            )
        )
    head = ("algo", "networks", "scan (upd/s)", "python loop of jitted steps (upd/s)")
    table = h.markdown_table((*head, "scan speed-up", "compile scan / step (s)"), cells)
    print(table)
    payload = {
        "command": "PYTHONPATH=. python " + " ".join(sys.argv),
        "jax_version": jax.__version__,
        "platform": platform.platform(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "batch_size": args.batch_size,
        "dataset_size": args.size,
        "results": rows,
    }
    h.write_outputs(h.RESULTS / args.tag, payload, table)


if __name__ == "__main__":
    main()
