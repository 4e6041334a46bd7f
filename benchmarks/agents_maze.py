"""Offline agents trained on maze2d data: mean +- std normalised score over seeds.

For every (env, algo, seed) it collects (once per env and data kind) a D4RL-style
dataset, trains the agent for --updates updates in jitted `lax.scan` chunks and
evaluates the deterministic policy over --episodes episodes from the env's reset
distribution. Two data kinds:

  * expert: the noisy waypoint controller (D4RL's maze2d protocol,
    `privrl_jax.envs.collect_dataset`, action noise 0.5);
  * random: actions uniform in [-1, 1]^2 (a sanity check: a policy trained on it
    should score near 0, the uniform-random reference).

Rewards are always those of the evaluation task (fixed goal). Results are written
after every run (atomically) to benchmarks/results/agents_maze.json, and a Markdown
table to benchmarks/results/agents_maze.md.

    PYTHONPATH=. python benchmarks/agents_maze.py \
        --envs maze2d-umaze maze2d-medium --algos td3bc iql edac --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from privrl_jax import (
    agents,
    envs,
    provenance,  # noqa: E402
)
from privrl_jax.data import Transitions

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def collect_random(
    key: jax.Array, env_name: str, size: int, num_envs: int = 100
) -> Transitions:
    """`size` transitions of uniform-random actions, episodes of the env's length."""
    env, params = envs.make(env_name)
    steps = -(-size // num_envs)

    def stream(key):
        k_reset, k_steps = jax.random.split(key)
        obs, state = env.reset(k_reset, params)

        def body(carry, k):
            obs, state = carry
            k_act, k_step = jax.random.split(k)
            action = jax.random.uniform(k_act, (2,), minval=-1.0, maxval=1.0)
            next_obs, state, reward, done, info = env.step(
                k_step, state, action, params
            )
            row = Transitions(
                observations=obs,
                actions=action,
                rewards=reward,
                next_observations=info.get("final_observation", next_obs)
                if isinstance(info, dict)
                else next_obs,
                terminals=jnp.asarray(info["terminated"], jnp.float32),
                timeouts=jnp.asarray(info["truncated"], jnp.float32),
            )
            return (next_obs, state), row

        _, rows = jax.lax.scan(body, (obs, state), jax.random.split(k_steps, steps))
        return rows

    rows = jax.jit(jax.vmap(stream))(jax.random.split(key, num_envs))
    rows = jax.tree.map(lambda x: np.asarray(x).reshape(-1, *x.shape[2:])[:size], rows)
    return Transitions(
        **{k: jnp.asarray(v, jnp.float32) for k, v in vars(rows).items()}
    )


def write_json_atomic(path: str, payload: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({**payload, "provenance": provenance()}, f, indent=2)
    os.replace(tmp, path)


def summarise(runs: list[dict]) -> list[dict]:
    """Groups runs by (env, data, algo): mean +- std over seeds of the final
    normalised score, and (as CORL also reports) of the best evaluation of each run."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["env"], r["data"], r["algo"]), []).append(r)
    rows = []
    for (env, data, algo), rs in sorted(groups.items()):
        scores = np.array([r["final"]["score_mean"] for r in rs])
        best = np.array([max(c["score_mean"] for c in r["curve"]) for r in rs])
        rows.append(
            {
                "env": env,
                "data": data,
                "algo": algo,
                "seeds": [r["seed"] for r in rs],
                "score_mean": float(scores.mean()),
                "score_std": float(scores.std(ddof=1)),
                "scores": scores.tolist(),
                "best_eval_mean": float(best.mean()),
                "best_eval_std": float(best.std(ddof=1)),
                "updates": rs[0]["updates"],
                "hidden_dims": rs[0]["config"]["hidden_dims"],
                "train_seconds_mean": float(np.mean([r["train_seconds"] for r in rs])),
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| env | data | algo | hidden | seeds | updates | final score (mean ± std) "
        "| per seed | best eval (mean ± std) | train s/seed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per_seed = ", ".join(f"{s:.1f}" for s in r["scores"])
        lines.append(
            f"| {r['env']} | {r['data']} | {r['algo']} | {r['hidden_dims']} "
            f"| {len(r['seeds'])} | {r['updates']} "
            f"| {r['score_mean']:.1f} ± {r['score_std']:.1f} | {per_seed} "
            f"| {r['best_eval_mean']:.1f} ± {r['best_eval_std']:.1f} "
            f"| {r['train_seconds_mean']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def combine(tags: list[str], out_tag: str) -> None:
    """Merges the runs of several result files
    (e.g. runs done in parallel processes)."""
    runs, commands = [], []
    for tag in tags:
        with open(os.path.join(RESULTS, f"{tag}.json")) as f:
            part = json.load(f)
        runs += part["runs"]
        commands.append(part["command"])
    payload = {"commands": commands, "runs": runs, "summary": summarise(runs)}
    write_json_atomic(os.path.join(RESULTS, f"{out_tag}.json"), payload)
    with open(os.path.join(RESULTS, f"{out_tag}.md"), "w") as f:
        f.write(markdown(payload["summary"]))
    print(markdown(payload["summary"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["maze2d-umaze", "maze2d-medium"])
    parser.add_argument("--algos", nargs="+", default=["td3bc", "iql", "edac"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--data", nargs="+", default=["expert", "random"], choices=["expert", "random"]
    )
    parser.add_argument(
        "--random-algos",
        nargs="+",
        default=["td3bc"],
        help="algorithms trained on the random-action data",
    )
    parser.add_argument(
        "--random-envs",
        nargs="+",
        default=["maze2d-umaze"],
        help="envs on which the random-data check runs",
    )
    parser.add_argument(
        "--size", type=int, default=100_000, help="transitions per dataset"
    )
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument(
        "--edac-updates",
        type=int,
        default=None,
        help="EDAC's update count (default: --updates)",
    )
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--eval-every", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument(
        "--hidden",
        type=int,
        nargs="+",
        default=None,
        help="hidden widths for all agents (default: CORL's per agent)",
    )
    parser.add_argument("--edac-hidden", type=int, nargs="+", default=None)
    parser.add_argument("--edac-critics", type=int, default=None)
    parser.add_argument("--tag", default="agents_maze")
    parser.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="TAG",
        help="only merge the results of these tags into --tag",
    )
    args = parser.parse_args()
    if args.combine:
        combine(args.combine, args.tag)
        return

    out_json = os.path.join(RESULTS, f"{args.tag}.json")
    out_md = os.path.join(RESULTS, f"{args.tag}.md")
    os.makedirs(RESULTS, exist_ok=True)
    payload = {
        "command": "PYTHONPATH=. python " + " ".join(sys.argv),
        "jax_version": jax.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "args": vars(args),
        "runs": [],
        "summary": [],
    }

    # Seeds in the outer loop, so a run cut short still has every algorithm.
    jobs = []
    for env_name in args.envs:
        for data in args.data:
            if data == "random" and env_name not in args.random_envs:
                continue
            algos = args.algos if data == "expert" else args.random_algos
            for seed in args.seeds:
                for algo in algos:
                    jobs.append((env_name, data, algo, seed))
    datasets: dict[tuple[str, str], Transitions] = {}
    for env_name, data, algo, seed in tqdm.tqdm(jobs, desc="runs"):
        if (env_name, data) not in datasets:
            k = jax.random.key(12345)
            t0 = time.perf_counter()
            datasets[(env_name, data)] = (
                envs.collect_dataset(k, env_name, args.size)
                if data == "expert"
                else collect_random(k, env_name, args.size)
            )
            print(
                f"collected {data} {env_name}: {args.size} in "
                f"{time.perf_counter() - t0:.0f}s",
                flush=True,
            )
        dataset = datasets[(env_name, data)]
        env, params = envs.make(env_name)
        overrides: dict = {}
        if args.hidden:
            overrides["hidden_dims"] = tuple(args.hidden)
        if algo == "edac":
            if args.edac_hidden:
                overrides["hidden_dims"] = tuple(args.edac_hidden)
            if args.edac_critics:
                overrides["num_critics"] = args.edac_critics
        updates = (
            args.edac_updates
            if (algo == "edac" and args.edac_updates)
            else args.updates
        )
        if algo == "iql":
            overrides["actor_decay_steps"] = updates  # CORL: cosine over the whole run
        agent = agents.make_agent(algo, **overrides)

        def eval_fn(
            state,
            key,
            agent=agent,
            env=env,
            params=params,
            env_name=env_name,
            episodes=args.episodes,
        ):
            res = agents.evaluate(
                key,
                state,
                act=agent.act,
                env=env,
                env_params=params,
                num_episodes=episodes,
                env_name=env_name,
            )
            return {
                "return_mean": res["return_mean"],
                "score_mean": res["score_mean"],
                "score_std": res["score_std"],
            }

        t0 = time.perf_counter()
        result = agents.train(
            agent,
            dataset,
            key=jax.random.key(seed),
            num_updates=updates,
            chunk_size=args.chunk,
            eval_fn=eval_fn,
            eval_every=args.eval_every if args.eval_every <= updates else None,
        )
        seconds = time.perf_counter() - t0
        run = {
            "env": env_name,
            "data": data,
            "algo": algo,
            "seed": seed,
            "updates": updates,
            "dataset_size": len(dataset),
            "config": {
                k: (list(v) if isinstance(v, tuple) else v)
                for k, v in vars(agent.config).items()
            },
            "train_seconds": seconds,
            "curve": result.evals,
            "final": result.evals[-1],
            "final_critic_loss": float(result.metrics["critic_loss"][-1]),
        }
        payload["runs"].append(run)
        payload["summary"] = summarise(payload["runs"])
        write_json_atomic(out_json, payload)
        with open(out_md + ".tmp", "w") as f:
            f.write(markdown(payload["summary"]))
        os.replace(out_md + ".tmp", out_md)
        print(
            f"{env_name} {data} {algo} seed {seed}: score "
            f"{run['final']['score_mean']:.1f} ({seconds:.0f}s)",
            flush=True,
        )

    print(markdown(payload["summary"]))


if __name__ == "__main__":
    main()
