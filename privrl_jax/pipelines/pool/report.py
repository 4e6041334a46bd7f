"""POOL's report: the Markdown summary and the two plots.

The plots come from the release and the simulator only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import planning
from privrl_jax.pipelines._audit_run import markdown_rows
from privrl_jax.pipelines._rundir import write_png
from privrl_jax.pipelines.pool.task import PoolTask

GAPS_PLOT = "plots/gaps.png"
POLICY_PLOT = "plots/policy.png"


def write_plots(
    run_dir: Path, task: PoolTask, q_tables: jax.Array, evaluation: dict[str, Any]
) -> None:
    """Write plots/gaps.png (policy, behaviour, SAA) and plots/policy.png.

    plots/policy.png shows the order-up-to level.
    """
    from matplotlib.figure import Figure  # here, so importing the pipeline stays light

    cfg = task.cfg
    (run_dir / "plots").mkdir(exist_ok=True)
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.bar(
        ["SAA c*", "policy", "behaviour"],
        [0.0, evaluation["gap"], evaluation["behaviour_gap"]],
    )
    ax.set_ylabel("relative optimality gap")
    ax.set_title(cfg.pool.method)
    fig.tight_layout()
    write_png(fig, run_dir / GAPS_PLOT, dpi=100)
    levels = jnp.linspace(0.0, 0.95, 20)
    orders = np.asarray(_policy_grid(task.geom, q_tables, task.actions, levels))
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    for h in range(cfg.env.horizon):
        # What the env keeps: the capacity is 1 and what does not fit is lost.
        ax.plot(
            levels, np.minimum(np.asarray(levels) + orders[h], 1.0), label=f"h={h + 1}"
        )
    ax.set_xlabel("inventory of product 1")
    ax.set_ylabel("post-order level min(s + a, 1)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    write_png(fig, run_dir / POLICY_PLOT, dpi=100)


@jax.jit
def _policy_grid(geom, q_tables, actions, levels):
    # [H, L]: product 1's order at every stage and level (all products at that level).
    policy = planning.greedy_policy(geom, q_tables, actions)
    hs = jnp.arange(q_tables.shape[0])
    return jax.vmap(
        lambda h: jax.vmap(
            lambda s: policy(None, h, jnp.full((actions.shape[-1],), s))[0]
        )(levels)
    )(hs)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a POOL report."""
    p, ev = report["privacy"], report["evaluation"]
    cfg = report["config"]
    lines = ["# POOL report", ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    rows = [
        ("method", cfg["pool"]["method"]),
        ("rho (zCDP, ledger) / budget", f"{p['rho']:.4g} / {p['rho_budget']:.4g}"),
        (f"epsilon at delta={p['delta']:g} (dp-accounting RDP)", f"{p['epsilon']:.4g}"),
        ("noise std", f"{p['noise_std']:.4g}"),
        (
            "benchmark c* (SAA base-stock, levels)",
            (
                f"{ev['benchmark_cost']:.4f} "
                f"({', '.join(f'{x:.2f}' for x in ev['saa_levels'])})"
            ),
        ),
        ("policy cost / gap", f"{ev['policy_cost']:.4f} / {ev['gap']:.3f}"),
        (
            "behaviour cost / gap",
            f"{ev['behaviour_cost']:.4f} / {ev['behaviour_gap']:.3f}",
        ),
    ]
    lines += (
        ["| quantity | value |", "|---|---|"]
        + [f"| {k} | {v} |" for k, v in rows]
        + markdown_rows(report)
    )
    lines += [
        "",
        (
            "**Release** (may be published): `policy.npz`, `policy.json`, "
            "`ledger.json`, `report.json`, `report.md`, `config.yaml`, `plots/`. "
            "`checkpoints/` holds the secret noise key: never publish it."
        ),
        "",
        f"Wall time: {report['wall_time_s']:.1f} s.",
        "",
    ]
    return "\n".join(lines)
