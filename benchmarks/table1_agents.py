"""PrivORL Table I's umaze row at CPU scale: IQL (or TD3+BC, ``--agent td3bc``) trained
on each DP synthetic-data baseline's release (PGM, AIM, PrivSyn, MST with s' - s bins;
PATE-GAN, PrePATE-GAN), beside PrivORL-n's agent rows for the same seeds.

The protocol is that of ``benchmarks/privorl_n_eps_sweep.py --agents iql`` (its stored
``results/privorl_n_eps_sweep_agents.json``): each seed's sensitive data are the
sweep's (maze2d-umaze-dense-v1, 20k transitions + 2k holdout collected with key
``1000 * seed``; ``_results.data_files``), the noise is seeded
(``privacy.noise_seed = 1000 + seed``, so the runs are labelled not private; their noise
has the law of a private run's), and the release trains one IQL agent through the
pipelines' own ``eval`` section: 30k updates, scored as the mean of the last 5
evaluations (one per 1k updates, 50 episodes each) of one agent seed, D4RL-normalised.
The pipelines key the agent with ``fold_in(key(seed), 400)`` as PrivORL-n's does. The
real-data and pre-training-only anchors are not retrained: they are the sweep's rows for
the same seeds (the same sensitive rows: checked on the real holdout's fidelity, which
must equal the sweep's).

Runs are ordered seed-major (every method and epsilon of seed 0, then seed 1, ...), so a
partial run still gives every method its first seeds; a run directory holding a
report.json is read, not rerun, and the results files are rewritten after every run.

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        python benchmarks/table1_agents.py --seeds 0 1 2
    python benchmarks/table1_agents.py --tables-only   # tabulate finished runs

``--agent td3bc`` runs the same protocol with TD3+BC in place of IQL, paired with
PrivORL-n's TD3+BC sweep (``privorl_n_eps_sweep.py --agents td3bc --epsilons 1 10
--name privorl_n_eps_sweep_td3bc``, checked the same way); its results are
``table1_agents_umaze_td3bc.*`` and its runs ``runs/table1_agents_td3bc``. The baselines
are synthesised again (the same seeds and noise seeds give the IQL runs' releases up to
the host's rounding), because the IQL runs' folders are not kept in a checkout.

``--maze medium`` gives the medium row at the same protocol: maze2d-medium-dense-v1
sensitive, public umaze + large (``_results.MAZES``; the same sizes and collection keys,
``_data_files(out, seed, "medium")``), the same configs with
``data.sensitive_env`` / ``data.public_envs`` overridden (the marginal bins come from
the sensitive env's declared spaces, public, so they span medium's wider positions),
paired with PrivORL-n's medium sweep (``privorl_n_eps_sweep.py --agents iql --epsilons
1 10 --maze medium --name privorl_n_eps_sweep_agents_medium``); its results are
``table1_agents_medium.*`` and its runs ``runs/table1_agents_medium``. ``--maze large``
gives the large row the same way (public umaze + medium; ``..._large``).

Needs the baselines extra (``pip install -e ".[baselines]"``). Writes
``benchmarks/results/NAME.{json,md}`` (``--name``, default ``table1_agents_MAZE``);
runs go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import scipy.stats
from _results import (  # benchmarks/_results.py
    MAZES,
    PRETRAIN_ROW,
    dump_json,
    eps_name,
    load_line,
    maze_overrides,
    metric_table,
    summary,
    uptime,
    with_stored_runs,
    write_text,
)

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "results" / "privorl_n_eps_sweep_agents.json"
# Each agent's PrivORL-n sweep (its rows and anchors) and its name in the tables.
AGENTS = {
    "iql": (SWEEP, "IQL"),
    "td3bc": (
        ROOT / "benchmarks" / "results" / "privorl_n_eps_sweep_td3bc.json",
        "TD3+BC",
    ),
}


def sweep_path(agent: str = "iql", maze: str = "umaze") -> Path:
    """``agent``'s PrivORL-n sweep on ``maze``: :data:`AGENTS`' file for umaze, that
    name with ``_MAZE`` for another maze."""
    path = AGENTS[agent][0]
    return path if maze == "umaze" else path.with_name(f"{path.stem}_{maze}.json")


# Priority order: a partial run covers these first within a seed.
METHODS = {
    "pgm": ("marginal", "marginal/pgm_umaze_delta", "PGM"),
    "aim": ("marginal", "marginal/aim_umaze_delta", "AIM"),
    "privsyn": ("marginal", "marginal/privsyn_umaze_delta", "PrivSyn"),
    "mst": ("marginal", "marginal/mst_umaze_delta", "MST"),
    "pategan": ("pategan", "pategan/umaze", "PATE-GAN"),
    "pategan_pretrained": ("pategan", "pategan/umaze_pretrained", "PrePATE-GAN"),
}


# The sweep's agent protocol (privorl_n_eps_sweep.base_overrides with --agents iql);
# checked against the stored sweep's overrides before any run.
def agent_overrides(agent: str = "iql") -> list[str]:
    """The sweep's agent protocol for ``agent`` (one of :data:`AGENTS`)."""
    return [
        f"eval.agents=[{agent}]",
        "eval.agent_updates=30000",
        "eval.agent_chunk=1000",
        "eval.final_evals=5",
        "eval.agent_seeds=1",
        "eval.anchors=true",
    ]


AGENT_OVERRIDES = agent_overrides("iql")
DATA_OVERRIDES = [
    "data.sensitive_size=20000",
    "data.public_size=20000",
    "data.holdout_size=2000",
    "synthesis.num_samples=20000",
]


def agent_key(agent: str = "iql") -> str:
    """The row key of ``agent``'s score."""
    return f"agent_{agent}"


def metrics(agent: str = "iql") -> dict[str, tuple[str, str]]:
    """The table's columns: ``agent``'s score and two fidelity scores."""
    return {
        agent_key(agent): (f"{AGENTS[agent][1]} score (30000 updates)", "higher"),
        "free_cell_share": ("share in the sensitive maze's free cells", "higher"),
        "sliced_wasserstein": ("sliced Wasserstein to the sensitive rows", "lower"),
    }


AGENT = agent_key("iql")
METRICS = metrics("iql")
REAL_ROW = "real data (sweep)"


def privorl_n_label(eps: float) -> str:
    """The table's row name of PrivORL-n at ``eps`` (read from the sweep)."""
    return f"PrivORL-n eps = {eps_name(eps)} (sweep)"


def method_label(model: str, eps: float) -> str:
    """The table's row name of a baseline at ``eps``."""
    return f"{METHODS[model][2]} eps = {eps_name(eps)}"


def sweep_rows(
    sweep: dict, seeds: list[int], epsilons: list[float], agent: str = "iql"
) -> dict[str, dict[int, dict]]:
    """PrivORL-n's rows of the stored agent sweep for ``seeds``: row name -> seed ->
    {agent score, fidelity}; its releases at ``epsilons``, and the anchors
    (pre-training only, real data) of each seed's first run, which carries them."""
    key = agent_key(agent)
    rows: dict[str, dict[int, dict]] = {}
    for r in sweep["runs"]:
        if r["seed"] not in seeds:
            continue
        ag = r["agents"]
        if r["epsilon"] in epsilons and ag["release"] is not None:
            rows.setdefault(privorl_n_label(r["epsilon"]), {})[r["seed"]] = r[
                "release"
            ] | {key: ag["release"][agent]}
        if ag["pretrain_only"] is not None:
            rows.setdefault(PRETRAIN_ROW, {})[r["seed"]] = r["pretrain_only"] | {
                key: ag["pretrain_only"][agent]
            }
        if ag["real"] is not None:
            rows.setdefault(REAL_ROW, {})[r["seed"]] = r["real_holdout"] | {
                key: ag["real"][agent]
            }
    return rows


def baseline_rows(runs: list[dict], agent: str = "iql") -> dict[str, dict[int, dict]]:
    """The baselines' rows: row name -> seed -> {agent score, fidelity} (``runs`` as
    stored under ``runs`` in the results JSON)."""
    rows: dict[str, dict[int, dict]] = {}
    for r in runs:
        rows.setdefault(method_label(r["model"], r["epsilon"]), {})[r["seed"]] = r[
            "release"
        ] | {agent_key(agent): r["agent_score"]}
    return rows


def paired_vs(
    rows: dict[str, dict[int, dict]], a: str, b: str, key: str = AGENT
) -> dict[str, float] | None:
    """Within-seed differences ``b - a`` of ``key`` over the seeds both rows have: the
    :func:`summary` of them, the seeds, how many rose and the two-sided paired t-test's
    p (None below 2 seeds or at zero spread); None when no seed is shared."""
    seeds = sorted(set(rows.get(a, {})) & set(rows.get(b, {})))
    if not seeds:
        return None
    d = np.array([rows[b][s][key] - rows[a][s][key] for s in seeds], np.float64)
    out = summary(list(d)) | {"seeds": seeds, "rose": int(np.sum(d > 0))}
    p = None
    if len(d) > 1 and d.std(ddof=1) > 0:
        p = float(scipy.stats.ttest_1samp(d, 0.0).pvalue)
    out["p"] = p
    return out


def check_protocol(sweep: dict, agent: str = "iql", maze: str = "umaze") -> None:
    """Exits with one line unless the stored sweep ran the agent protocol, data sizes
    and maze this script gives the baselines."""
    missing = [
        o
        for o in agent_overrides(agent) + DATA_OVERRIDES + maze_overrides(maze)
        if o not in sweep["overrides"]
    ]
    # A umaze sweep names no env: it must not name another one either.
    missing += [
        f"(no {o})"
        for o in sweep["overrides"]
        if o.startswith(("data.sensitive_env=", "data.public_envs="))
        and o not in maze_overrides(maze)
    ]
    if missing or sweep.get("config", "privorl_n/quickstart") != "privorl_n/quickstart":
        raise SystemExit(
            f"{sweep_path(agent, maze)}: its overrides lack {missing} (or its config "
            "differs); the baselines' agents would not be comparable: rerun the sweep "
            "or fix agent_overrides"
        )


def check_same_data(runs: list[dict], sweep: dict) -> list[int]:
    """The seeds whose real-holdout fidelity differs from the sweep's (another
    sensitive sample: their pairing would be meaningless); empty when all agree."""
    theirs = {r["seed"]: r["real_holdout"] for r in sweep["runs"]}
    bad = []
    for r in runs:
        t = theirs.get(r["seed"])
        if t is not None and any(
            not math.isclose(t[k], r["real_holdout"][k], rel_tol=1e-9, abs_tol=1e-12)
            for k in ("marginal", "correlation", "sliced_wasserstein")
        ):
            bad.append(r["seed"])
    return sorted(set(bad))


def _run_one(
    model: str,
    seed: int,
    eps: float,
    out: Path,
    extra: list[str],
    agent: str,
    maze: str = "umaze",
) -> dict:
    """One baseline run with its ``agent`` (the pipeline's own eval); its report with
    the audit under ``audit``."""
    # Here, not at the top: the tables (and their tests) need no jax.
    from _results import data_files as _data_files  # noqa: PLC0415 (benchmarks/)

    from privrl_jax.pipelines import marginal, pategan  # noqa: PLC0415

    kind, config, _ = METHODS[model]
    run_dir = out / f"{model}_seed{seed}_eps{eps_name(eps)}"
    if not (run_dir / "report.json").exists():
        sens, pub = _data_files(out, seed, maze)
        pipe = marginal if kind == "marginal" else pategan
        cfg = pipe.load(
            config,
            [
                *DATA_OVERRIDES,
                *agent_overrides(agent),
                # The sensitive env (the discretisation's bounds are its declared
                # spaces, public) and the public envs the data files were collected on.
                *maze_overrides(maze),
                # The anchor is the sweep's real-data agent (same rows): not retrained.
                "eval.train_real_agents=false",
                f"seed={seed}",
                f"privacy.epsilon={eps}",
                f"privacy.noise_seed={1000 + seed}",
                f"data.sensitive_file={sens}",
                f"data.public_files=[{pub}]",
                *extra,
            ],
        )
        pipe.run(cfg, run_dir)
    rep = json.loads((run_dir / "report.json").read_text())
    rep["audit"] = json.loads((run_dir / "audit" / "audit.json").read_text())
    return rep


def reward_consistency(path: Path, env_name: str) -> dict[str, float]:
    """How well a release's rewards follow the env's dense reward of its own next
    positions, exp(-||x' - goal||) (D4RL maze2d-dense): the mean absolute error and the
    correlation (real data: 0 and 1). Reads only the release and the public env."""
    import h5py  # noqa: PLC0415

    from privrl_jax import envs  # noqa: PLC0415 (jax)

    _, params = envs.make(env_name)
    with h5py.File(path, "r") as f:
        r = np.asarray(f["rewards"][:], np.float64)
        xy = np.asarray(f["next_observations"][:, :2], np.float64)
    dense = np.exp(-np.linalg.norm(xy - np.asarray(params.goal, np.float64), axis=1))
    return {
        "reward_error": float(np.abs(r - dense).mean()),
        "reward_corr": float(np.corrcoef(r, dense)[0, 1]),
    }


def _record(
    model: str,
    seed: int,
    eps: float,
    rep: dict,
    run_dir: Path,
    agent: str,
    maze: str = "umaze",
) -> dict:
    iql = rep["agents_synthetic"][agent]
    return {
        "model": model,
        "seed": seed,
        "epsilon": eps,
        "epsilon_spent_rdp": rep["privacy"]["rdp"]["epsilon"],
        "noise_multiplier": rep["finetune"]["noise_multiplier"],
        "agent_score": iql["score_mean"],
        "agent_return": iql.get("return_mean"),
        "agent_final_evals": [
            e["score_mean"] for e in iql["per_seed"][0]["curve"][-5:]
        ],
        "release": rep["audit"]["fidelity"],
        "release_reward": reward_consistency(
            run_dir / "synthetic.hdf5", MAZES[maze][0]
        ),
        "real_holdout": rep["audit"]["anchors"]["real_holdout"],
        "wall_time_s": rep["wall_time_s"],
    }


def tabulate(
    runs: list[dict],
    sweep: dict,
    models: list[str],
    epsilons: list[float],
    agent: str = "iql",
    maze: str = "umaze",
) -> tuple[dict, str]:
    """The JSON payload and Markdown of the finished ``runs`` beside the sweep's rows
    for the same seeds."""
    seeds = sorted({r["seed"] for r in runs})
    key, name = agent_key(agent), AGENTS[agent][1]
    rows = baseline_rows(runs, agent) | sweep_rows(sweep, seeds, epsilons, agent)
    order = [method_label(m, e) for m in models for e in epsilons]
    order += [privorl_n_label(e) for e in epsilons] + [PRETRAIN_ROW, REAL_ROW]
    order = [n for n in order if n in rows]
    table, lines = metric_table(
        [(n, list(rows[n].values())) for n in order], metrics(agent)
    )
    pairs = {}
    pair_lines = [
        f"| baseline - PrivORL-n (same seed) | seeds | {name} score difference | "
        "seeds baseline higher | paired t-test p |",
        "|---|---|---|---|---|",
    ]
    for m in models:
        for e in epsilons:
            a, b = privorl_n_label(e), method_label(m, e)
            res = paired_vs(rows, a, b, key)
            if res is None:
                continue
            pairs[f"{a} -> {b}"] = res
            p = "-" if res["p"] is None else f"{res['p']:.3g}"
            pair_lines.append(
                f"| {b} - PrivORL-n | {res['n']} | {res['mean']:+.1f} "
                f"[±{res['ci95']:.1f}] | {res['rose']}/{res['n']} | {p} |"
            )
    per_seed = [
        "| seed | " + " | ".join(order) + " |",
        "|" + "---|" * (1 + len(order)),
    ]
    for s in seeds:
        cells = [f"{rows[n][s][key]:.1f}" if s in rows[n] else "-" for n in order]
        per_seed.append(f"| {s} | " + " | ".join(cells) + " |")
    rew_metrics = {
        "reward_error": ("mean abs(r - exp(-dist(x', goal)))", "lower"),
        "reward_corr": ("corr(r, exp(-dist(x', goal)))", "higher"),
    }
    rew_table, rew_lines = metric_table(
        [
            (
                method_label(m, e),
                [
                    r["release_reward"]
                    for r in runs
                    if (r["model"], r["epsilon"]) == (m, e) and "release_reward" in r
                ],
            )
            for m in models
            for e in epsilons
        ],
        rew_metrics,
    )
    wall = [r["wall_time_s"] for r in runs]
    md = "\n".join(
        [
            f"# PrivORL Table I, {maze} row at CPU scale: {name} on each DP baseline's "
            "release beside PrivORL-n",
            "",
            f"{MAZES[maze][0]} sensitive (20000 transitions, 2000 held out"
            + (
                ""
                if maze == "umaze"
                else "; public: " + " + ".join(MAZES[maze][1]) + ", 20000 each"
            )
            + "), the data, agent protocol and score normalisation of "
            f"`{sweep_path(agent, maze).stem}.md` for the same seeds: {name}, 30000 "
            "updates, "
            "score = mean of the last 5 evaluations (one per 1000 updates, 50 "
            "episodes each, D4RL-normalised), one agent seed per release. Baselines: "
            "PGM / AIM / PrivSyn / MST with s' - s binned on its public one-step "
            "bound (`marginal/*_umaze_delta`), PATE-GAN and PrePATE-GAN "
            "(`pategan/umaze{,_pretrained}`)"
            + (
                ""
                if maze == "umaze"
                else f" with `{' '.join(maze_overrides(maze))}` (bins on the "
                f"declared spaces of {MAZES[maze][0]})"
            )
            + "; noise seeded 1000 + seed. PrivORL-n, "
            "pre-training only and real data: the sweep's stored rows for these "
            f"seeds. '{REAL_ROW}': {name} trained on the sensitive training rows "
            "(20000; the 2000 held out are collected beside them), its fidelity "
            "columns the real holdout's. Mean ± sample std "
            "(ddof = 1) [95% t half-width] over seeds.",
            "",
            *lines,
            "",
            f"Within-seed differences of the {name} score, baseline - PrivORL-n at the "
            "same epsilon (mean [95% t half-width]; two-sided paired t-test):",
            "",
            *pair_lines,
            "",
            "Do the releases' rewards follow the env's dense reward of their own next "
            "positions? (Reads only the release and the public env; real data: 0 and "
            "1 by construction; PrivORL-n's releases were not kept by the sweep.)",
            "",
            *rew_lines,
            "",
            f"{name} score per seed:",
            "",
            *per_seed,
            "",
            f"{len(runs)} baseline runs, wall time {np.mean(wall):.0f} s mean "
            f"({min(wall):.0f}-{max(wall):.0f} s) each, synthesis + agent."
            if runs
            else "",
            "",
        ]
    )
    payload = {
        "table": table,
        "pairs_vs_privorl_n": pairs,
        "reward_consistency": rew_table,
        "seeds": seeds,
    }
    return payload, md


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--models", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument(
        "--agent",
        default="iql",
        choices=AGENTS,
        help="the agent trained on every release (its PrivORL-n sweep must exist)",
    )
    ap.add_argument(
        "--maze",
        default="umaze",
        choices=MAZES,
        help="the sensitive maze (public data: the other two); its PrivORL-n sweep "
        "must exist (privorl_n_eps_sweep.py --maze MAZE, named SWEEP_MAZE)",
    )
    ap.add_argument(
        "--out", default=None, help="default runs/table1_agents[_MAZE][_AGENT]"
    )
    ap.add_argument("--set", dest="overrides", nargs="*", default=[])
    ap.add_argument("--name", default=None, help="default table1_agents_MAZE[_AGENT]")
    ap.add_argument(
        "--tables-only", action="store_true", help="tabulate finished runs; start none"
    )
    args = ap.parse_args()
    suffix = "" if args.agent == "iql" else f"_{args.agent}"
    maze = "" if args.maze == "umaze" else f"_{args.maze}"
    args.name = args.name or f"table1_agents_{args.maze}{suffix}"
    args.out = args.out or str(ROOT / "runs" / f"table1_agents{maze}{suffix}")
    path = sweep_path(args.agent, args.maze)
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: run privorl_n_eps_sweep.py --agents "
            f"{args.agent} --epsilons 1 10 --maze {args.maze} --name {path.stem} first"
        )
    sweep = json.loads(path.read_text())
    check_protocol(sweep, args.agent, args.maze)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = ROOT / "benchmarks" / "results"
    todo = [(s, m, e) for s in args.seeds for m in args.models for e in args.epsilons]
    stored = stored_runs(res / f"{args.name}.json")
    runs: list[dict] = []
    started = False  # a re-tabulation keeps the stored runs' host and load
    t0 = time.time()
    for i, (seed, model, eps) in enumerate(todo):
        run_dir = out / f"{model}_seed{seed}_eps{eps_name(eps)}"
        done = (run_dir / "report.json").exists()
        if not done and (model, seed, eps) in stored:
            # Recorded in the results file but its run folder is gone (runs/ is not
            # in a checkout): keep the record rather than rerun or drop it.
            runs.append(stored[(model, seed, eps)])
            continue
        if not done and args.tables_only:
            continue
        if not done:
            started = True
            print(
                f"{time.strftime('%H:%M:%S')} [{i + 1}/{len(todo)}] {model} seed "
                f"{seed} eps {eps_name(eps)} -> {run_dir}",
                flush=True,
            )
        rep = _run_one(model, seed, eps, out, args.overrides, args.agent, args.maze)
        runs.append(_record(model, seed, eps, rep, run_dir, args.agent, args.maze))
        if not done:
            print(
                f"{time.strftime('%H:%M:%S')} [{i + 1}/{len(todo)}] {model} seed "
                f"{seed} eps {eps_name(eps)}: {args.agent} "
                f"{runs[-1]['agent_score']:.1f}, "
                f"{rep['wall_time_s']:.0f} s",
                flush=True,
            )
        bad = check_same_data(runs, sweep)
        if bad:
            raise SystemExit(
                f"seeds {bad}: the real holdout's fidelity differs from the sweep's, "
                "so these are not the sweep's sensitive rows; fix the data files in "
                "--out"
            )
        # Rewritten after every run: a partial run leaves a readable table.
        _write(res, args, runs, sweep, ran=started)
    load = _write(res, args, runs, sweep, ran=started)
    print((res / f"{args.name}.md").read_text())
    print(f"{time.time() - t0:.0f} s; uptime: {load}")
    assert all(
        math.isfinite(r["epsilon_spent_rdp"])
        and r["epsilon_spent_rdp"] <= r["epsilon"] * (1 + 1e-9)
        for r in runs
    ), "a run spent more than its budget"


def stored_runs(path: Path) -> dict[tuple[str, int, float], dict]:
    """The per-run records of an earlier results file, keyed (model, seed, epsilon);
    empty when there is none. They let a fresh checkout resume without rerunning the
    runs the file already holds."""
    if not path.exists():
        return {}
    return {
        (r["model"], int(r["seed"]), float(r["epsilon"])): r
        for r in json.loads(path.read_text())["runs"]
    }


def _write(
    res: Path, args: argparse.Namespace, runs: list[dict], sweep: dict, ran: bool
) -> str:
    """Writes the results JSON and Markdown of ``runs``; returns this host's load.
    ``ran=False`` (no run started) keeps the stored file's host and load."""
    load = uptime()
    # Seeds stored but not requested this time stay in the table (``--seeds 2`` after a
    # run of 0 1 adds a seed rather than leaving one).
    runs = with_stored_runs(
        res / f"{args.name}.json",
        runs,
        lambda r: (r["model"], int(r["seed"]), float(r["epsilon"])),
    )
    payload, md = tabulate(
        runs, sweep, args.models, args.epsilons, args.agent, args.maze
    )
    res.mkdir(parents=True, exist_ok=True)
    dump_json(
        res / f"{args.name}.json",
        {
            "runs": runs,
            **payload,
            "overrides": [
                *DATA_OVERRIDES,
                *agent_overrides(args.agent),
                *maze_overrides(args.maze),
                "eval.train_real_agents=false",
                *args.overrides,
            ],
            "configs": {m: METHODS[m][1] for m in args.models},
            "agent": args.agent,
            **({} if args.maze == "umaze" else {"maze": args.maze}),
            "sweep": str(sweep_path(args.agent, args.maze).relative_to(ROOT)),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "uptime": load,
        },
        ran=ran,
        indent=2,
    )
    write_text(res / f"{args.name}.md", md + load_line(res / f"{args.name}.json"))
    return load


if __name__ == "__main__":
    main()
