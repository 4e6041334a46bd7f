"""Why IQL on real maze2d-umaze-dense-v1 data scores ~6 after 10k updates: the budget.

Trains CORL's IQL (`actor_decay_steps` = the run) on two 101k-transition datasets of
maze2d-umaze-dense-v1 and prints the learning curve (50 evaluation episodes every
--eval-every updates, our JAX maze, D4RL's reference returns):

* `d4rl`: D4RL's dataset protocol (`envs.collect_dataset`, key 0, action noise 0.5):
  one stream per collector towards random goals (1 free cell in 7 is the evaluation
  goal's), the reward relabelled with the fixed evaluation goal;
* `task`: the same controller and noise steering to the evaluation goal, 337 episodes
  of 300 steps from the env's resets (a fresh plan each episode): data of the task.

The curves and the Q means show where the score comes from (docs/evaluator.md).

    PYTHONPATH=. python benchmarks/agents_v1_budget.py --data d4rl --updates 30000 \
        --seed 1
    PYTHONPATH=. python benchmarks/agents_v1_budget.py --data task --updates 10000
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import (
    agents,
    envs,
    provenance,  # noqa: E402
)
from privrl_jax.data import Transitions
from privrl_jax.envs._d4rl_expert import (
    d4rl_controller_action,
    init_d4rl_controller_state,
)
from privrl_jax.envs._expert import make_waypoint_controller

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ENV = "maze2d-umaze-dense-v1"


def task_data(num_episodes: int, noise: float = 0.5) -> Transitions:
    """D4RL's controller (with `noise`) steering to the evaluation goal, per episode."""
    env, params = envs.make(ENV)
    ctrl = make_waypoint_controller(params, action_noise=noise)
    steps = int(params.max_steps_in_episode)

    def episode(k):
        k_reset, k_steps = jax.random.split(k)
        obs, st = env.reset_env(k_reset, params)

        def step(c, kt):
            obs, st, cs = c
            k_act, k_env = jax.random.split(kt)
            a, cs = d4rl_controller_action(ctrl, k_act, cs, obs, params.goal)
            nobs, st, r, _, _ = env.step_env(k_env, st, a, params)
            return (nobs, st, cs), (obs, a, r, nobs)

        init = (obs, st, init_d4rl_controller_state(ctrl))
        _, out = jax.lax.scan(step, init, jax.random.split(k_steps, steps))
        return out

    o, a, r, no = jax.jit(jax.vmap(episode))(
        jax.random.split(jax.random.key(0), num_episodes)
    )
    flat = lambda x: x.reshape((-1,) + x.shape[2:])
    zeros = jnp.zeros(num_episodes * steps)
    return Transitions(
        observations=flat(o),
        actions=flat(a),
        rewards=flat(r),
        next_observations=flat(no),
        terminals=zeros,
        timeouts=zeros,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", choices=["d4rl", "task"], default="d4rl")
    p.add_argument("--size", type=int, default=101_000)
    p.add_argument("--updates", type=int, default=30_000)
    p.add_argument("--eval-every", type=int, default=3_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    env, params = envs.make(ENV)
    if args.data == "d4rl":
        data = envs.collect_dataset(jax.random.key(0), ENV, args.size, action_noise=0.5)
    else:
        data = task_data(args.size // int(params.max_steps_in_episode))
    goal = np.asarray(params.goal)
    pos = np.asarray(data.next_observations)[:, :2]
    stats = {
        "transitions": len(data),
        "reward_mean": float(np.mean(data.rewards)),
        "share_within_0.5_of_goal": float(
            np.mean(np.linalg.norm(pos - goal, axis=1) <= 0.5)
        ),
    }
    agent = agents.make_agent("iql", actor_decay_steps=args.updates)

    def eval_fn(state, k):
        ev = agents.evaluate(
            k,
            state,
            act=agent.act,
            env=env,
            env_params=params,
            num_episodes=50,
            env_name=ENV,
        )
        return {m: float(ev[m]) for m in ("return_mean", "score_mean")}

    t0 = time.time()
    res = agents.train(
        agent,
        data,
        key=jax.random.key(args.seed),
        num_updates=args.updates,
        chunk_size=1000,
        eval_fn=eval_fn,
        eval_every=args.eval_every,
        progress=False,
    )
    q = dict(zip(res.metrics["step"].tolist(), res.metrics["q_mean"].tolist()))
    curve = [{**e, "q_mean": q[e["step"]]} for e in res.evals]
    out = {
        "config": vars(args),
        "env": ENV,
        "data_stats": stats,
        "curve": curve,
        "seconds": time.time() - t0,
        "jax": jax.__version__,
    }
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"agents_v1_budget_{args.data}_s{args.seed}.json")
    with open(path, "w") as f:
        json.dump({**out, "provenance": provenance()}, f, indent=1)
    print(json.dumps(stats))
    print("| updates | score | return | Q mean |\n|---:|---:|---:|---:|")
    for e in curve:
        print(
            f"| {e['step']} | {e['score_mean']:.1f} | {e['return_mean']:.1f} | "
            f"{e['q_mean']:.2f} |"
        )


if __name__ == "__main__":
    main()
