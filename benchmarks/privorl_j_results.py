"""PrivORL-j results (issue 15): PrivORL-j vs PrivORL-j-U vs DP-Transformer at eps in
{1, 10}, and a horizon sweep.

Each run is the PrivORL-j pipeline (``privorl_j.run``) on ``--config`` (default: the
tiny ``privorl_j/test`` config, a smoke scale that fits a few CPU minutes) plus
overrides, in its own directory under ``--out`` (a rerun reuses a finished run whose
config matches). Rows:

- ``PrivORL-j``: ``model.kind=transformer`` (the conditional diffusion transformer);
- ``PrivORL-j-U``: ``model.kind=unet`` (the 1-D temporal U-Net baseline, all else
  unchanged);
- ``DP-Transformer``: ``model.kind=dp_transformer`` (a causal transformer over
  transitions, pre-trained on the same public fragments, DP fine-tuned at trajectory
  level with the same plan, sampled autoregressively: ``synth.StepTransformer``).

Runs go seed by seed, and inside a seed epsilon by epsilon (in ``--epsilons`` order),
all models at one epsilon before the next, so an interrupted sweep leaves complete small
tables; the tables and the JSON are rewritten after every run.

Columns, mean ± std over seeds: TrajScore F1 (audit), the stitching gap (mean distance
between a fragment's first state and the previous step's next state) at fragment
boundaries and inside fragments, for the synthetic data and for the real sensitive data,
the share of synthetic states in free cells of the sensitive maze (maze2d only: real
data 1.0), fidelity (marginal, correlation), and the agents' normalised score on the
synthetic data when ``--agents`` is given (default off, to fit the time; agents on the
real sensitive data are trained once per seed, in its first run). A second table sweeps
the horizon H (``--horizons``) at eps = 10 for PrivORL-j; ``data.max_fragments`` is
scaled so H * max_fragments stays that of the config.

    # smoke scale, seed 0
    python benchmarks/privorl_j_results.py
    # about 3 min a run
    python benchmarks/privorl_j_results.py --config privorl_j/cpu --epsilons 10 1 \\
        --seeds 0 1 2 --horizons --name privorl_j_results_cpu
    python benchmarks/privorl_j_results.py --config privorl_j/umaze --seeds 0 1 2 \\
        --agents td3bc --horizons 8 16 32 64 --name privorl_j_results_umaze
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml
from _results import dump_json, write_text  # benchmarks/_results.py

from privrl_jax import data, envs, pipelines
from privrl_jax import eval as evaluation
from privrl_jax.pipelines import privorl_j, to_dict

ROOT = Path(__file__).resolve().parents[1]
MODELS = {
    "PrivORL-j": "transformer",
    "PrivORL-j-U": "unet",
    "DP-Transformer": "dp_transformer",
}
NOTE = "Mean ± std over seeds (std 0 with one seed)."


def reference_scores(
    cfg: privorl_j.PrivORLJConfig, extra: dict[str, data.Transitions] | None = None
) -> dict[str, Any]:
    """Reference TrajScores for reading a run's (NOT DP: reads the sensitive data;
    benchmarks only).

    With the run's data, encoding and TrajScore encoder (same seed, same public
    windows), scores two real sets as if they were the release: the public trajectories
    (what a synthesizer that merely reproduced its public pre-training data would get)
    and the held-out sensitive trajectories (real trajectories of the sensitive task
    never trained on: a ceiling). ``extra`` sets (e.g. releases of runs with another
    horizon) are scored with the same encoder and window ``cfg.data.horizon`` as
    ``trajscore_<name>``, so their scores compare.
    """
    public, sensitive, holdout = privorl_j.load_data(cfg)
    task = privorl_j.build_task(cfg, public, sensitive)
    h = cfg.data.horizon
    pub_w = task.windows(task.public, h)
    real_w = task.windows(privorl_j.flat_transitions(sensitive), h)
    hold_w = task.windows(privorl_j.flat_transitions(holdout), h)
    enc = evaluation.fit_trajectory_encoder(
        jax.random.fold_in(jax.random.key(cfg.seed), 600),
        pub_w,
        window=h,
        steps=cfg.eval.trajscore_steps,
    )
    out = {
        "trajscore_public": evaluation.trajscore(enc, real_w, pub_w),
        "trajscore_holdout": evaluation.trajscore(enc, real_w, hold_w)
        if len(hold_w)
        else {"f1": None},
    }
    for name, transitions in (extra or {}).items():
        w = task.windows(transitions, h)
        out[f"trajscore_{name}"] = (
            evaluation.trajscore(enc, real_w, w) if len(w) else {"f1": None}
        )
    return out


def _ms(values: list) -> str:
    v = np.array([x for x in values if x is not None], float)
    if v.size == 0 or np.all(np.isnan(v)):
        return "n/a"
    return f"{np.nanmean(v):.3f} ± {np.nanstd(v):.3f}"


def maze_free_cell_share(observations: np.ndarray, env_name: str) -> float | None:
    """``eval.free_cell_share`` of the positions (observation dims 0-1, maze2d's x, y)
    in
    ``env_name``'s wall grid; None for envs without one. Real umaze-v1 data give 1.0,
    the public medium + large data 0.17: how far a synthesizer moved from its
    pre-training to the sensitive maze."""
    walls = getattr(envs.make(env_name)[1], "walls", None)
    return (
        None
        if walls is None
        else evaluation.free_cell_share(np.asarray(observations)[:, :2], walls)
    )


def reuse_pretrain(
    run_dir: Path,
    siblings: Iterable[Path],
    cfg: privorl_j.PrivORLJConfig,
    may_differ: Iterable[str] = (),
) -> None:
    """Copies the finished public pre-training of a sibling run (same model, seed and
    horizon,
    another epsilon) into ``run_dir``, where the pipeline resumes from it instead of
    repeating it.

    Pre-training reads only public data and its randomness is the public seed, so it is
    the same at every epsilon; the sibling's resolved config must equal ours outside
    ``privacy`` and ``eval`` (checked) and its pre-training must be complete (its last
    checkpoint step). ``may_differ`` names further ``section.key`` fields that only the
    DP fine-tune or the sampler reads (e.g. ``synthesis.finetune_ema``).
    """
    drop = [tuple(k.split(".", 1)) for k in may_differ]

    def comparable(d: dict) -> dict:
        d = {k: v for k, v in d.items() if k not in ("privacy", "eval")}
        for sec, key in drop:
            d[sec] = {k: v for k, v in d.get(sec, {}).items() if k != key}
        return d

    mine = comparable(to_dict(cfg))
    for sib in siblings:
        ckpt, conf = sib / "checkpoints" / "pretrain", sib / "config.yaml"
        if (
            sib == run_dir
            or not conf.exists()
            or not (ckpt / str(cfg.pretrain.steps)).exists()
        ):
            continue
        theirs = comparable(yaml.safe_load(conf.read_text()))
        if theirs == mine:
            run_dir.mkdir(parents=True, exist_ok=True)
            # The run's own config first: the pipeline refuses a non-empty directory
            # without one.
            (run_dir / "config.yaml").write_text(
                yaml.safe_dump(to_dict(cfg), sort_keys=False)
            )
            shutil.copytree(ckpt, run_dir / "checkpoints" / "pretrain")
            print(
                f"[{run_dir.name}] reusing the public pre-training of {sib.name}",
                flush=True,
            )
            return


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--config", default="privorl_j/test", help="YAML file or shipped config name"
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument(
        "--horizons",
        nargs="*",
        type=int,
        default=[8, 16],
        help="horizon sweep at eps = 10 for PrivORL-j (none: skip)",
    )
    ap.add_argument(
        "--agents",
        nargs="*",
        default=[],
        help="agents trained on the synthetic data (default: none)",
    )
    ap.add_argument(
        "--set",
        dest="overrides",
        nargs="*",
        default=[],
        help="extra overrides for every run",
    )
    ap.add_argument(
        "--references",
        action="store_true",
        help="also score real sets as if released: public and held-out sensitive "
        "trajectories (TrajScore with each seed's encoder; reads sensitive data, "
        "benchmark only)",
    )
    ap.add_argument(
        "--no-share-pretrain",
        dest="share_pretrain",
        action="store_false",
        help="pre-train again in every run instead of copying a finished sibling's",
    )
    ap.add_argument(
        "--tables-only",
        action="store_true",
        help="run nothing: tabulate the finished runs under --out as they are "
        "(their eval sections may differ from these arguments'), skipping missing ones",
    )
    ap.add_argument("--out", default=str(ROOT / "runs" / "privorl_j_results"))
    ap.add_argument(
        "--name",
        default="privorl_j_results",
        help="results file stem under benchmarks/results/",
    )
    args = ap.parse_args()

    source = pipelines.qualify_config(
        args.config, "privorl_j"
    )  # a file, or a shipped name
    base = privorl_j.load(source, list(args.overrides))
    base_h, base_frags = base.data.horizon, base.data.max_fragments
    agents = "[" + ", ".join(args.agents) + "]"

    def report(
        model: str,
        eps: float,
        seed: int,
        horizon: int | None = None,
        real_agents: bool = False,
    ) -> dict:
        h = horizon or base_h
        tag = f"{model}_eps{eps:g}_H{h}_seed{seed}"
        # The real sensitive data are the same for every model and epsilon of a seed:
        # their agents are trained once per seed (in the seed's first run), not once per
        # row.
        ov = [
            f"model.kind={MODELS[model]}",
            f"privacy.epsilon={eps}",
            f"seed={seed}",
            f"eval.agents={agents}",
            *(
                [f"eval.train_real_agents={str(real_agents).lower()}"]
                if args.agents
                else []
            ),
            *args.overrides,
        ]
        if horizon is not None:
            ov += [
                f"data.horizon={h}",
                f"data.max_fragments={max(1, base_h * base_frags // h)}",
            ]
        cfg = privorl_j.load(source, ov)
        run_dir = Path(args.out) / tag
        done = run_dir / "report.json"
        if done.exists():
            rep = json.loads(done.read_text())
            audit = run_dir / "audit" / "audit.json"
            rep["audit"] = json.loads(audit.read_text()) if audit.exists() else {}
            if (
                rep["config"] == to_dict(cfg) or args.tables_only
            ):  # else: rerun (only eval may differ)
                return rep
        if args.tables_only:
            return None
        if args.share_pretrain and not (run_dir / "checkpoints" / "pretrain").exists():
            reuse_pretrain(
                run_dir, Path(args.out).glob(f"{model}_eps*_H{h}_seed{seed}"), cfg
            )
        t = time.time()
        rep = privorl_j.run(cfg, run_dir)
        print(f"[{tag}] {time.time() - t:.0f} s", flush=True)
        return rep

    def in_maze(model: str, eps: float, seed: int, horizon: int) -> float | None:
        syn = data.load_hdf5(
            Path(args.out)
            / f"{model}_eps{eps:g}_H{horizon}_seed{seed}"
            / "synthetic.hdf5"
        )
        return maze_free_cell_share(syn.observations, base.data.sensitive_env)

    def row(rep: dict | None, **keys) -> dict | None:
        if rep is None:
            return None
        audit = rep.get("audit", {})
        syn_st, real_st = rep["synthetic"]["stitching"], audit.get("real_stitching", {})
        agents_syn = rep.get("agents_synthetic", {})
        return {
            **keys,
            "epsilon_spent": rep["privacy"].get("rdp", {}).get("epsilon"),
            "private": rep["finetune"]["private"],
            "trajscore_f1": audit.get("trajscore", {}).get("f1"),
            "gap_boundary": syn_st["at_fragment_boundaries"],
            "gap_inside": syn_st["inside_fragments"],
            "real_gap_boundary": real_st.get("at_fragment_boundaries"),
            "real_gap_inside": real_st.get("inside_fragments"),
            "free_cell_share": in_maze(
                keys["model"], keys["epsilon"], keys["seed"], keys["horizon"]
            ),
            "marginal": audit["fidelity"]["marginal"],
            "correlation": audit["fidelity"]["correlation"],
            "agent_score": {a: s.get("score_mean") for a, s in agents_syn.items()},
            "agent_score_real": {
                a: s.get("score_mean") for a, s in audit.get("agents_real", {}).items()
            },
            "wall_time_s": rep["wall_time_s"],
        }

    rows: list[dict] = []
    sweep: list[dict] = []
    refs: list[dict] = []
    agent_cols: list[str] = []

    def col_head() -> tuple[str, str]:
        head = (
            "| model | eps | H | seeds | eps spent (RDP) | TrajScore F1 | gap at "
            "boundaries | gap inside | "
            "real gap at boundaries | real gap inside | in free cells | marginal | "
            "correlation |" + "".join(f" {a} score |" for a in agent_cols)
        )
        return head, "|" + "---|" * (13 + len(agent_cols))

    def table(rs: list[dict], keys: list[tuple]) -> str:
        head, sep = col_head()
        lines = [head, sep]
        for key in keys:
            g = [r for r in rs if (r["model"], r["epsilon"], r["horizon"]) == key]
            if not g:
                continue

            def col(k: str, g: list[dict] = g) -> str:
                return _ms([r[k] for r in g])

            lines.append(
                f"| {key[0]} | {key[1]:g} | {key[2]} | {len(g)} | "
                f"{col('epsilon_spent')} | {col('trajscore_f1')} | "
                f"{col('gap_boundary')} | {col('gap_inside')} | "
                f"{col('real_gap_boundary')} | "
                f"{col('real_gap_inside')} | {col('free_cell_share')} | "
                f"{col('marginal')} | {col('correlation')} |"
                + "".join(
                    f" {_ms([r['agent_score'].get(a) for r in g])} |"
                    for a in agent_cols
                )
            )
        return "\n".join(lines)

    def write() -> str:
        agent_cols[:] = sorted({a for r in rows + sweep for a in r["agent_score"]})
        main_t = table(
            rows, [(m, e, base_h) for m in args.models for e in args.epsilons]
        )
        sweep_t = (
            table(sweep, [("PrivORL-j", 10.0, h) for h in args.horizons])
            if sweep
            else ""
        )
        text = (
            f"# PrivORL-j results (config {args.config}, overrides "
            f"{args.overrides or 'none'})\n\n"
            f"{NOTE}\n\n## PrivORL-j vs PrivORL-j-U vs DP-Transformer\n\n{main_t}\n"
        )
        if sweep_t:
            same = all(r.get("trajscore_window") == base_h for r in sweep)
            text += (
                "\n## Horizon sweep (PrivORL-j, eps = 10)\n\n"
                + (
                    "TrajScore here: every H's release scored with the encoder and "
                    f"window of H = {base_h}, "
                    "so the column compares across H.\n\n"
                    if same
                    else "TrajScore here: each run's own (window = its H), not "
                    "comparable across H.\n\n"
                )
                + f"{sweep_t}\n"
            )
        real = [r for r in rows if r["agent_score_real"]]
        if real:
            text += (
                "\n## Agents trained on the real sensitive trajectories (audit, once "
                "per seed)\n\n"
                "| agent | seeds | normalised score |\n|---|---|---|\n"
                + "".join(
                    f"| {a} | {len(real)} | "
                    f"{_ms([r['agent_score_real'].get(a) for r in real])} |\n"
                    for a in agent_cols
                )
            )
        if refs:
            text += (
                "\n## References: real sets scored as if released (TrajScore F1, each "
                "seed's encoder)\n\n"
                "| set | seeds | TrajScore F1 |\n|---|---|---|\n"
                f"| public trajectories ({' + '.join(base.data.public_envs)}) | "
                f"{len(refs)} | {_ms([r['public'] for r in refs])} |\n"
                f"| held-out sensitive trajectories ({base.data.sensitive_env}, never "
                f"trained on) | {len(refs)} | "
                f"{_ms([r['holdout'] for r in refs])} |\n"
            )
        out = ROOT / "benchmarks" / "results"
        out.mkdir(parents=True, exist_ok=True)
        dump_json(
            out / f"{args.name}.json",
            {
                "config": args.config,
                "overrides": args.overrides,
                "note": NOTE,
                "rows": rows,
                "horizon_sweep": sweep,
                "references": refs,
            },
            ran=not args.tables_only,
            indent=2,
            default=float,
        )
        write_text(out / f"{args.name}.md", text)
        return text

    for seed in (
        args.seeds
    ):  # seed-major, then epsilon: an interrupted sweep has whole (seed, eps) tables
        for i, eps in enumerate(args.epsilons):
            for j, model in enumerate(args.models):
                rep = report(model, eps, seed, real_agents=(i == 0 and j == 0))
                if (
                    r := row(rep, model=model, epsilon=eps, seed=seed, horizon=base_h)
                ) is not None:
                    rows.append(r)
                write()
        for h in args.horizons:
            # H = base H is the main table's PrivORL-j run at eps = 10 (with its
            # real-data agents).
            first = (args.models[0], args.epsilons[0]) == ("PrivORL-j", 10.0)
            rep = report(
                "PrivORL-j",
                10.0,
                seed,
                None if h == base_h else h,
                real_agents=h == base_h and first,
            )
            if (
                r := row(rep, model="PrivORL-j", epsilon=10.0, seed=seed, horizon=h)
            ) is not None:
                sweep.append(r)
            write()
        if len(args.horizons) > 1:
            # TrajScore's window is the run's H, so the sweep's own scores do not
            # compare across H: score every H's release again with the base config's
            # encoder and window.
            files = {
                h: Path(args.out)
                / f"PrivORL-j_eps10_H{h}_seed{seed}"
                / "synthetic.hdf5"
                for h in args.horizons
            }
            syn = {f"H{h}": data.load_hdf5(f) for h, f in files.items() if f.exists()}
            fixed = reference_scores(
                privorl_j.load(source, [f"seed={seed}", *args.overrides]), extra=syn
            )
            for r in sweep:
                if r["seed"] == seed and f"trajscore_H{r['horizon']}" in fixed:
                    r["trajscore_f1"] = fixed[f"trajscore_H{r['horizon']}"]["f1"]
                    r["trajscore_window"] = base_h
            write()
        cache = (
            Path(args.out) / f"references_seed{seed}.json"
        )  # per seed (--out holds one config's runs)
        if args.references and (cache.exists() or not args.tables_only):
            if not cache.exists():
                ref = reference_scores(
                    privorl_j.load(source, [f"seed={seed}", *args.overrides])
                )
                cache.write_text(
                    json.dumps(
                        {
                            "seed": seed,
                            "public": ref["trajscore_public"]["f1"],
                            "holdout": ref["trajscore_holdout"]["f1"],
                        }
                    )
                )
            refs.append(json.loads(cache.read_text()))
            write()
    print(write())


if __name__ == "__main__":
    main()
