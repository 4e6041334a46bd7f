"""Env steps per second: vmapped, scanned collection vs a Python loop of jitted steps.

Measures, on this machine, for maze2d-umaze and maze2d-large:
  * `collect_chunk` (expert + dynamics + bookkeeping, `lax.scan` over a vmapped step)
    for several numbers of parallel envs;
  * `episode_returns` with a uniform-random policy (reset + auto-reset `env.step`);
  * a plain Python loop calling the jitted single-env `env.step` (the baseline).
Compilation is excluded (one warm-up call); each timing is the best of `--repeats`.
Prints a table and writes benchmarks/results/env_throughput.json.

    PYTHONPATH=. python benchmarks/env_throughput.py
"""

from __future__ import annotations

import argparse
import os
import platform

import _harness as h
import jax
import jax.numpy as jnp
from tqdm import tqdm

from privrl_jax import envs
from privrl_jax.envs._collect import collect_chunk, init_collect_state
from privrl_jax.envs._expert import make_waypoint_controller


def _random_policy(key, obs):
    del obs
    return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 256, 4096])
    parser.add_argument("--steps", type=int, default=200, help="steps per env per call")
    parser.add_argument(
        "--out",
        default=str(h.RESULTS / "env_throughput.json"),
    )
    args = parser.parse_args()
    rows = []
    jobs = [
        (name, kind, n)
        for name in ("maze2d-umaze", "maze2d-large")
        for kind in ("collect_chunk", "episode_returns")
        for n in args.num_envs
    ] + [(name, "python_loop", 1) for name in ("maze2d-umaze", "maze2d-large")]
    for name, kind, n in tqdm(jobs, desc="benchmarks"):
        env, params = envs.make(name)
        key = jax.random.key(0)
        steps = args.steps
        if kind == "collect_chunk":
            controller = make_waypoint_controller(params, action_noise=0.5)
            state = init_collect_state(key, env, params, n)

            def fn():
                return collect_chunk(key, state, env, params, controller, steps)

        elif kind == "episode_returns":

            def fn():
                return envs.episode_returns(key, env, params, _random_policy, n, steps)

        else:
            _, state0 = env.reset(key, params)
            keys = jax.random.split(key, steps)
            action = jnp.array([0.3, -0.2])

            def fn():
                state = state0
                for k in keys:
                    _, state, _, _, _ = env.step(k, state, action, params)
                return state

        seconds = h.best_of(fn, args.repeats)  # after one compile + warm-up call
        rows.append(
            {
                "env": name,
                "method": kind,
                "num_envs": n,
                "steps_per_env": steps,
                "seconds": seconds,
                "env_steps_per_second": n * steps / seconds,
            }
        )
    print(f"\n{'env':14s} {'method':16s} {'envs':>6s} {'steps/s':>14s}")
    for r in rows:
        print(
            f"{r['env']:14s} {r['method']:16s} {r['num_envs']:6d} "
            f"{r['env_steps_per_second']:14,.0f}"
        )
    payload = {
        "command": "PYTHONPATH=. python benchmarks/env_throughput.py",
        "jax_version": jax.__version__,
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "note": (
            "machine shared with other jobs while measuring; numbers are lower bounds"
        ),
        "rows": rows,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    h.dump_json(args.out, payload, indent=2)
    print(f"wrote {args.out}")
    # Vectorisation must pay off: the widest vmapped collection beats the Python loop.
    for name in ("maze2d-umaze", "maze2d-large"):
        loop = next(
            r for r in rows if r["env"] == name and r["method"] == "python_loop"
        )
        best = max(
            r["env_steps_per_second"]
            for r in rows
            if r["env"] == name and r["method"] == "collect_chunk"
        )
        assert best > 10 * loop["env_steps_per_second"], name


if __name__ == "__main__":
    main()
