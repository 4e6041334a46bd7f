"""How every benchmark writes a result file: the numbers and what they ran with,
together."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np

from privrl_jax import provenance
from privrl_jax.experiments import stats as pstats
from privrl_jax.experiments.stats import summary

# The statistics (mean, sample std ddof = 1, Student-t intervals, paired tests,
# within-seed differences) are the package's one implementation,
# privrl_jax/experiments/stats.py; ``summary`` stays importable from here.

# What a results file records of the host and load its runs ran under.
RUN_FIELDS = ("provenance", "xla_flags", "uptime")


def dump_json(
    path: str | Path, payload: Any, *, ran: bool = True, **json_kwargs: Any
) -> None:
    """Writes ``payload`` to ``path`` as JSON, with :func:`privrl_jax.provenance`
    (versions, platform, devices): under the key ``provenance`` of a dict payload, or
    for any other payload in ``NAME.provenance.json`` beside it (readers of the list
    keep working).

    ``ran=False`` says this invocation started no run (it re-tabulated stored ones): the
    stored file's :data:`RUN_FIELDS` are kept, since they describe the host and load the
    runs had, and this host's provenance and load go under ``tabulated``."""
    path = Path(path)
    info = provenance()
    if not isinstance(payload, dict):
        path.with_suffix(".provenance.json").write_text(json.dumps(info, indent=2))
        write_text(path, json.dumps(payload, **json_kwargs))
        return
    payload = {**payload, "provenance": info}
    stored = _stored(path) if not ran else {}
    if any(k in stored for k in RUN_FIELDS):
        now = {k: payload[k] for k in RUN_FIELDS if k in payload}
        payload |= {k: stored[k] for k in RUN_FIELDS if k in stored}
        payload["tabulated"] = now
    write_text(path, json.dumps(payload, **json_kwargs))


def _stored(path: Path) -> dict:
    """The JSON object stored at ``path``; empty when there is none or it is broken."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def write_text(path: Path, text: str) -> None:
    """Writes ``text`` beside ``path`` and renames it over: a run killed mid-write
    leaves the previous file, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def with_stored_runs(
    path: Path, runs: list[dict], key: Callable[[dict], Hashable]
) -> list[dict]:
    """``runs`` plus the runs stored in ``path`` (a results JSON with a ``runs`` list)
    whose ``key`` none of ``runs`` has: an invocation over fewer seeds or grid points
    than the stored table, or one reading a partial runs folder, re-tabulates without
    dropping what it did not rerun. Stored runs keep their order; new ones follow."""
    if not path.exists():
        return runs
    new = {key(r): r for r in runs}
    stored = json.loads(path.read_text()).get("runs", [])
    merged = [new.pop(key(r), r) for r in stored]
    return merged + [r for r in runs if key(r) in new]


def write_results(
    res: Path, stem: str, payload: dict, md: str, *, ran: bool = True
) -> None:
    """Writes ``res/stem.json`` (``payload``, the XLA flags and ``uptime`` added) and
    ``res/stem.md`` (``md`` with the load line), the layout the tuning scripts share;
    ``ran=False`` keeps the stored run-time fields (:func:`dump_json`)."""
    path = res / f"{stem}.json"
    dump_json(
        path,
        {**payload, "xla_flags": os.environ.get("XLA_FLAGS", ""), "uptime": uptime()},
        ran=ran,
        indent=2,
    )
    md += load_line(path)
    write_text(res / f"{stem}.md", md)


def load_line(path: Path) -> str:
    """The Markdown line giving the load stored in the results JSON at ``path``: the
    runs' own, also after a re-tabulation (``tabulated`` then holds the tabulating
    host's)."""
    got = _stored(path)
    when = "when the runs were written" if "tabulated" in got else "when written"
    return f"\n`uptime` {when}: {got.get('uptime', '')}; {os.cpu_count()} CPUs.\n"


def uptime() -> str:
    """``uptime``'s line (the load a timing ran under), or "" where there is none."""
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return ""


# Epsilon sweeps (privorl_n_eps_sweep.py, privorl_j_eps_sweep.py): the same statistics,
# tables and plot for every pipeline.

PRETRAIN_ROW = "pre-training only (Table IV)"
HOLDOUT_ROW = "real holdout"
# The privacy-utility curves' budgets (PrivORL Fig. 6 / Table VII); inf: sigma = 0.
SWEEP_EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0, math.inf)


# The Maze2D rows of PrivORL Table I at CPU scale: sensitive env -> the public envs (the
# other two mazes, in the order their collection keys 1000 * seed + 1, + 2 follow).
MAZES = {
    "umaze": (
        "maze2d-umaze-dense-v1",
        ("maze2d-medium-dense-v1", "maze2d-large-dense-v1"),
    ),
    "medium": (
        "maze2d-medium-dense-v1",
        ("maze2d-umaze-dense-v1", "maze2d-large-dense-v1"),
    ),
    "large": (
        "maze2d-large-dense-v1",
        ("maze2d-umaze-dense-v1", "maze2d-medium-dense-v1"),
    ),
}


def maze_overrides(maze: str) -> list[str]:
    """The config overrides that make ``maze`` (a key of :data:`MAZES`) the sensitive
    task; none for umaze, the configs' default (its runs and results are unchanged)."""
    if maze == "umaze":
        return []
    sens, pub = MAZES[maze]
    return [f"data.sensitive_env={sens}", f"data.public_envs=[{','.join(pub)}]"]


def data_files(out: Path, seed: int, maze: str = "umaze") -> tuple[Path, Path]:
    """The seed's sensitive (members + holdout) and public transitions, as the pipelines
    collect them, with ``maze`` (a key of :data:`MAZES`) the sensitive task. Moved here
    from ``marginal_baselines.py`` (now the experiment file
    ``privrl_jax/experiments/marginal_baselines.yaml``, whose runs collect the same data
    themselves)."""
    import jax  # noqa: PLC0415 -- the timing scripts import this module without jax

    from privrl_jax import data  # noqa: PLC0415
    from privrl_jax.pipelines import marginal  # noqa: PLC0415
    from privrl_jax.pipelines.privorl_n import collect_transitions  # noqa: PLC0415

    cfg = marginal.load("marginal/pgm_umaze", [f"seed={seed}", *maze_overrides(maze)])
    d = cfg.data
    tag = "" if maze == "umaze" else f"_{maze}"
    sens, pub = (
        out / f"data_seed{seed}{tag}_sensitive.hdf5",
        out / f"data_seed{seed}{tag}_public.hdf5",
    )
    if not sens.exists():
        full = collect_transitions(
            d.sensitive_env,
            d.sensitive_size + d.holdout_size,
            seed * 1000,
            d.action_noise,
        )
        data.save_hdf5(sens, jax.tree_util.tree_map(np.asarray, full))
    if not pub.exists():
        parts = [
            collect_transitions(e, d.public_size, seed * 1000 + 1 + i, d.action_noise)
            for i, e in enumerate(d.public_envs)
        ]
        public = jax.tree_util.tree_map(
            lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts
        )
        data.save_hdf5(pub, public)
    return sens, pub


def fidelity_metrics(unit: str) -> dict[str, tuple[str, str]]:
    """The synthetic-data fidelity columns every PrivORL table reports, key -> (label,
    better); ``unit`` names what the sliced distance compares (``rows`` of
    transitions, trajectory ``steps``)."""
    return {
        "free_cell_share": ("share in the sensitive maze's free cells", "higher"),
        "sliced_wasserstein": (f"sliced Wasserstein to the sensitive {unit}", "lower"),
        "marginal": ("marginal score (1 - mean KS)", "higher"),
        "correlation": ("correlation score", "higher"),
    }


def eps_name(eps: float) -> str:
    """``"inf"`` or epsilon in ``%g`` (run directory names, table rows)."""
    return "inf" if math.isinf(eps) else f"{eps:g}"


def metric_table(
    rows: list[tuple[str, list[dict]]],
    metrics: dict[str, tuple[str, str]],
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Per row, the :func:`summary` of each of ``metrics`` (key -> (label, "higher" or
    "lower" is better)) over its seeds' scores, and the Markdown table of them (rows
    without scores are left out)."""
    table = {
        name: {k: summary([s[k] for s in scores]) for k in metrics}
        for name, scores in rows
        if scores
    }
    head = (
        "| row | seeds | "
        + " | ".join(f"{label} ({better})" for label, better in metrics.values())
        + " |"
    )
    lines = [head, "|" + "---|" * (2 + len(metrics))]
    for name, stats in table.items():
        cells = [
            f"{s['mean']:.3f} ± {s['std']:.3f} [±{s['ci95']:.3f}]"
            for s in stats.values()
        ]
        lines.append(
            f"| {name} | {next(iter(stats.values()))['n']} | "
            + " | ".join(cells)
            + " |"
        )
    return table, lines


def paired_differences(
    runs: list[dict],
    epsilons: list[float],
    metrics: dict[str, tuple[str, str]],
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Within-seed differences of each metric between successive epsilons (``runs``:
    dicts with ``seed``, ``epsilon`` and the scores under ``release``): their
    :func:`summary` and how many seeds rose, per step "a->b"; and the Markdown table.
    Each seed's own data and pre-training shift all its rows alike; the differences
    remove that shift."""
    by = {(r["seed"], r["epsilon"]): r["release"] for r in runs}
    out: dict[str, dict[str, dict]] = {}
    for a, b in zip(epsilons, epsilons[1:]):
        seeds = sorted({s for s, e in by if e == a} & {s for s, e in by if e == b})
        if not seeds:
            continue
        step = f"{eps_name(a)}->{eps_name(b)}"
        out[step] = {}
        for k in metrics:
            d = [by[(s, b)][k] - by[(s, a)][k] for s in seeds]
            out[step][k] = pstats.differences(d)
    return out, _paired_table(out, "eps step", metrics)


def _paired_table(
    out: dict[str, dict[str, dict]], first: str, metrics: dict[str, tuple[str, str]]
) -> list[str]:
    """The Markdown table of paired differences (mean [95% half-width], seeds that
    rose), one row per key of ``out``; ``first`` heads the key column."""
    lines = [
        f"| {first} | seeds | "
        + " | ".join(label for label, _ in metrics.values())
        + " |",
        "|" + "---|" * (2 + len(metrics)),
    ]
    for step, stats in out.items():
        n = next(iter(stats.values()))["n"]
        lines.append(
            f"| {step} | {n} | "
            + " | ".join(
                f"{s['mean']:+.3f} [±{s['ci95']:.3f}] rose {s['rose']}/{n}"
                for s in stats.values()
            )
            + " |"
        )
    return lines


def paired_rows(
    rows: dict[str, dict[int, dict]],
    steps: list[tuple[str, str]],
    metrics: dict[str, tuple[str, str]],
) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Within-seed differences ``b - a`` of each metric for each named pair of rows
    (``rows``: row name -> seed -> scores), over the seeds both rows have: their
    :func:`summary` and how many seeds rose, keyed "a -> b"; and the Markdown table.
    :func:`paired_differences` for any pair of rows (an anchor against a release)."""
    out: dict[str, dict[str, dict]] = {}
    for a, b in steps:
        seeds = sorted(set(rows.get(a, {})) & set(rows.get(b, {})))
        if not seeds:
            continue
        out[f"{a} -> {b}"] = {
            k: pstats.differences([rows[b][s][k] - rows[a][s][k] for s in seeds])
            for k in metrics
        }
    return out, _paired_table(out, "pair (b - a)", metrics)


def plot_eps_sweep(
    rows: list[tuple[str, float | None, list[dict]]],
    table: dict[str, dict[str, dict]],
    metrics: dict[str, tuple[str, str]],
    path: Path,
    anchors: tuple[tuple[str, str], ...] = ((PRETRAIN_ROW, "--"), (HOLDOUT_ROW, ":")),
) -> None:
    """One panel per metric: the release's mean and 95% interval against epsilon (log
    scale, inf one step right of the largest), the ``anchors`` (row name, line style;
    default :data:`PRETRAIN_ROW`, :data:`HOLDOUT_ROW`) as horizontal lines with their
    intervals as bands. ``rows``: (name, epsilon or 0.0 / None for the anchors,
    scores)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    finite = [e for _, e, _ in rows if e not in (None, 0.0) and not math.isinf(e)]
    inf_x = max(finite) * 4 if finite else 1.0
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4))
    for ax, (key, (label, better)) in zip(np.atleast_1d(axes), metrics.items()):
        xs, ms, cs = [], [], []
        for name, eps, _ in rows:
            if name not in table or eps in (None, 0.0):
                continue
            xs.append(inf_x if math.isinf(eps) else eps)
            ms.append(table[name][key]["mean"])
            cs.append(table[name][key]["ci95"])
        ax.errorbar(xs, ms, yerr=cs, marker="o", capsize=3, label="release (95% CI)")
        for name, style in anchors:
            if name in table:
                s = table[name][key]
                ax.axhline(s["mean"], ls=style, color="gray", label=name)
                ax.axhspan(
                    s["mean"] - s["ci95"],
                    s["mean"] + s["ci95"],
                    color="gray",
                    alpha=0.15,
                )
        ax.set_xscale("log")
        ax.set_xticks(xs, [("inf" if x == inf_x else f"{x:g}") for x in xs])
        ax.set_xlabel("epsilon")
        ax.set_title(f"{label}\n({better} is better)", fontsize=9)
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def paired_vs(
    rows: dict[str, dict[int, dict]], a: str, b: str, key: str
) -> dict[str, Any] | None:
    """Within-seed differences ``b - a`` of ``key`` over the seeds both rows have: the
    :func:`summary` of them, the seeds, how many rose and the two-sided paired t-test's
    p (None below 2 seeds or at zero spread); None when no seed is shared. (Moved here
    from the former ``table1_agents.py``, now ``privrl_jax/experiments/
    privorl_table1.yaml``.)"""
    seeds = sorted(set(rows.get(a, {})) & set(rows.get(b, {})))
    if not seeds:
        return None
    b_vals = [rows[b][s][key] for s in seeds]
    a_vals = [rows[a][s][key] for s in seeds]
    d = [y - x for x, y in zip(a_vals, b_vals)]
    out: dict[str, Any] = pstats.differences(d) | {"seeds": seeds}
    # The key order of the stored files: summary, seeds, rose, p.
    out["rose"] = out.pop("rose")
    p = None
    if len(d) > 1 and out["std"] > 0:
        p = pstats.paired(b_vals, a_vals)["p"]
    out["p"] = p
    return out


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
