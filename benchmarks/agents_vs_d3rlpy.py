"""Our TD3+BC and IQL side by side with d3rlpy's, on the same data, in the same env.

Both implementations train with CORL's hyper-parameters on the same D4RL-format HDF5
file (the same transitions: each of our rows becomes its own d3rlpy episode, so
d3rlpy never derives a next observation we did not give it) and are scored in our
JAX env with the same evaluation episodes (the same reset and step keys for both).
Protocol of `privrl_jax.pipelines.privorl_n.agent_scores`: evaluate every --chunk
updates, average the last --final-evals evaluations per seed, then mean +- std over
seeds.

Configs matched to ours (CORL's): batch 256, Adam lr 3e-4 everywhere, gamma 0.99,
tau 5e-3, two critics of [256, 256]; TD3+BC alpha 2.5, policy noise 0.2 clipped at
0.5, actor every 2nd update; IQL expectile 0.7, beta 3, weights capped at 100, actor
lr cosine-decayed to 0 over the run. States are standardised with the statistics of
the training data (ours: `(x - mean) / max(std, 1e-3)`; d3rlpy's scaler is
`(x - mean) / (std + 1e-3)`, so it gets `std = our scale - 1e-3`: the same inputs).
Rewards are used as stored. Differences we leave (d3rlpy's own choices, not CORL's):
d3rlpy's IQL log-std is a sigmoid-squashed parameter in [-5, 2] starting at -1.5
(CORL: a clamped parameter starting at 0), and its advantage weights use the V after
its step (both are options of our IQL: `--ours-set log_std_param=sigmoid
advantage_from=new_v`); its critic losses are summed over the two critics (CORL's IQL
averages; Adam makes the two the same step). With both options on, our IQL update
equals d3rlpy's step for step from the same weights
(tests/agents/test_iql_vs_d3rlpy.py), so what differs between the two columns here
is the random draws (initial weights, minibatches) and those two choices.

Needs the `peers` extra (`pip install torch==2.13.0` first for the CPU wheel, then
`pip install -e ".[peers]"`). Make the data with
`privrl data collect --env maze2d-umaze-dense --size 100000 --seed 0 --out FILE`.

    PYTHONPATH=. python benchmarks/agents_vs_d3rlpy.py --data /tmp/umaze.hdf5 \
        --env maze2d-umaze-dense --updates 20000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import (
    agents,
    envs,
    provenance,  # noqa: E402
)
from privrl_jax.agents._common import fit_state_normalizer
from privrl_jax.agents._rollouts import episode_length, rollout_returns, unpack_step
from privrl_jax.data import Transitions, load_hdf5

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
NumpyPolicy = Callable[[np.ndarray], np.ndarray]
# The curve summary: every evaluation from here on (past the first rise of both agents).
CURVE_FROM = 5_000


_BATCHED: dict[int, tuple[Callable, Callable]] = {}


def _batched_env(env: Any) -> tuple[Callable, Callable]:
    """Jitted, vmapped (reset, step) of an env, built once (not once per eval)."""
    if id(env) not in _BATCHED:
        reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
        step = jax.jit(
            jax.vmap(
                lambda k, s, a, p: unpack_step(env.step(k, s, a, p)),
                in_axes=(0, 0, 0, None),
            )
        )
        _BATCHED[id(env)] = (reset, step)
    return _BATCHED[id(env)]


def host_loop_returns(
    key: jax.Array, policy: NumpyPolicy, env: Any, env_params: Any, num_episodes: int
) -> np.ndarray:
    """Returns of `num_episodes` episodes driven by a NumPy policy, batched.

    The same episodes as `agents.rollout_returns(key, ...)`: episode i resets with
    and steps with the keys that function derives from `split(key, n)[i]`, and
    rewards count up to the first done (inclusive). Only the policy runs outside
    JAX: `policy(obs [n, obs_dim]) -> actions [n, act_dim]`.
    """
    num_steps = episode_length(env, env_params)
    keys = jax.random.split(key, num_episodes)
    k_reset, k_steps = jax.vmap(lambda k: tuple(jax.random.split(k)))(keys)
    step_keys = jax.vmap(lambda k: jax.random.split(k, num_steps))(k_steps)
    reset, step = _batched_env(env)
    obs, state = reset(k_reset, env_params)
    ret = np.zeros(num_episodes)
    alive = np.ones(num_episodes)
    for t in range(num_steps):
        action = np.asarray(policy(np.asarray(obs)), np.float32)
        obs, state, reward, done = step(
            step_keys[:, t], state, jnp.asarray(action), env_params
        )
        ret += alive * np.asarray(reward, np.float64)
        alive *= 1.0 - np.asarray(done, np.float64)
    return ret


def score(env_name: str, returns: np.ndarray) -> dict[str, float]:
    """Mean return and mean normalised score of a batch of episode returns."""
    out = {"return_mean": float(np.mean(returns))}
    out["score_mean"] = float(np.mean(envs.normalized_score(env_name, returns)))
    return out


def eval_key(seed: int, step: int) -> jax.Array:
    """The evaluation episodes after `step` updates of seed `seed`, for both sides."""
    return jax.random.fold_in(jax.random.key(10_000 + seed), step)


def train_ours(
    algo: str, data: Transitions, seed: int, args: argparse.Namespace, env, params
) -> list[dict[str, Any]]:
    """Trains our agent; the evaluation after every chunk."""
    overrides = {"actor_decay_steps": args.updates} if algo == "iql" else {}
    overrides.update(parse_sets(args.ours_set))
    agent = agents.make_agent(algo, **overrides)

    def eval_fn(state, _key):
        step = int(state.step)
        ev = agents.evaluate(
            eval_key(seed, step),
            state,
            act=agent.act,
            env=env,
            env_params=params,
            num_episodes=args.episodes,
            env_name=args.env,
        )
        return {"return_mean": ev["return_mean"], "score_mean": ev["score_mean"]}

    res = agents.train(
        agent,
        data,
        key=jax.random.key(seed),
        num_updates=args.updates,
        chunk_size=args.chunk,
        eval_fn=eval_fn,
        eval_every=args.chunk,
        progress=False,
    )
    return res.evals


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """`KEY=VALUE` agent-config overrides of our side (values parsed as YAML)."""
    import yaml

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--ours-set {item!r}: expected KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def d3rlpy_dataset(data: Transitions):
    """Our transitions as a d3rlpy `MDPDataset`, one two-observation episode each.

    Row i becomes the episode (o_i, n_i) ending in a timeout, whose single
    transition is (o_i, a_i, r_i, n_i, terminal 0); a terminal row becomes the
    one-step terminated episode (o_i), transition (o_i, a_i, r_i, 0, terminal 1).
    So d3rlpy trains on exactly our N transitions.
    """
    import d3rlpy

    o, a = np.asarray(data.observations), np.asarray(data.actions)
    r, d = np.asarray(data.rewards), np.asarray(data.terminals) > 0.5
    n_obs = np.asarray(data.next_observations)
    obs, act, rew, term, tout = [], [], [], [], []
    for i in range(len(r)):
        obs.append(o[i])
        act.append(a[i])
        rew.append(r[i])
        if d[i]:
            term.append(1.0)
            tout.append(0.0)
            continue
        term.append(0.0)
        tout.append(0.0)
        obs.append(n_obs[i])  # never a transition's start: its episode times out
        act.append(a[i])
        rew.append(0.0)
        term.append(0.0)
        tout.append(1.0)
    return d3rlpy.dataset.MDPDataset(
        observations=np.stack(obs).astype(np.float32),
        actions=np.stack(act).astype(np.float32),
        rewards=np.asarray(rew, np.float32),
        terminals=np.asarray(term, np.float32),
        timeouts=np.asarray(tout, np.float32),
        action_space=d3rlpy.constants.ActionSpace.CONTINUOUS,
    )


def d3rlpy_algo(algo: str, data: Transitions, updates: int):
    """d3rlpy's TD3+BC or IQL, configured as our CORL defaults (module docstring)."""
    import d3rlpy

    norm = fit_state_normalizer(jnp.asarray(data.observations), True)
    eps = 1e-3  # d3rlpy's StandardObservationScaler default
    scaler = d3rlpy.preprocessing.StandardObservationScaler(
        mean=np.asarray(norm.shift, np.float64),
        std=np.asarray(norm.scale, np.float64) - eps,
        eps=eps,
    )
    common = {
        "actor_learning_rate": 3e-4,
        "critic_learning_rate": 3e-4,
        "batch_size": 256,
        "gamma": 0.99,
        "tau": 5e-3,
        "n_critics": 2,
        "observation_scaler": scaler,
    }
    if algo == "td3bc":
        cfg = d3rlpy.algos.TD3PlusBCConfig(
            **common,
            target_smoothing_sigma=0.2,
            target_smoothing_clip=0.5,
            alpha=2.5,
            update_actor_interval=2,
        )
    else:
        schedule = d3rlpy.optimizers.CosineAnnealingLRFactory(T_max=updates)
        cfg = d3rlpy.algos.IQLConfig(
            **common,
            expectile=0.7,
            weight_temp=3.0,
            max_weight=100.0,
            actor_optim_factory=d3rlpy.optimizers.AdamFactory(
                lr_scheduler_factory=schedule
            ),
        )
    return cfg.create(device="cpu:0")


def train_d3rlpy(
    algo: str, dataset, data: Transitions, seed: int, args, env, params
) -> list[dict[str, Any]]:
    """Trains d3rlpy's agent; the evaluation after every chunk, in our env."""
    import d3rlpy

    d3rlpy.seed(seed)
    model = d3rlpy_algo(algo, data, args.updates)
    evals = []
    fitter = model.fitter(
        dataset,
        n_steps=args.updates,
        n_steps_per_epoch=args.chunk,
        experiment_name=f"vs_{algo}_{seed}",
        with_timestamp=False,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
        show_progress=False,
        save_interval=10**9,
    )
    for epoch, _ in fitter:
        step = epoch * args.chunk
        rets = host_loop_returns(
            eval_key(seed, step), model.predict, env, params, args.episodes
        )
        evals.append({"step": step, **score(args.env, rets)})
    return evals


def summarise(runs: list[dict[str, Any]], final_evals: int) -> dict[str, Any]:
    """Per-seed mean of the last `final_evals` scores, then mean and std over seeds."""
    per_seed = [
        float(np.mean([e["score_mean"] for e in r["evals"][-final_evals:]]))
        for r in runs
    ]
    return {
        "seeds": [r["seed"] for r in runs],
        "per_seed": per_seed,
        "mean": float(np.mean(per_seed)),
        "std": float(np.std(per_seed, ddof=1)),
    }


def table(results: dict[str, Any], final_evals: int) -> str:
    """Markdown table of the summary."""
    lines = [
        (
            f"| algo | impl | seeds | per-seed score (mean of last {final_evals} "
            f"evals) | mean ± std over seeds | mean of evals >= {CURVE_FROM} |"
        ),
        "|---|---|---:|---|---:|---:|",
    ]
    for algo in ("td3bc", "iql"):
        for impl in ("privrl_jax", "d3rlpy"):
            runs = [
                r for r in results["runs"] if r["algo"] == algo and r["impl"] == impl
            ]
            if not runs:
                continue
            s = summarise(runs, final_evals)
            per = " / ".join(f"{v:.1f}" for v in s["per_seed"])
            curve = curve_means(runs)
            lines.append(
                f"| {algo} | {impl} | {len(runs)} | {per} | "
                f"{s['mean']:.1f} ± {s['std']:.1f} | "
                f"{np.mean(curve):.1f} ± {np.std(curve, ddof=1):.1f} |"
            )
    return "\n".join(lines)


def verdict(results: dict[str, Any], final_evals: int) -> dict[str, Any]:
    """Is our mean over seeds within the seed spread (min..max) of d3rlpy's?

    Also Welch's t-test and the Mann-Whitney U test of the per-seed scores (ours vs
    d3rlpy's), on the protocol's final evaluations and on the whole curve from
    `CURVE_FROM` updates on (`curve_*`), so the spread check comes with a p-value.
    """
    from scipy import stats

    out = {}
    for algo in ("td3bc", "iql"):
        by = {
            impl: [
                r for r in results["runs"] if r["algo"] == algo and r["impl"] == impl
            ]
            for impl in ("privrl_jax", "d3rlpy")
        }
        if not all(by.values()):
            continue
        ours = summarise(by["privrl_jax"], final_evals)
        theirs = summarise(by["d3rlpy"], final_evals)["per_seed"]
        out[algo] = {
            "ours_mean": ours["mean"],
            "d3rlpy_min": min(theirs),
            "d3rlpy_max": max(theirs),
            "within": bool(min(theirs) <= ours["mean"] <= max(theirs)),
            "n": [len(ours["per_seed"]), len(theirs)],
        }
        curves = {impl: curve_means(runs) for impl, runs in by.items()}
        for name, (a, b) in (
            ("final", (ours["per_seed"], theirs)),
            ("curve", (curves["privrl_jax"], curves["d3rlpy"])),
        ):
            if min(len(a), len(b)) < 2:
                continue
            t = stats.ttest_ind(a, b, equal_var=False)
            out[algo][f"{name}_welch_t"] = float(t.statistic)
            out[algo][f"{name}_welch_df"] = float(t.df)
            out[algo][f"{name}_welch_p"] = float(t.pvalue)
            out[algo][f"{name}_mannwhitney_p"] = float(
                stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
            )
    return out


def curve_means(runs: list[dict[str, Any]]) -> list[float]:
    """Per seed, the mean of all evaluations from `CURVE_FROM` updates on."""
    return [
        float(np.mean([e["score_mean"] for e in r["evals"] if e["step"] >= CURVE_FROM]))
        for r in runs
    ]


def write(results: dict[str, Any], args: argparse.Namespace) -> str:
    """Writes JSON and Markdown (atomically) and returns the Markdown table."""
    os.makedirs(RESULTS, exist_ok=True)
    md = table(results, args.final_evals)
    results["verdict"] = verdict(results, args.final_evals)
    base = os.path.join(RESULTS, args.tag)
    for ext, text in (
        ("json", json.dumps({**results, "provenance": provenance()}, indent=1)),
        ("md", md + "\n"),
    ):
        tmp = f"{base}.{ext}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, f"{base}.{ext}")
    return md


def check_same_episodes(env, params, env_name: str) -> None:
    """The host loop and `agents.evaluate` score one policy identically."""
    w = np.array([[0.3, -0.2], [-0.1, 0.4], [0.5, 0.1], [-0.3, -0.6]], np.float32)
    key = jax.random.key(7)
    ref = rollout_returns(
        key,
        jnp.asarray(w),
        act=lambda p, o: jnp.tanh(o @ p),
        env=env,
        env_params=params,
        num_episodes=8,
        num_steps=episode_length(env, params),
    )
    got = host_loop_returns(key, lambda o: np.tanh(o @ w), env, params, 8)
    np.testing.assert_allclose(got, np.asarray(ref), rtol=1e-4, atol=1e-3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="D4RL-format HDF5 file (not needed with --merge)")
    p.add_argument("--env", default="maze2d-umaze-dense")
    p.add_argument("--algos", nargs="+", default=["iql", "td3bc"])
    p.add_argument("--impls", nargs="+", default=["privrl_jax", "d3rlpy"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--updates", type=int, default=20_000)
    p.add_argument("--chunk", type=int, default=1_000)
    p.add_argument("--final-evals", type=int, default=3)
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--tag", default="agents_vs_d3rlpy")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="small MLPs: more threads only add contention on a busy CPU",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON[:IMPL]",
        help="only merge the runs of earlier result files into --tag "
        "(FILE:d3rlpy keeps only that file's d3rlpy runs)",
    )
    p.add_argument(
        "--ours-set",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="agent-config overrides of our side, e.g. "
        "log_std_param=sigmoid advantage_from=new_v (IQL: d3rlpy's choices)",
    )
    args = p.parse_args()
    if args.merge:
        merged = []
        for item in args.merge:
            name, _, impl = item.partition(":")
            with open(name) as f:
                m = json.load(f)
            m["runs"] = [r for r in m["runs"] if not impl or r["impl"] == impl]
            merged.append(m)
        results = {
            **merged[0],
            "runs": [r for m in merged for r in m["runs"]],
            "merged_from": args.merge,
        }
        results["config"]["seeds"] = sorted({r["seed"] for r in results["runs"]})
        print(write(results, args))
        print(json.dumps(results["verdict"], indent=1))
        return
    if not args.data:
        p.error("--data is required (unless --merge)")

    env, params = envs.make(args.env)
    check_same_episodes(env, params, args.env)
    data = load_hdf5(args.data)
    import d3rlpy
    import torch

    torch.set_num_threads(args.torch_threads)
    dataset = d3rlpy_dataset(data) if "d3rlpy" in args.impls else None
    results: dict[str, Any] = {
        "config": vars(args),
        "n_transitions": len(data.rewards),
        "versions": {
            "jax": jax.__version__,
            "d3rlpy": d3rlpy.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "runs": [],
    }
    for seed in args.seeds:
        for algo in args.algos:
            for impl in args.impls:
                t0 = time.time()
                fn = (
                    train_ours
                    if impl == "privrl_jax"
                    else (lambda *a: train_d3rlpy(a[0], dataset, *a[1:]))
                )
                evals = fn(algo, data, seed, args, env, params)
                results["runs"].append(
                    {
                        "algo": algo,
                        "impl": impl,
                        "seed": seed,
                        "seconds": time.time() - t0,
                        "evals": evals,
                    }
                )
                last = np.mean([e["score_mean"] for e in evals[-args.final_evals :]])
                print(
                    f"seed {seed} {algo} {impl}: final {last:.1f} "
                    f"({time.time() - t0:.0f} s)",
                    flush=True,
                )
                md = write(results, args)
    print(md)
    print(json.dumps(results["verdict"], indent=1))


if __name__ == "__main__":
    main()
