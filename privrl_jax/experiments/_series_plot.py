"""The scoreboard's series figure: the groups an ordering claim compares, per panel.

A claim whose rule compares our groups with each other (``ordering``; ``threshold``
over an axis) has no paper number to put beside ours; what it rests on is the series
it compares. One panel per claim: each group's mean with its 95% t interval at each
value of the rule's ``over`` axis (or at one position without ``over``), titled by the
claim's id and status. The data come from :func:`privrl_jax.experiments._pages.
claim_series`; this module only draws them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Columns of the panel grid: the figure stays about a page wide.
COLUMNS = 3
# A metric whose means span more than this factor is drawn on a log axis (MSEs of
# methods an order of magnitude apart would otherwise flatten the smaller ones).
LOG_SPAN = 20.0


def _use_log(items: Sequence[float]) -> bool:
    finite = [v for v in items if math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > LOG_SPAN


def plot_claim_series(
    paper: str, items: Sequence[Mapping[str, Any]], path: Path
) -> None:
    """Draw one paper's claim series into ``path`` (a PNG), one panel per claim.

    Deterministic: the same items give the same bytes (no timestamp or version in the
    file).

    Args:
      paper: the paper's name (the figure's title).
      items: its claims' ``claim_series``: ``id``, ``status``, ``metric``, ``over``
        (an axis name or None), ``xs`` (the tick labels), ``numeric`` (lines join a
        group's points only when true), ``value`` (a threshold's
        line, or None) and ``series`` (``label``, ``means``, ``ci95`` per x; NaN
        where the group has no row at that x or no interval).
      path: the PNG to write.

    Raises:
      ValueError: no items.
    """
    if not items:
        raise ValueError(f"{paper}: no claim series to plot.")
    import matplotlib  # noqa: PLC0415 -- only when a PNG is written

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    cols = min(COLUMNS, len(items))
    rows = -(-len(items) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False
    )
    for ax, item in zip(axes.flat, items, strict=False):
        series = item["series"]
        n_x = len(item["xs"])
        # Side by side within each x, so the bars of close means stay apart.
        width = 0.5 / max(1, len(series))
        means = [m for s in series for m in s["means"]]
        for k, s in enumerate(series):
            offset = (k - (len(series) - 1) / 2) * width
            xs = [i + offset for i in range(n_x)]
            half = [0.0 if math.isnan(c) else c for c in s["ci95"]]
            ax.errorbar(
                xs,
                s["means"],
                yerr=half,
                fmt="o-" if item.get("numeric") and n_x > 1 else "o",
                markersize=4,
                linewidth=1,
                capsize=3,
                color=f"C{k}",
                label=s["label"],
            )
        if item.get("value") is not None:
            ax.axhline(item["value"], color="black", linestyle="--", linewidth=1)
            means.append(float(item["value"]))
        if _use_log(means):
            ax.set_yscale("log")
        ax.set_xticks(range(n_x), [str(x) for x in item["xs"]], fontsize=7)
        ax.set_xlim(-0.6, n_x - 0.4)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel(item["over"] or "", fontsize=8)
        ax.set_ylabel(item["metric"], fontsize=8)
        ax.set_title(f"{item['id']}\n{item['status']}", fontsize=8)
        ax.legend(fontsize=6, loc="best")
    for ax in list(axes.flat)[len(items) :]:
        ax.axis("off")
    fig.suptitle(
        f"{paper}: the groups each claim compares (mean, 95% t interval)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
