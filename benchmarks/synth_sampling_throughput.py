"""EDM sampling throughput of the residual-MLP synthesizer, in transitions/s.

Configurations (input dim, width, depth, sampling steps, batch):

* ``cpu``: the CPU-scale synthesizer on maze transitions (13 encoded dims, width 256,
  depth 4) with 32 sampling steps;
* ``cpu128``: the same network with the paper's 128 steps;
* ``paper``: the paper-scale network (130 dims, width 1024, depth 6, ~6.6M params)
  with a few steps; at 128 steps the time scales linearly (each step is two denoiser
  calls, the last one), so ``transitions_per_s_at_128`` extrapolates it.

Throughput is the median over ``--repeats`` timed calls after one compile-and-run.

    python benchmarks/synth_sampling_throughput.py
    python benchmarks/synth_sampling_throughput.py --configs paper --paper-steps 8

Writes benchmarks/results/synth_sampling_throughput.json and .md and prints the table.
"""

from __future__ import annotations

import argparse
import itertools
import os

import _harness as h
import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from privrl_jax.diffusion import EDMDenoiser, ResidualMLP, edm_sample

# name: (input dim, width, depth, sampling steps, batch)
CONFIGS = {
    "cpu": (13, 256, 4, 32, 4096),
    "cpu128": (13, 256, 4, 128, 4096),
    "paper": (130, 1024, 6, 4, 1024),
}


def measure(
    name: str, dim: int, width: int, depth: int, steps: int, batch: int, repeats: int
) -> dict:
    model = ResidualMLP(width=width, depth=depth)
    params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((dim,)), jnp.zeros(()))
    denoiser = EDMDenoiser(model.apply)
    n_params = h.num_params(params)
    seeds = itertools.count()

    def run():
        out = edm_sample(
            jax.random.key(next(seeds)),
            denoiser,
            params,
            num_samples=batch,
            dim=dim,
            num_steps=steps,
        )
        assert out.shape == (batch, dim) and bool(jnp.all(jnp.isfinite(out)))
        return out

    _, first = h.timed(run)  # compile + first run
    med = h.interleave({"s": run}, rounds=repeats, warmup=0).median("s")
    evals = 2 * steps - 1
    return {
        "config": name,
        "dim": dim,
        "width": width,
        "depth": depth,
        "params": int(n_params),
        "steps": steps,
        "denoiser_calls": evals,
        "batch": batch,
        "compile_and_first_s": first,
        "median_s": med,
        "transitions_per_s": batch / med,
        "transitions_per_s_at_128": batch / (med * (2 * 128 - 1) / evals),
        "device": str(jax.devices()[0].platform),
        "device_kind": jax.devices()[0].device_kind,
        # Shared machines: the 1-minute load average says how contended the CPU was.
        "load_average_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--paper-steps", type=int, default=CONFIGS["paper"][3])
    ap.add_argument("--paper-batch", type=int, default=CONFIGS["paper"][4])
    args = ap.parse_args()
    configs = dict(CONFIGS)
    dim, width, depth, _, _ = configs["paper"]
    configs["paper"] = (dim, width, depth, args.paper_steps, args.paper_batch)
    names = args.configs.split(",")
    for name in names:
        if name not in configs:
            raise ValueError(f"unknown config {name!r}; choose from {sorted(configs)}.")

    rows = [
        measure(name, *configs[name], repeats=args.repeats)
        for name in tqdm(names, desc="synth_sampling_throughput")
    ]
    cells = [
        (
            r["config"],
            f"{r['params']:,}",
            r["dim"],
            r["steps"],
            r["batch"],
            f"{r['median_s']:.3f}",
            f"{r['transitions_per_s']:,.0f}",
            f"{r['transitions_per_s_at_128']:,.0f}",
        )
        for r in rows
    ]
    head = ("config", "params", "dim", "steps", "batch", "median s", "transitions/s")
    table = h.markdown_table((*head, "transitions/s at 128 steps"), cells)
    device = f"{rows[0]['device']} ({rows[0]['device_kind']})" if rows else "none"
    print(table)
    h.write_outputs(
        h.RESULTS / "synth_sampling_throughput",
        rows,
        f"# EDM sampling throughput on {device}, median of {args.repeats} calls\n\n"
        f"{table}\n",
    )
    # A broken sampler or a silent fallback to a much slower path shows up here.
    for r in rows:
        assert r["transitions_per_s"] > 0 and np.isfinite(r["transitions_per_s"])


if __name__ == "__main__":
    main()
