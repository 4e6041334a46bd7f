"""The JAX maze2d-*-v1 tasks against D4RL's MuJoCo model (gymnasium-robotics).

Needs the optional extra (`pip install -e ".[mujoco]"`: mujoco, gymnasium-robotics);
without it the script says so and exits. The MuJoCo side is gymnasium-robotics'
PointMaze model (the same MJCF as D4RL's maze2d; its frame is mapped to D4RL's qpos
frame here), stepped as D4RL's `MazeEnv.step` does: clip the action, clip the velocity
to [-5, 5], one `mj_step`. Resets, goal, episode lengths and rewards follow D4RL.

1. Dynamics: from 8 reset states per maze, fixed action sequences (a constant action
   per run, and i.i.d. uniform actions), the largest position gap between the JAX maze
   (float32 as shipped, and float64) and MuJoCo over the first 100 and 300 steps. The
   legacy maze, started at the same physical point, is shown for contrast.
2. Returns under D4RL's reference protocol: uniform random actions, and D4RL's
   stateful waypoint controller run for consecutive episodes (3 controllers x 100
   episodes, as D4RL's script runs 1 x 100), in both backends (independent draws), next
   to D4RL's published reference returns (d4rl/infos.py).
3. Data: D4RL's dataset protocol (`envs.d4rl_collect_chunk`, action noise 0.5) vs
   the same protocol and controller around MuJoCo: steps per goal, reward rate and the
   total-variation distance of the position histograms (half-cell bins); the TV
   between two JAX runs with different seeds is the sampling-noise floor.
4. Throughput: random-policy `episode_returns` with 4096 parallel envs, legacy vs v1.

    PYTHONPATH=. python benchmarks/maze_vs_mujoco.py [--episodes 300]

Writes benchmarks/results/maze_vs_mujoco.{json,md} and prints the Markdown.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import (
    envs,
    provenance,  # noqa: E402
)
from privrl_jax.envs._d4rl_collect import d4rl_collect_chunk, init_d4rl_collect_state
from privrl_jax.envs._d4rl_expert import (
    d4rl_controller_action,
    d4rl_expert_returns,
    init_d4rl_controller_state,
)
from privrl_jax.envs._d4rl_expert import (
    d4rl_controller_action as envs_d4rl_controller_action,
)
from privrl_jax.envs._d4rl_expert import (
    init_d4rl_controller_state as envs_init_d4rl_controller_state,
)
from privrl_jax.envs._expert import make_waypoint_controller
from privrl_jax.envs._maze import maze_dynamics
from privrl_jax.envs._mujoco_eval import MujocoPointMaze
from privrl_jax.envs._reference import D4RL_REFERENCE_RETURNS

MAZES = ("umaze", "medium", "large")  # gymnasium-robotics PointMaze_*-v3 under the hood
OFFSET = 0.2  # D4RL qpos (i, j) = centre of cell (i, j) + 0.2 per axis


def MujocoMaze(name: str, batch: int) -> MujocoPointMaze:
    """`batch` copies of D4RL's MuJoCo model of maze2d-`name`, in D4RL's qpos frame."""
    return MujocoPointMaze(f"maze2d-{name}-v1", batch)


def d4rl_reset(rng: np.random.Generator, params, n: int) -> tuple[np.ndarray, ...]:
    """D4RL's reset_model: a free cell index + U(-0.1, 0.1), velocity N(0, 0.1^2)."""
    cells = np.asarray(params.free_cells, np.float64)
    q = cells[rng.integers(len(cells), size=n)] + rng.uniform(-0.1, 0.1, (n, 2))
    return q, 0.1 * rng.standard_normal((n, 2))


def dynamics_gaps(name: str, num_starts: int, seed: int) -> list[dict]:
    rows = []
    _, params = envs.make(f"maze2d-{name}-v1")
    _, legacy = envs.make(f"maze2d-{name}")
    rng = np.random.default_rng(seed)
    q0, v0 = d4rl_reset(rng, params, num_starts)
    sim = MujocoMaze(name, num_starts)
    for kind in ("constant", "random"):
        if kind == "constant":
            acts = np.repeat(rng.uniform(-1, 1, (1, num_starts, 2)), 300, 0)
        else:
            acts = rng.uniform(-1, 1, (300, num_starts, 2))
        sim.set_state(q0, v0)
        ref = np.stack([sim.step(a)[:, :2] for a in acts])  # [T, B, 2]
        gaps = {}
        for label, p, shift, x64 in (
            ("float32", params, 0.0, False),
            ("float64", params, 0.0, True),
            ("legacy", legacy, OFFSET, False),
        ):
            with jax.enable_x64(x64):
                dtype = jnp.float64 if x64 else jnp.float32

                def body(c, a, p=p):
                    q, v = jax.vmap(maze_dynamics, (0, 0, 0, None))(c[0], c[1], a, p)
                    return (q, v), q

                _, traj = jax.lax.scan(
                    body,
                    (jnp.asarray(q0 + shift, dtype), jnp.asarray(v0, dtype)),
                    jnp.asarray(acts, dtype),
                )
                gap = np.abs(np.asarray(traj, np.float64) - shift - ref).max(-1)
                gaps[label] = (float(gap[:100].max()), float(gap.max()))
        rows.append(
            {
                "maze": name,
                "actions": kind,
                "starts": num_starts,
                **{
                    f"{k}_gap_{n}": v[i]
                    for k, v in gaps.items()
                    for i, n in enumerate((100, 300))
                },
            }
        )
    return rows


def _rewards(q: np.ndarray, goal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dist = np.linalg.norm(q - goal, axis=-1)
    return (dist <= 0.5).astype(np.float64), np.exp(-dist)


def mujoco_returns(
    name: str, episodes: int, controllers: int, seed: int
) -> dict[str, np.ndarray]:
    """Random and expert returns (sparse, dense) in MuJoCo under D4RL's protocol."""
    env, params = envs.make(f"maze2d-{name}-v1")
    goal = np.asarray(params.goal, np.float64)
    steps = int(params.max_steps_in_episode)
    rng = np.random.default_rng(seed)
    out = {}
    sim = MujocoMaze(name, episodes)
    sim.set_state(*d4rl_reset(rng, params, episodes))
    sparse, dense = np.zeros(episodes), np.zeros(episodes)
    for _ in range(steps):
        obs = sim.step(rng.uniform(-1, 1, (episodes, 2)))
        s, d = _rewards(obs[:, :2], goal)
        sparse, dense = sparse + s, dense + d
    out["random_sparse"], out["random_dense"] = sparse, dense
    # The expert: `controllers` controllers, each for consecutive episodes.
    controller = make_waypoint_controller(params)
    act = jax.jit(
        jax.vmap(
            lambda k, s, o: d4rl_controller_action(controller, k, s, o, params.goal)
        )
    )
    cstate = jax.vmap(lambda _: init_d4rl_controller_state(controller))(
        jnp.arange(controllers)
    )
    per = episodes // controllers
    sim = MujocoMaze(name, controllers)
    key = jax.random.key(seed)
    sparse, dense = np.zeros((controllers, per)), np.zeros((controllers, per))
    for e in range(per):
        sim.set_state(*d4rl_reset(rng, params, controllers))
        obs = sim.obs()
        for _ in range(steps):
            key, k = jax.random.split(key)
            a, cstate = act(
                jax.random.split(k, controllers), cstate, jnp.asarray(obs, jnp.float32)
            )
            obs = sim.step(np.asarray(a, np.float64))
            s, d = _rewards(obs[:, :2], goal)
            sparse[:, e] += s
            dense[:, e] += d
    out["expert_sparse"], out["expert_dense"] = sparse.ravel(), dense.ravel()
    return out


def _random_policy(key, obs):
    del obs
    return jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0)


def jax_returns(name: str, episodes: int, controllers: int, seed: int) -> dict:
    out = {}
    for reward in ("sparse", "dense"):
        task = f"maze2d-{name}{'-dense' if reward == 'dense' else ''}-v1"
        env, params = envs.make(task)
        steps = int(params.max_steps_in_episode)
        key_r, key_e = jax.random.split(jax.random.key(seed))
        out[f"random_{reward}"] = np.asarray(
            envs.episode_returns(key_r, env, params, _random_policy, episodes, steps)
        )
        controller = make_waypoint_controller(params)
        out[f"expert_{reward}"] = np.asarray(
            d4rl_expert_returns(
                key_e,
                env,
                params,
                controller,
                controllers,
                episodes // controllers,
                steps,
            )
        ).ravel()
    return out


def throughput(num_envs: int, steps: int, repeats: int) -> list[dict]:
    rows = []
    for name in ("maze2d-umaze", "maze2d-umaze-v1", "maze2d-large", "maze2d-large-v1"):
        env, params = envs.make(name)
        key = jax.random.key(0)

        def fn():
            return envs.episode_returns(
                key, env, params, _random_policy, num_envs, steps
            )

        jax.block_until_ready(fn())
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            best = min(best, time.perf_counter() - t0)
        rows.append(
            {"env": name, "num_envs": num_envs, "steps_per_s": num_envs * steps / best}
        )
    return rows


def _data_stats(
    obs: np.ndarray, timeouts: np.ndarray, rewards: np.ndarray, shape: tuple[int, int]
) -> tuple[dict, np.ndarray]:
    """Steps per goal, reward rate, and the [cells x 2]^2 position histogram."""
    h, w = shape
    hist, _, _ = np.histogram2d(
        obs[:, 0],
        obs[:, 1],
        bins=(2 * h, 2 * w),
        range=((-0.7, h - 0.7), (-0.7, w - 0.7)),
    )
    return {
        "steps_per_goal": float(len(timeouts) / max(timeouts.sum(), 1)),
        "reward_rate": float(rewards.mean()),
    }, hist.ravel() / hist.sum()


def data_protocol(name: str, num_envs: int, steps: int, seed: int) -> dict:
    """D4RL's dataset protocol (noise 0.5): JAX collector vs the same in MuJoCo."""
    env, params = envs.make(f"maze2d-{name}-v1")
    walls = np.asarray(params.walls)
    goal_eval = np.asarray(params.goal, np.float64)
    controller = make_waypoint_controller(params, action_noise=0.5)
    hists, out = [], {"maze": name, "transitions": num_envs * steps}
    for label, s in (("jax", seed), ("jax_reseeded", seed + 1)):
        k0, k1 = jax.random.split(jax.random.key(s))
        state = init_d4rl_collect_state(k0, env, params, controller, num_envs)
        _, tr = d4rl_collect_chunk(k1, state, env, params, controller, steps)
        stats, hist = _data_stats(
            np.asarray(tr.observations).reshape(-1, 4),
            np.asarray(tr.timeouts).ravel(),
            np.asarray(tr.rewards).ravel(),
            walls.shape,
        )
        out.update({f"{label}_{k}": v for k, v in stats.items()})
        hists.append(hist)
    # The same protocol around MuJoCo, with the same (JAX) controller.
    rng = np.random.default_rng(seed + 2)
    cells = np.asarray(params.free_cells, np.float64)

    def goals(n):
        return cells[rng.integers(len(cells), size=n)] + rng.uniform(-0.1, 0.1, (n, 2))

    act = jax.jit(
        jax.vmap(lambda k, c, o, g: envs_d4rl_controller_action(controller, k, c, o, g))
    )
    cstate = jax.vmap(lambda _: envs_init_d4rl_controller_state(controller))(
        jnp.arange(num_envs)
    )
    sim = MujocoMaze(name, num_envs)
    sim.set_state(*d4rl_reset(rng, params, num_envs))
    seen, goal = sim.obs(), goals(num_envs)
    ts = np.zeros(num_envs, int)
    key = jax.random.key(seed + 3)
    obs_log, done_log, rew_log = [], [], []
    for _ in range(steps):
        key, k = jax.random.split(key)
        a, cstate = act(
            jax.random.split(k, num_envs),
            cstate,
            jnp.asarray(seen, jnp.float32),
            jnp.asarray(goal, jnp.float32),
        )
        done = np.asarray(cstate.solved) | (ts >= params.max_steps_in_episode)
        nxt = sim.step(np.asarray(a, np.float64))
        obs_log.append(seen)
        done_log.append(done)
        rew_log.append(_rewards(nxt[:, :2], goal_eval)[0])
        ts = np.where(done, 0, ts + 1)
        goal = np.where(done[:, None], goals(num_envs), goal)
        seen = np.where(done[:, None], seen, nxt)
    stats, hist = _data_stats(
        np.concatenate(obs_log),
        np.concatenate(done_log),
        np.concatenate(rew_log),
        walls.shape,
    )
    out.update({f"mujoco_{k}": v for k, v in stats.items()})
    out["tv_jax_mujoco"] = float(0.5 * np.abs(hists[0] - hist).sum())
    out["tv_jax_jax"] = float(0.5 * np.abs(hists[0] - hists[1]).sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--data-envs", type=int, default=100)
    parser.add_argument("--data-steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(__file__), "results", "maze_vs_mujoco"),
    )
    args = parser.parse_args()
    missing = [
        m
        for m in ("mujoco", "gymnasium_robotics")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        print(
            f"maze_vs_mujoco: needs the optional extra (missing {missing}); "
            'install it with pip install -e ".[mujoco]". Nothing measured.'
        )
        sys.exit(0)
    import gymnasium_robotics
    import mujoco

    t_start = time.perf_counter()
    gaps = [r for name in MAZES for r in dynamics_gaps(name, args.starts, args.seed)]
    returns = []
    for name in MAZES:
        ours = jax_returns(name, args.episodes, args.controllers, args.seed)
        theirs = mujoco_returns(name, args.episodes, args.controllers, args.seed + 1)
        for reward in ("sparse", "dense"):
            task = f"maze2d-{name}{'-dense' if reward == 'dense' else ''}-v1"
            d4rl_random, d4rl_expert = D4RL_REFERENCE_RETURNS[task]
            for policy, published in (("random", d4rl_random), ("expert", d4rl_expert)):
                a, b = ours[f"{policy}_{reward}"], theirs[f"{policy}_{reward}"]
                se = np.hypot(
                    a.std(ddof=1) / np.sqrt(len(a)), b.std(ddof=1) / np.sqrt(len(b))
                )
                returns.append(
                    {
                        "task": task,
                        "policy": policy,
                        "episodes": len(a),
                        "jax_mean": float(a.mean()),
                        "jax_se": float(a.std(ddof=1) / np.sqrt(len(a))),
                        "mujoco_mean": float(b.mean()),
                        "mujoco_se": float(b.std(ddof=1) / np.sqrt(len(b))),
                        "gap_in_se": float(abs(a.mean() - b.mean()) / se)
                        if se
                        else 0.0,
                        "d4rl_published": published,
                    }
                )
    data = [
        data_protocol(name, args.data_envs, args.data_steps, args.seed)
        for name in MAZES
    ]
    speed = throughput(args.num_envs, 200, 3)
    legacy = {r["env"]: r["steps_per_s"] for r in speed}

    md = [
        "## Dynamics: largest position gap to MuJoCo (cells), "
        f"{args.starts} reset states per maze",
        "",
        "| maze | actions | v1 float32, 100 / 300 steps | v1 float64, 100 / 300 | "
        "legacy, 100 / 300 |",
        "|---|---|---|---|---|",
    ]
    for r in gaps:
        md.append(
            f"| {r['maze']} | {r['actions']} | {r['float32_gap_100']:.1e} / "
            f"{r['float32_gap_300']:.1e} | {r['float64_gap_100']:.1e} / "
            f"{r['float64_gap_300']:.1e} | {r['legacy_gap_100']:.2f} / "
            f"{r['legacy_gap_300']:.2f} |"
        )
    md += [
        "",
        f"## Returns under D4RL's protocol ({args.episodes} episodes per "
        f"backend; expert = {args.controllers} controllers x "
        f"{args.episodes // args.controllers} consecutive episodes)",
        "",
        "| task | policy | JAX (mean ± se) | MuJoCo (mean ± se) | gap / se | "
        "D4RL published |",
        "|---|---|---|---|---|---|",
    ]
    for r in returns:
        md.append(
            f"| {r['task']} | {r['policy']} | {r['jax_mean']:.2f} ± {r['jax_se']:.2f}"
            f" | {r['mujoco_mean']:.2f} ± {r['mujoco_se']:.2f} | "
            f"{r['gap_in_se']:.2f} | {r['d4rl_published']:.2f} |"
        )
    md += [
        "",
        "## Data: D4RL's dataset protocol (action noise 0.5, sparse rewards), "
        f"{args.data_envs} streams x {args.data_steps} steps per backend",
        "",
        "| maze | steps per goal, JAX / MuJoCo | reward rate, JAX / MuJoCo | "
        "position TV, JAX vs MuJoCo | TV, JAX vs JAX reseeded |",
        "|---|---|---|---|---|",
    ]
    for r in data:
        md.append(
            f"| {r['maze']} | {r['jax_steps_per_goal']:.1f} / "
            f"{r['mujoco_steps_per_goal']:.1f} | {r['jax_reward_rate']:.3f} / "
            f"{r['mujoco_reward_rate']:.3f} | {r['tv_jax_mujoco']:.3f} | "
            f"{r['tv_jax_jax']:.3f} |"
        )
    md += [
        "",
        f"## Throughput: random-policy episode_returns, {args.num_envs} "
        "parallel envs, 200 steps",
        "",
        "| env | steps/s | ratio to legacy |",
        "|---|---|---|",
    ]
    for r in speed:
        base = legacy[r["env"].removesuffix("-v1")]
        md.append(
            f"| {r['env']} | {r['steps_per_s'] / 1e6:.2f} M | "
            f"{r['steps_per_s'] / base:.2f} |"
        )
    text = "\n".join(md)
    print(text)
    meta = {
        "jax": jax.__version__,
        "mujoco": mujoco.__version__,
        "gymnasium_robotics": gymnasium_robotics.__version__,
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "backend": jax.default_backend(),
        "args": vars(args),
        "seconds": time.perf_counter() - t_start,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(
            {
                "meta": meta,
                "dynamics": gaps,
                "returns": returns,
                "throughput": speed,
                "provenance": provenance(),
            },
            f,
            indent=1,
        )
    with open(args.out + ".md", "w") as f:
        f.write(
            "# maze2d-*-v1 (JAX) vs D4RL's MuJoCo model\n\n"
            f"`PYTHONPATH=. python benchmarks/maze_vs_mujoco.py` (jax {meta['jax']}, "
            f"mujoco {meta['mujoco']}, gymnasium-robotics "
            f"{meta['gymnasium_robotics']}, {meta['cpus']} CPUs, "
            f"{meta['seconds']:.0f} s)\n\n" + text + "\n"
        )

    # The targets (issue 12): MuJoCo's trajectories to float64 precision,
    # returns within two standard errors of MuJoCo's, position histograms TV <= 0.1.
    assert max(r["float64_gap_300"] for r in gaps) < 1e-8, gaps
    worst = max(r["gap_in_se"] for r in returns)
    assert worst < 2.0 or args.episodes < 100, f"returns differ by {worst:.2f} se"
    assert all(r["tv_jax_mujoco"] <= 0.1 for r in data) or args.data_steps < 1000, data


if __name__ == "__main__":
    main()
