"""Welch tests behind the additive-zones subsection (issue 24), from stored results.

Reads ``results/pool_additive_private{,_bs0.01}.json`` (per-run gaps) and experiment
2's w + d files (``results/pool_exp2_wd_wd_nonprivate_additive{,_bs0.01}.json`` and
``results/pool_exp2_{wd,wd_nonprivate}{,_bs0.01}.json``: mean and std only; the
``_bs0.01`` paper-zone files hold population stds, ddof = 0, converted here to sample
stds) and writes ``results/pool_additive_compare.md``: Welch's t-test between two
methods (10 runs each), and a one-sample t-test of a method against the behaviour
policy's gap (a constant of the evaluation: common random numbers).

    PYTHONPATH=. python benchmarks/pool_additive_compare.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from scipy import stats

RESULTS = Path(__file__).parent / "results"


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def _private_rows(name: str) -> dict:
    return {(x["w+d"], x["method"]): x for x in _load(name)["rows"]}


def _exp2_rows(name: str, sweep: str, ddof0: bool) -> dict:
    """{w + d: (mean, sample std, n, behaviour gap)} of one experiment-2 sweep."""
    r = _load(name)
    runs = int(r["setting"].split(" runs")[0].split()[-1])
    out = {}
    for x in r["sweeps"][sweep]:
        w = int(x["setting"].split("env.num_products=")[1].split(",")[0])
        std = x["std"] * (math.sqrt(runs / (runs - 1)) if ddof0 else 1.0)
        out[2 * w] = (x["mean"], std, runs, x["behaviour_gap"])
    return out


def welch(a, b) -> float:
    """p of Welch's t-test between two (mean, std, n, ...) summaries."""
    return float(
        stats.ttest_ind_from_stats(a[0], a[1], a[2], b[0], b[1], b[2], equal_var=False)[
            1
        ]
    )


def vs_constant(a, c: float) -> float:
    """p of the one-sample t-test of a (mean, std, n) summary against c."""
    t = (a[0] - c) / (a[1] / math.sqrt(a[2]))
    return float(2 * stats.t.sf(abs(t), a[2] - 1))


def main() -> None:
    lines = [
        "# POOL additive zones: the tests behind the claims (issue 24)",
        "",
        "Welch p between two methods (10 runs each); p vs behaviour: one-sample t-test "
        "against the behaviour policy's gap. Means ± sample std (ddof = 1).",
        "",
        "## Private, rho = 10 (`pool_additive.py --only private`)",
        "",
        "| w+d | A | B | A gap | B gap | Welch p |",
        "|---|---|---|---|---|---|",
    ]

    def summ(x):
        return (x["mean"], x["std"], x["runs"], x["behaviour_gap"])

    for sfx, label in (("", "0.003"), ("_bs0.01", "0.01")):
        rows = _private_rows(f"pool_additive_private{sfx}.json")
        for n in (4, 6):
            mine = [x for (d, m), x in rows.items() if d == n and "K<=" in m][0]
            others = [x for (d, _), x in rows.items() if d == n and x is not mine]
            for o in others:
                lines.append(
                    f"| {n} | {mine['method']} (s = {label}) | {o['method']} | "
                    f"{mine['mean']:.3f} ± {mine['std']:.3f} | "
                    f"{o['mean']:.3f} ± {o['std']:.3f} | "
                    f"{welch(summ(mine), summ(o)):.1e} |"
                )
    a3, a1 = (_private_rows(f"pool_additive_private{s}.json") for s in ("", "_bs0.01"))
    lines += [
        "",
        "## The same method at 0.003 against 0.01, and against the behaviour policy",
        "",
        "| w+d | method | 0.003 | 0.01 | Welch p | behaviour | p vs behaviour at "
        "0.003 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, x in a3.items():
        y = a1.get(key)
        if y is None:
            continue
        lines.append(
            f"| {key[0]} | {key[1]} | {x['mean']:.3f} ± {x['std']:.3f} | "
            f"{y['mean']:.3f} ± {y['std']:.3f} | {welch(summ(x), summ(y)):.1e} | "
            f"{x['behaviour_gap']:.3f} | "
            f"{vs_constant(summ(x), x['behaviour_gap']):.1e} |"
        )
    lines += [
        "",
        "## Experiment 2's w + d sweep (`pool_experiments.py --only 2 --sweeps w+d "
        "wd_nonprivate [--zones additive]`)",
        "",
        "| w+d | row | 0.003 | 0.01 | Welch p (0.003 vs 0.01) | p vs behaviour at "
        "0.003 | p (0.003) vs paper zones at 0.003 |",
        "|---|---|---|---|---|---|---|",
    ]
    sets = {
        "additive, rho = 10": (
            _exp2_rows("pool_exp2_wd_wd_nonprivate_additive.json", "w+d", False),
            _exp2_rows("pool_exp2_wd_wd_nonprivate_additive_bs0.01.json", "w+d", False),
        ),
        "additive, non-private": (
            _exp2_rows(
                "pool_exp2_wd_wd_nonprivate_additive.json", "wd_nonprivate", False
            ),
            _exp2_rows(
                "pool_exp2_wd_wd_nonprivate_additive_bs0.01.json",
                "wd_nonprivate",
                False,
            ),
        ),
        "paper zones, rho = 10": (
            _exp2_rows("pool_exp2_wd.json", "w+d", False),
            _exp2_rows("pool_exp2_wd_bs0.01.json", "w+d", True),
        ),
        "paper zones, non-private": (
            _exp2_rows("pool_exp2_wd_nonprivate.json", "wd_nonprivate", False),
            _exp2_rows("pool_exp2_wd_nonprivate_bs0.01.json", "wd_nonprivate", True),
        ),
    }
    paper = {
        "additive, rho = 10": sets["paper zones, rho = 10"][0],
        "additive, non-private": sets["paper zones, non-private"][0],
    }
    for name, (new, old) in sets.items():
        for n in sorted(new):
            x, y = new[n], old[n]
            pz = paper.get(name)
            lines.append(
                f"| {n} | {name} | {x[0]:.3f} ± {x[1]:.3f} | {y[0]:.3f} ± {y[1]:.3f} | "
                f"{welch(x, y):.1e} | {vs_constant(x, x[3]):.1e} (behaviour "
                f"{x[3]:.3f}) | "
                + (f"{welch(x, pz[n]):.1e}" if pz is not None else "")
                + " |"
            )
    (RESULTS / "pool_additive_compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
