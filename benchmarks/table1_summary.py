"""PrivORL Table I at CPU scale, one table: every (maze, agent) cell that
``table1_agents.py`` has stored, each baseline and PrivORL-n at eps 1 and 10, beside the
real-data and pre-training-only anchors, and the average over the cells we have set
against the paper's Maze2D averages (Sec. IX-A; its Table I body is an image we do not
have, so only its 9-cell averages and one named cell can be compared).

Reads ``benchmarks/results/table1_agents_MAZE[_AGENT].json`` (mazes of
``_results.MAZES``, agents ``iql`` and ``td3bc``); starts no run.

    python benchmarks/table1_summary.py   # -> results/table1_summary.{json,md}
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from _results import MAZES, dump_json, write_text  # benchmarks/_results.py

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
AGENTS = {"iql": "IQL", "td3bc": "TD3+BC"}
EPSILONS = ("1", "10")
# Columns in the paper's order, then ours only (AIM, MST are not in the paper).
METHODS = ("PGM", "PrivSyn", "PATE-GAN", "PrePATE-GAN", "AIM", "MST")
# The paper's Maze2D averages over its 9 cells (3 mazes x TD3+BC, IQL, EDAC), Sec. IX-A.
PAPER_AVERAGE = {
    "1": {"PGM": 11.7, "PrivSyn": 3.4, "PATE-GAN": 2.0, "PrePATE-GAN": 3.2},
    "10": {"PGM": 18.9, "PrivSyn": 3.9, "PATE-GAN": 5.1, "PrePATE-GAN": 7.2},
}
PAPER_PRIVORL_N = {"1": 51.9, "10": 69.3}
PAPER_METHODS = tuple(PAPER_AVERAGE["1"])


def row_name(method: str, eps: str) -> str:
    """The key of ``method`` at ``eps`` in a ``table1_agents`` results table."""
    suffix = " (sweep)" if method == "PrivORL-n" else ""
    return f"{method} eps = {eps}{suffix}"


def load_cells(results: Path = RESULTS) -> list[dict]:
    """One record per stored (maze, agent): the agent score's summary for every row of
    its table, keyed by row name, and the seeds it ran."""
    cells = []
    for maze in MAZES:
        for agent, label in AGENTS.items():
            tag = "" if agent == "iql" else f"_{agent}"
            path = results / f"table1_agents_{maze}{tag}.json"
            if not path.exists():
                continue
            res = json.loads(path.read_text())
            score = f"agent_{agent}"
            cells.append(
                {
                    "maze": maze,
                    "agent": label,
                    "seeds": res["seeds"],
                    "scores": {
                        row: stats[score]
                        for row, stats in res["table"].items()
                        if score in stats
                    },
                }
            )
    return cells


def _cell(stats: dict | None) -> str:
    if stats is None:
        return "-"
    sd = "" if math.isnan(stats["std"]) else f" ± {stats['std']:.1f}"
    return f"{stats['mean']:.1f}{sd} ({stats['n']})"


def averages(cells: list[dict]) -> dict[str, dict[str, float]]:
    """Per epsilon, each method's mean over the cells that have it (the paper's
    average, taken over our cells), and the number of cells it covers."""
    out: dict[str, dict[str, float]] = {}
    for eps in EPSILONS:
        out[eps] = {}
        for m in (*METHODS, "PrivORL-n"):
            v = [
                c["scores"][row_name(m, eps)]["mean"]
                for c in cells
                if row_name(m, eps) in c["scores"]
            ]
            out[eps][m] = float(np.mean(v)) if v else math.nan
            out[eps][f"{m} cells"] = len(v)
    return out


def best_counts(
    cells: list[dict], methods: tuple[str, ...] = METHODS
) -> dict[str, dict[str, int]]:
    """Per epsilon: in how many cells PrivORL-n's mean is above that of every one of
    ``methods`` the cell has."""
    out = {}
    for eps in EPSILONS:
        wins = total = 0
        for c in cells:
            ours = c["scores"].get(row_name("PrivORL-n", eps))
            base = [
                c["scores"][row_name(m, eps)]["mean"]
                for m in methods
                if row_name(m, eps) in c["scores"]
            ]
            if ours is None or not base:
                continue
            total += 1
            wins += ours["mean"] > max(base)
        out[eps] = {"privorl_n_best": wins, "cells": total}
    return out


def render(cells: list[dict]) -> str:
    """The Markdown table: one line per (maze, agent, eps), then the averages."""
    head = [*METHODS, "PrivORL-n", "pre-training only", "real data (no DP)"]
    lines = [
        "# PrivORL Table I at CPU scale: normalised agent score, "
        "mean ± sample std (seeds)",
        "",
        "| maze | agent | eps | " + " | ".join(head) + " |",
        "|---|---|---|" + "---:|" * len(head),
    ]
    for c in cells:
        for eps in EPSILONS:
            vals = [c["scores"].get(row_name(m, eps)) for m in (*METHODS, "PrivORL-n")]
            vals += [
                c["scores"].get("pre-training only (Table IV)"),
                c["scores"].get("real data (sweep)"),
            ]
            lines.append(
                f"| {c['maze']} | {c['agent']} | {eps} | "
                + " | ".join(_cell(v) for v in vals)
                + " |"
            )
    avg = averages(cells)
    lines += [
        "",
        "Average over the cells above (the paper: over its 9 Maze2D cells, 3 mazes x "
        "TD3+BC, IQL, EDAC; AIM and MST are not in it):",
        "",
        "| eps | source | " + " | ".join((*METHODS, "PrivORL-n")) + " |",
        "|---|---|" + "---:|" * (len(METHODS) + 1),
    ]
    for eps in EPSILONS:
        ours = [
            f"{avg[eps][m]:.1f} ({avg[eps][f'{m} cells']})"
            if avg[eps][f"{m} cells"]
            else "-"
            for m in (*METHODS, "PrivORL-n")
        ]
        paper = [
            f"{PAPER_AVERAGE[eps][m]:.1f}" if m in PAPER_AVERAGE[eps] else "-"
            for m in METHODS
        ] + [f"{PAPER_PRIVORL_N[eps]:.1f}"]
        lines.append(f"| {eps} | ours (cells) | " + " | ".join(ours) + " |")
        lines.append(f"| {eps} | paper (9 cells) | " + " | ".join(paper) + " |")
    for label, methods in (
        ("every baseline's", METHODS),
        ("the paper's four baselines'", PAPER_METHODS),
    ):
        lines += [
            "",
            f"PrivORL-n's mean above {label}: "
            + "; ".join(
                f"eps {e}: {b['privorl_n_best']} of {b['cells']} cells"
                for e, b in best_counts(cells, methods).items()
            )
            + ".",
        ]
    lines += [
        "",
        "Our cells differ from the paper's in scale (20k sensitive and 20k synthetic "
        "transitions, 30k agent updates, the JAX -v1 mazes; benchmarks/README.md, "
        "PrivORL Table I); read the averages for direction, not level.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    cells = load_cells()
    if not cells:
        raise SystemExit(
            f"no table1_agents_*.json in {RESULTS}: "
            "run benchmarks/table1_agents.py first"
        )
    md = render(cells)
    dump_json(
        RESULTS / "table1_summary.json",
        {
            "cells": cells,
            "averages": averages(cells),
            "best": best_counts(cells),
            "best_of_paper_baselines": best_counts(cells, PAPER_METHODS),
        },
        indent=2,
    )
    write_text(RESULTS / "table1_summary.md", md)
    print(md)


if __name__ == "__main__":
    main()
