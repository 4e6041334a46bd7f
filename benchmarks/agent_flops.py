"""How close the offline-RL agents' updates run to this CPU's matmul rate, and what
that means for the quickstart's time.

For each algorithm at CORL's sizes (batch 256, obs 4, action 2): XLA's cost analysis
gives the FLOPs of one compiled update; a scanned chunk of K updates is timed; and,
interleaved in the same rounds, a 1024 x 1024 float32 matmul gives the rate this CPU
reaches on dense work right now (a load-matched ceiling, not the datasheet's). The
ratio says whether an update is bound by arithmetic (near 1: only less arithmetic,
i.e. fewer or smaller updates, makes it faster) or by overheads. The quickstart's
agent floor is its updates (30k on the release, 10k on the pre-training-only
samples) at the measured rate.

    python benchmarks/agent_flops.py [--updates 200] [--rounds 3]

Writes ``benchmarks/results/agent_flops.{json,md}``.
"""

from __future__ import annotations

import argparse
import os

import _harness as h
import jax
from agents_throughput import synthetic_dataset

from privrl_jax import agents
from privrl_jax.agents._train import make_train_chunk, make_train_step

QUICKSTART_UPDATES = 30_000 + 10_000  # the release's agent + the pre-training anchor's


def update_flops(agent, state, dataset, batch_size: int) -> float:
    """XLA's FLOP count of one compiled update."""
    step = jax.jit(make_train_step(agent, batch_size=batch_size))
    return (
        1e9
        * h.compiled_stats(step.lower(state, dataset, jax.random.key(0)).compile())[
            "gflop"
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algos", nargs="+", default=["td3bc", "iql"])
    ap.add_argument("--updates", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--name", default="agent_flops")
    args = ap.parse_args()

    data = synthetic_dataset(jax.random.key(0), 100_000)
    a = jax.random.normal(jax.random.key(1), (1024, 1024))
    mm = jax.jit(lambda x: x @ x)
    mm_flops = 2 * 1024**3
    runs, fns = {}, {}
    for name in args.algos:
        agent = agents.make_agent(name)
        state = agent.init(jax.random.key(1), data)
        chunk = make_train_chunk(
            agent, batch_size=args.batch_size, num_updates=args.updates
        )
        # Before each chunk, the matmul rate of the moment: 20 calls timed as a block.
        fns[f"mm_{name}"] = lambda: [mm(a) for _ in range(20)][-1]
        fns[name] = lambda chunk=chunk, state=state: chunk(
            state, data, jax.random.key(2)
        )[0]
        runs[name] = {"flops": update_flops(agent, state, data, args.batch_size)}
    load = [os.getloadavg()]
    timings = h.interleave(
        fns,
        rounds=args.rounds,
        order="fixed",
        on_round=lambda r: print(f"round {r + 1}/{args.rounds}", flush=True),
    )
    load.append(os.getloadavg())
    for name, run in runs.items():
        run["times"] = [t / args.updates for t in timings.flat(name)]
        run["mm"] = [t / 20 for t in timings.flat(f"mm_{name}")]

    rows = []
    md = [
        f"1-min load {load[0][0]:.1f} -> {load[1][0]:.1f} on "
        f"{os.cpu_count()} cores; best of {args.rounds} interleaved rounds.",
        "",
        "| algo | GFLOP / update (XLA) | updates/s | GFLOP/s | 1024^2 matmul "
        "GFLOP/s (same rounds) | share of the matmul rate | quickstart agents "
        f"({QUICKSTART_UPDATES // 1000}k updates) at this rate (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        t, m = min(run["times"]), min(run["mm"])
        row = {
            "algo": name,
            "gflop_per_update": run["flops"] / 1e9,
            "updates_per_s": 1 / t,
            "gflops": run["flops"] / t / 1e9,
            "matmul_gflops": mm_flops / m / 1e9,
            "share_of_matmul": (run["flops"] / t) / (mm_flops / m),
            "quickstart_agents_s": QUICKSTART_UPDATES * t,
            "seconds_per_update": run["times"],
            "matmul_s": run["mm"],
        }
        rows.append(row)
        md.append(
            f"| {name} | {row['gflop_per_update']:.3f} | {row['updates_per_s']:.0f} | "
            f"{row['gflops']:.1f} | {row['matmul_gflops']:.1f} | "
            f"{row['share_of_matmul']:.2f} | {row['quickstart_agents_s']:.0f} |"
        )
    text = "\n".join(md) + "\n"
    print(text)
    h.write_outputs(
        h.RESULTS / args.name,
        {"rows": rows, "load": load, "args": vars(args)},
        text,
        indent=None,
    )


if __name__ == "__main__":
    main()
