"""Reference returns for normalised scores: uniform-random and expert policies.

For every maze2d task (sparse and dense), runs N episodes (default 1000, >= 100) of
  * random: actions uniform in [-1, 1]^2 (D4RL's "random" reference), and
  * expert: the noise-free waypoint controller steering to the evaluation goal,
from the env's own reset distribution, for the full episode length. Prints a table and
writes benchmarks/results/reference_returns.json. The means are what
privrl_jax/envs/_reference.py stores.

    PYTHONPATH=. python benchmarks/reference_returns.py --episodes 1000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import numpy as np
from tqdm import tqdm

from privrl_jax import (
    envs,
    provenance,  # noqa: E402
)
from privrl_jax.envs._expert import make_waypoint_controller, waypoint_action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        default=os.path.join(
            os.path.dirname(__file__), "results", "reference_returns.json"
        ),
    )
    args = parser.parse_args()
    if args.episodes < 100:
        raise ValueError(
            f"--episodes must be >= 100 for stable references, got {args.episodes}"
        )

    def random_policy(key, obs):
        del obs
        return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)

    key = jax.random.key(args.seed)
    results = {}
    # The legacy mazes (unsuffixed names); the -v1 tasks use D4RL's published
    # references (experiment maze_vs_mujoco holds their measurement).
    legacy = [n for n in envs.MAZE_ENVS if not n.endswith(("-v1", "-legacy"))]
    for name in tqdm(legacy, desc="envs"):
        env, params = envs.make(name)
        controller = make_waypoint_controller(params, action_noise=0.0)
        goal = params.goal

        def expert_policy(key, obs, controller=controller, goal=goal):
            return waypoint_action(controller, key, obs, goal)

        row = {"episode_length": int(params.max_steps_in_episode)}
        for label, policy in (("random", random_policy), ("expert", expert_policy)):
            key, sub = jax.random.split(key)
            t0 = time.perf_counter()
            returns = np.asarray(
                envs.episode_returns(
                    sub,
                    env,
                    params,
                    policy,
                    args.episodes,
                    int(params.max_steps_in_episode),
                )
            )
            row[label] = {
                "mean": float(returns.mean()),
                "std": float(returns.std()),
                "stderr": float(returns.std() / np.sqrt(len(returns))),
                "min": float(returns.min()),
                "max": float(returns.max()),
                "episodes": len(returns),
                "seconds": time.perf_counter() - t0,
            }
        results[name] = row

    print(
        f"\n{'env':24s} {'len':>5s} {'random (mean ± se)':>22s} "
        f"{'expert (mean ± se)':>22s}"
    )
    for name, row in results.items():
        r, e = row["random"], row["expert"]
        print(
            f"{name:24s} {row['episode_length']:5d} "
            f"{r['mean']:12.3f} ± {r['stderr']:7.3f} {e['mean']:12.3f} ± "
            f"{e['stderr']:7.3f}"
        )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    payload = {
        "command": "PYTHONPATH=. python benchmarks/reference_returns.py "
        f"--episodes {args.episodes} --seed {args.seed}",
        "jax_version": jax.__version__,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "results": results,
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({**payload, "provenance": provenance()}, f, indent=2)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    # The expert must beat random by a wide margin on every task, or the normalised
    # score is meaningless.
    for name, row in results.items():
        assert row["expert"]["mean"] > row["random"]["mean"] + 10 * (
            row["expert"]["stderr"] + row["random"]["stderr"]
        ), name


if __name__ == "__main__":
    main()
