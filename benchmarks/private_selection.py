"""Private policy selection (issue 51): score K = 8 candidate policies on sensitive
trajectories with GPOPE, pick one with ``privacy.select``, and compare with the oracle,
a random choice and "the last one"; plus the selection's epsilon against naive
composition (every candidate scored once).

Each score is one GPOPE run (a DP plan over trajectories at ``--score-epsilon``,
:func:`privrl_jax.ope.gpope_policy_value`: Q of a deterministic policy on state-action
features, no importance ratios); ``privacy.select`` draws K from a logarithmic
distribution of mean ``--mean-runs``, scores a uniformly drawn candidate each run,
releases the best and records one ledger entry. The scorer's error (one DP score of
every candidate, and noiseless LSTDQ) against the true values is reported beside it.

Tasks (``--task``):

- ``tabular`` (default): a random 3-state, 2-action MDP (seeded); the candidates are
  its 8 deterministic policies, the sensitive data m trajectories of a uniform
  behaviour policy, the start distribution uniform (public), features one-hot (s, a);
  true values by a linear solve.
- ``maze``: maze2d-umaze (legacy physics), a noisy waypoint expert's trajectories, 6
  waypoint controllers and 2 fixed-direction pushes; RBF features from a random
  policy's (public) observations crossed with action bins; true values by Monte Carlo.
  The noiseless LSTDQ there misses the true values (RMSE 2.8 at 8 centres, 11.9 at 16,
  622 at 32, on values 1.8 to 5.1): not a scorer to trust yet, so no table is stored
  for it.

Usage: python benchmarks/private_selection.py [--task tabular] [--seeds 5]
Writes benchmarks/results/private_selection_<task>_<distribution>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import dump_json, write_text  # noqa: E402

from privrl_jax import envs, ope, privacy  # noqa: E402
from privrl_jax.envs._expert import make_waypoint_controller, waypoint_action
from privrl_jax.ope._policy_value import (
    StateActionFeatures,
    lstd_policy_value,
    policy_evaluation_data,
    start_features,
)

RESULTS = Path(__file__).resolve().parent / "results"
DELTA = 1e-5


def rollout(env, params, policy, key, num, steps):
    """[num, steps] observations, actions, rewards, next observations of ``policy``
    (``policy(key, obs)``) from env resets."""

    def one(k):
        k0, ks = jax.random.split(k)
        obs, state = env.reset(k0, params)

        def body(carry, kt):
            obs, state = carry
            ka, ke = jax.random.split(kt)
            act = policy(ka, obs)
            nobs, state, r, _, _ = env.step(ke, state, act, params)
            return (nobs, state), (obs, act, r, nobs)

        _, out = jax.lax.scan(body, (obs, state), jax.random.split(ks, steps))
        return out

    return jax.jit(jax.vmap(one))(jax.random.split(key, num))


def candidates(params):
    """K = 8 deterministic policies ``obs -> action`` and their names."""
    out = []
    for p_gain in (0.3, 1.0, 10.0):
        for d_gain in (0.0, 1.0):
            ctrl = make_waypoint_controller(params, p_gain=p_gain, d_gain=d_gain)
            out.append(
                (
                    f"waypoint p={p_gain:g} d={d_gain:g}",
                    lambda obs, c=ctrl: waypoint_action(
                        c, jax.random.key(0), obs, params.goal
                    ),
                )
            )
    for name, direction in (("push +row", (1.0, 0.0)), ("push -col", (0.0, -1.0))):
        out.append((name, lambda obs, d=direction: jnp.asarray(d, jnp.float32)))
    return out


def true_values(env, params, policies, discount, key, num, steps):
    """Discounted returns from env resets, Monte Carlo."""
    weights = discount ** jnp.arange(steps)
    vals = []
    for _, pi in policies:
        _, _, r, _ = rollout(env, params, lambda k, o: pi(o), key, num, steps)
        vals.append(float(jnp.mean(r @ weights)))
    return np.array(vals)


def maze_task(args):
    """maze2d-umaze: names, true values, and ``data(seed)`` -> (per-candidate GTD2
    data, per-candidate start features)."""
    env, params = envs.make("maze2d-umaze", max_steps_in_episode=10_000)
    policies = candidates(params)
    k_true, k_public, k_starts = jax.random.split(jax.random.key(2026), 3)
    truth = true_values(
        env, params, policies, args.discount, k_true, 256 if args.quick else 1024, 80
    )
    # Public: a uniformly random policy's observations (RBF centres) and resets.
    uniform = lambda k, o: jax.random.uniform(k, (2,), minval=-1.0, maxval=1.0)
    pub_obs, _, _, _ = rollout(env, params, uniform, k_public, 64, 50)
    rbf = ope.RBFFeatures.from_public(
        np.asarray(pub_obs).reshape(-1, 4), args.centers, seed=0
    )
    feats = StateActionFeatures(rbf, 2, args.action_bins)
    reset = lambda k: env.reset(k, params)[0]
    starts = jax.vmap(reset)(jax.random.split(k_starts, 512))
    start_phi = [start_features(starts, pi, feats) for _, pi in policies]
    behaviour = make_waypoint_controller(params, action_noise=1.0)
    behave = lambda k, o: waypoint_action(behaviour, k, o, params.goal)

    def data(seed):
        obs, act, rew, nobs = rollout(
            env, params, behave, jax.random.key(seed), args.trajectories, args.horizon
        )
        mask = jnp.ones(rew.shape, bool)
        return [
            policy_evaluation_data(obs, act, rew, nobs, mask, pi, feats, args.discount)
            for _, pi in policies
        ], start_phi

    return [n for n, _ in policies], truth, data


def tabular_task(args):
    """A random 3-state, 2-action MDP: the K = 8 candidates are all its deterministic
    policies, scored with one-hot (s, a) features (exact values by a linear solve)."""
    n_s, n_a = 3, 2
    rng = np.random.default_rng(2026)
    trans = rng.dirichlet(np.ones(n_s), size=(n_s, n_a))
    reward = rng.uniform(0, 1, size=(n_s, n_a))
    pis = [np.array([(p >> i) & 1 for i in range(n_s)]) for p in range(2**n_s)]
    feats = lambda o, a: jnp.outer(o, a).reshape(-1)
    policy = lambda pi: lambda o: jax.nn.one_hot(jnp.asarray(pi)[jnp.argmax(o)], n_a)

    def value(pi):
        sel = np.zeros((n_s, n_s * n_a))
        sel[np.arange(n_s), np.arange(n_s) * n_a + pi] = 1.0
        q = np.linalg.solve(
            np.eye(n_s * n_a) - args.discount * trans.reshape(-1, n_s) @ sel,
            reward.reshape(-1),
        )
        return float(np.mean(q.reshape(n_s, n_a)[np.arange(n_s), pi]))

    truth = np.array([value(pi) for pi in pis])
    start_phi = [start_features(jnp.eye(n_s), policy(pi), feats) for pi in pis]

    def data(seed):
        r = np.random.default_rng(seed)
        m, t_len = args.trajectories, args.horizon
        s = np.zeros((m, t_len + 1), int)
        s[:, 0] = r.integers(0, n_s, m)
        a = r.integers(0, n_a, (m, t_len))
        cdf = np.cumsum(trans, axis=-1)
        for t in range(t_len):
            u = r.uniform(size=(m, 1))
            s[:, t + 1] = (u > cdf[s[:, t], a[:, t]]).sum(-1)
        eye_s, eye_a = np.eye(n_s, dtype=np.float32), np.eye(n_a, dtype=np.float32)
        rew = reward[s[:, :-1], a].astype(np.float32)
        mask = jnp.ones(rew.shape, bool)
        return [
            policy_evaluation_data(
                eye_s[s[:, :-1]],
                eye_a[a],
                rew,
                eye_s[s[:, 1:]],
                mask,
                policy(pi),
                feats,
                args.discount,
            )
            for pi in pis
        ], start_phi

    return [f"pi = {tuple(int(x) for x in pi)}" for pi in pis], truth, data


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--task", choices=("tabular", "maze"), default="tabular")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trajectories", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=30)
    ap.add_argument("--discount", type=float, default=0.8)
    ap.add_argument("--centers", type=int, default=16)
    ap.add_argument("--action-bins", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--sampling-rate", type=float, default=0.05)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--score-epsilon", type=float, default=1.0)
    ap.add_argument(
        "--total-epsilon",
        type=float,
        default=None,
        help="calibrate both procedures' per-run epsilon to this total",
    )
    ap.add_argument("--mean-runs", type=float, default=8.0)
    ap.add_argument(
        "--shape", type=float, default=0.0, help="eta: 0 logarithmic, 1 geometric, inf"
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--tables-only", action="store_true", help="re-tabulate the stored JSON"
    )
    ap.add_argument(
        "--epsilon-table",
        action="store_true",
        help="only the selection's epsilon vs naive composition at E[K] = 4, 8, 16",
    )
    args = ap.parse_args(argv)
    if args.epsilon_table:
        return epsilon_table()
    if args.tables_only:
        kind = privacy.Repetitions(args.mean_runs, args.shape).describe()
        out = Path(
            args.out
            or RESULTS / f"private_selection_{args.task}_{kind['distribution']}"
        )
        result = tabulate(json.loads(out.with_suffix(".json").read_text()))
        dump_json(out.with_suffix(".json"), result, ran=False, indent=2)
        write_text(out.with_suffix(".md"), markdown(result))
        print(markdown(result))
        return result
    t0 = time.time()
    names, truth, make_data = (tabular_task if args.task == "tabular" else maze_task)(
        args
    )
    template = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=args.trajectories,
            sampling_rate=args.sampling_rate,
            microbatch_size=64,
        ),
        l2_clip_norm=args.clip,
        steps=args.steps,
        noise_multiplier=1.0,
    )
    rep = privacy.Repetitions(args.mean_runs, args.shape)
    naive_runs = privacy.Repetitions(float(len(names)), 1.0)
    if args.total_epsilon is None:
        plan = naive_plan = template.calibrate(args.score_epsilon, DELTA)
    else:
        # Equal total epsilon: each procedure's per-run epsilon calibrated to it.
        plan = template.calibrate(
            _per_run_epsilon(template, rep.event, args.total_epsilon), DELTA
        )
        naive_plan = template.calibrate(
            _per_run_epsilon(template, naive_runs.naive_event, args.total_epsilon),
            DELTA,
        )
    step = ope.StepSize(args.beta)
    base = plan.event()
    eps_select = privacy.compute_epsilon(rep.event(base), DELTA).epsilon
    eps_naive = privacy.compute_epsilon(
        naive_runs.naive_event(naive_plan.event()), DELTA
    ).epsilon

    rows, errors = [], []
    for seed in range(args.seeds):
        data, start_phi = make_data(seed)
        lstd = np.array(
            [float(lstd_policy_value(d, s)) for d, s in zip(data, start_phi)]
        )

        def scorer(i, plan=plan):
            def run(key):
                k_noise, k_seed = jax.random.split(key)
                seed_i = int(jax.random.randint(k_seed, (), 0, 2**31 - 1))
                v = ope.gpope_policy_value(
                    plan,
                    data[i],
                    start_phi[i],
                    seed=seed_i,
                    key=k_noise,
                    step_size=step,
                )
                return i, float(v)

            return run

        # The scorer's error: one DP score of every candidate (audit, not DP).
        once = np.array(
            [
                scorer(i, naive_plan)(jax.random.key(100 + seed))[1]
                for i in range(len(names))
            ]
        )
        errors.append({"seed": seed, "lstd": lstd.tolist(), "gpope": once.tolist()})
        with tempfile.TemporaryDirectory() as tmp:
            ledger = privacy.Ledger.open(
                tmp,
                dataset_id=f"{args.task}-seed{seed}",
                dataset_size=args.trajectories,
                target_epsilon=eps_select * (1 + 1e-6),
                target_delta=DELTA,
            )
            sel = privacy.select(
                [scorer(i) for i in range(len(names))],
                base,
                rep,
                key=jax.random.key(1000 + seed),
                ledger=ledger,
                what="GPOPE policy selection",
            )
            ledger_eps = ledger.epsilon().epsilon
        chosen = sel.candidate
        rows.append(
            {
                "seed": seed,
                "chosen": chosen,
                "runs_not_dp": sel.audit["runs"],
                "true_chosen": None if chosen is None else float(truth[chosen]),
                "ledger_epsilon": ledger_eps,
            }
        )
        print(rows[-1], f"{time.time() - t0:.0f}s", flush=True)

    result = tabulate(
        {
            "args": vars(args),
            "candidates": names,
            "true_values": truth.tolist(),
            "score_epsilon": plan.epsilon(DELTA).epsilon,
            "naive_score_epsilon": naive_plan.epsilon(DELTA).epsilon,
            "noise_multiplier": plan.effective_noise_multiplier,
            "repetitions": rep.describe(),
            "selection_epsilon": eps_select,
            "naive_epsilon_all_once": eps_naive,
            "errors": errors,
            "rows": rows,
            "seconds": time.time() - t0,
        }
    )
    out = _out_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    dump_json(out.with_suffix(".json"), result, indent=2)
    write_text(out.with_suffix(".md"), markdown(result))
    print(markdown(result))
    return result


def epsilon_table() -> dict:
    """Epsilon of the selection (dp-accounting, and our own Theorem 2 / 6 bound) and of
    naive composition, for a base run of 1000 Poisson-sampled Gaussian steps."""
    step = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    base = dp_accounting.SelfComposedDpEvent(step, 1000)
    shapes = {"logarithmic": 0.0, "TNB eta=0.5": 0.5, "geometric": 1.0}
    shapes["poisson"] = float("inf")
    base_eps = privacy.compute_epsilon(base, DELTA).epsilon
    rows = []
    for mean in (4, 8, 16):
        naive = privacy.Repetitions(float(mean), 1.0).naive_event(base)
        row = {"mean": mean, "naive": privacy.compute_epsilon(naive, DELTA).epsilon}
        for name, shape in shapes.items():
            rep = privacy.Repetitions(float(mean), shape)
            row[name] = privacy.compute_epsilon(rep.event(base), DELTA).epsilon
            row[name + " (ours)"] = privacy.repeat_and_select_epsilon(base, rep, DELTA)
        rows.append(row)
    lines = [
        "# Private selection: epsilon vs naive composition (issue 51)",
        "",
        f"Base run: 1000 Poisson-sampled Gaussian steps (q = 0.01, sigma = 1), "
        f"epsilon {base_eps:.3f} at delta {DELTA:g} (RDP). Selection: dp-accounting's "
        "RepeatAndSelectDpEvent (RDP); in brackets our own Theorem 2 / 6 bound "
        "(privacy.repeat_and_select_epsilon). Naive: E[K] runs composed.",
        "",
        "| E[K] | naive | " + " | ".join(shapes) + " |",
        "|---" * (2 + len(shapes)) + "|",
    ]
    for r in rows:
        cells = [f"{r[n]:.3f} ({r[n + ' (ours)']:.3f})" for n in shapes]
        lines.append(f"| {r['mean']} | {r['naive']:.3f} | " + " | ".join(cells) + " |")
    out = RESULTS / "private_selection_epsilon"
    result = {"base_epsilon": base_eps, "delta": DELTA, "rows": rows}
    dump_json(out.with_suffix(".json"), result, indent=2)
    write_text(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


def _out_path(args) -> Path:
    kind = privacy.Repetitions(args.mean_runs, args.shape).describe()["distribution"]
    total = "" if args.total_epsilon is None else f"_total{args.total_epsilon:g}"
    total = total.replace(".", "p")  # with_suffix would cut at a dot
    return Path(args.out or RESULTS / f"private_selection_{args.task}_{kind}{total}")


def _per_run_epsilon(template, event_of, total: float) -> float:
    """The per-run epsilon whose procedure (``event_of(run event)``) costs ``total``."""
    lo, hi = 0.01, total
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        run = template.calibrate(mid, DELTA).event()
        if privacy.compute_epsilon(event_of(run), DELTA).epsilon > total:
            hi = mid
        else:
            lo = mid
    return lo


def tabulate(r: dict) -> dict:
    """The scorer's error and the choice table, from the stored runs."""
    truth = np.asarray(r["true_values"])
    rows = r["rows"]
    chosen_true = [x["true_chosen"] for x in rows if x["true_chosen"] is not None]
    gp = np.array([e["gpope"] for e in r["errors"]])
    ls = np.array([e["lstd"] for e in r["errors"]])
    return {
        **r,
        "scorer_rmse_gpope": float(np.sqrt(np.mean((gp - truth) ** 2))),
        "scorer_rmse_lstd": float(np.sqrt(np.mean((ls - truth) ** 2))),
        "scorer_spearman_gpope": float(np.mean([_spearman(g, truth) for g in gp])),
        "table": {
            "oracle": float(truth.max()),
            "dp_choice_mean": float(np.mean(chosen_true)),
            "dp_choice_sd": float(np.std(chosen_true)),
            "dp_choice_is_oracle": float(
                np.mean([x["chosen"] == int(truth.argmax()) for x in rows])
            ),
            # Every candidate scored once (the audit's scores), the best taken: the
            # naive procedure, at the composed epsilon.
            "naive_all_once_mean": float(np.mean(truth[gp.argmax(axis=1)])),
            "random": float(truth.mean()),
            "last": float(truth[-1]),
        },
    }


def _spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def markdown(r: dict) -> str:
    t = r["table"]
    lines = [
        f"# Private policy selection, {r['args']['task']} task (issue 51)",
        "",
        f"K = {len(r['candidates'])} candidates, GPOPE score at epsilon "
        f"{r['score_epsilon']:.2f} per run (delta {DELTA:g}); selection: "
        f"{r['repetitions']['distribution']} K, mean {r['args']['mean_runs']:g}; "
        f"{len(r['rows'])} seeds (data sets).",
        "",
        "| choice | true discounted value |",
        "|---|---|",
        f"| oracle (best true value) | {t['oracle']:.3f} |",
        f"| DP choice (privacy.select) | {t['dp_choice_mean']:.3f} "
        f"(sd {t['dp_choice_sd']:.3f}; the oracle's in "
        f"{100 * t['dp_choice_is_oracle']:.0f}% of seeds) |",
        f"| naive: all scored once, best taken (epsilon "
        f"{r['naive_epsilon_all_once']:.2f}, "
        f"{r.get('naive_score_epsilon', r['score_epsilon']):.2f} per score) "
        f"| {t['naive_all_once_mean']:.3f} |",
        f"| random (uniform, expected) | {t['random']:.3f} |",
        f"| last candidate | {t['last']:.3f} |",
        "",
        f"Total epsilon of the selection: {r['selection_epsilon']:.2f} "
        f"(dp-accounting RepeatAndSelect, RDP); scoring all "
        f"{len(r['candidates'])} once and composing: "
        f"{r['naive_epsilon_all_once']:.2f}.",
        "",
        f"Scorer error vs true value: RMSE GPOPE {r['scorer_rmse_gpope']:.3f}, "
        f"LSTDQ without noise {r['scorer_rmse_lstd']:.3f}; GPOPE's rank "
        f"correlation with the truth {r['scorer_spearman_gpope']:.2f}.",
        "",
        "| candidate | true value |",
        "|---|---|",
    ]
    lines += [f"| {n} | {v:.3f} |" for n, v in zip(r["candidates"], r["true_values"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
