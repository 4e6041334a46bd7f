"""GPOPE's report: the Markdown summary and the two plots (release and audit, apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from privrl_jax.pipelines._audit_run import markdown_rows
from privrl_jax.pipelines._gpope_config import GPOPERunConfig
from privrl_jax.pipelines._rundir import write_png
from privrl_jax.pipelines.gpope.task import GPOPETask, release_values

VALUES_PLOT = "values.png"  # release: from the DP weights and public features only
AUDIT_PLOT = "audit/values_vs_truth.png"  # audit: reads the truth and the data's LSTD


def _new_axes(figsize=(6.0, 3.8)):
    # matplotlib.figure.Figure directly (not pyplot): no backend, no global state;
    # imported here so that importing the pipeline stays light.
    import matplotlib.figure

    fig = matplotlib.figure.Figure(figsize=figsize)
    return fig, fig.add_subplot()


def _values_title(cfg: GPOPERunConfig, g: dict[str, Any]) -> str:
    p = cfg.privacy
    title = (
        f"GPOPE on {cfg.env.name}: eps={p.epsilon:g}, delta={p.delta:g}, "
        f"noise multiplier={g['noise_multiplier']:.3g}"
    )
    return title if g["private"] else title + " (NOT PRIVATE)"


def plot_release_values(
    task: GPOPETask, theta: np.ndarray, g: dict[str, Any], path: Path
) -> None:
    """Release plot: V(s) = theta . phi(s) per chain state, or over evaluation states.

    Over the public evaluation states of Mountain Car / HIV, sorted. Reads only the DP
    theta and public features (the evaluation states come from a public seed, not the
    data).
    """
    cfg = task.cfg
    v = release_values(task, theta)
    label = "GPOPE estimate (DP)" if g["private"] else "GPOPE estimate (not private)"
    fig, ax = _new_axes()
    if cfg.env.name == "chain":
        ax.bar(np.arange(v.size), v, color="tab:blue", label=label)
        ax.set_xticks(np.arange(v.size))
        ax.set_xlabel("chain state (health level)")
    else:
        ax.plot(np.arange(v.size), v, marker=".", color="tab:blue", label=label)
        ax.set_xlabel("public evaluation state (sorted by estimate)")
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_ylabel("estimated V(s) = theta . phi(s)")
    ax.set_title(_values_title(cfg, g), fontsize=9)
    ax.legend(fontsize=8)
    write_png(fig, path, dpi=110, tight=True)


def plot_audit_values(cfg: GPOPERunConfig, audit: dict[str, Any], path: Path) -> None:
    """Audit plot (NOT DP): the estimate against the true V^pi and the data's LSTD.

    Each one's MSE against the truth is in the legend. Continuous envs: states sorted by
    their Monte Carlo value, with +-2 standard errors shaded.
    """
    chain = cfg.env.name == "chain"
    truth = np.asarray(audit["exact_values" if chain else "mc_values"])
    est = np.asarray(audit["estimated_values"])
    lstd = (
        None if audit.get("lstd_values") is None else np.asarray(audit["lstd_values"])
    )
    order = np.arange(truth.size) if chain else np.argsort(truth)
    x = np.arange(truth.size)
    fig, ax = _new_axes()
    truth_name = "true V^pi (exact)" if chain else "true V^pi (Monte Carlo)"
    ax.plot(x, truth[order], "k-o", ms=3, label=truth_name)
    if not chain and audit.get("mc_stderr") is not None:
        se = 2 * np.asarray(audit["mc_stderr"])[order]
        ax.fill_between(
            x, truth[order] - se, truth[order] + se, color="0.8", lw=0, label="+-2 s.e."
        )
    ax.plot(
        x,
        est[order],
        "-s",
        ms=3,
        color="tab:blue",
        label=f"GPOPE, MSE vs truth {audit['mse_vs_exact']:.3g}",
    )
    if lstd is not None:
        ax.plot(
            x,
            lstd[order],
            "--^",
            ms=3,
            color="tab:orange",
            label=f"LSTD (no DP), MSE vs truth {audit['lstd_mse_vs_exact']:.3g}",
        )
    if chain:
        ax.set_xticks(x)
        ax.set_xlabel("chain state (health level)")
    else:
        ax.set_xlabel("evaluation state (sorted by Monte Carlo value)")
    ax.set_ylabel("V(s)")
    ax.set_title("AUDIT, NOT DIFFERENTIALLY PRIVATE: estimate vs truth", fontsize=9)
    ax.legend(fontsize=8)
    write_png(fig, path, dpi=110, tight=True)


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "n/a" if x is None else format(x, fmt)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a GPOPE report."""
    g, t1, p = report["gpope"], report["theorem1"], report["privacy"]
    audit = report.get("audit", {})
    sigma = g["noise_multiplier"]
    sigma_text = "0 (no noise: not private)" if sigma == 0 else _num(sigma)
    theta = [round(x, 4) for x in report["weights"]["theta"]]
    lines = ["# GPOPE report", ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    if p.get("over_budget"):
        lines += ["**OVER BUDGET: the ledger records more than the budget.**", ""]
    rows = [
        (
            "budget (epsilon, delta)",
            f"({p['budget']['epsilon']:g}, {p['budget']['delta']:g})",
        ),
        (
            f"epsilon spent ({report['accountant']}, ledger)",
            _num(report["epsilon_spent"]),
        ),
        (
            "sampling, neighbouring, m, expected batch",
            (
                f"{g['sampling']}, {g['neighboring']}, {g['dataset_size']}, "
                f"{g['expected_batch_size']:g}"
            ),
        ),
        ("steps N, clip norm h", f"{g['steps']}, {g['l2_clip_norms'][0]:g}"),
        (
            "calibrated sigma (noise std / sensitivity), noise std",
            f"{sigma_text}, {_num(g['noise_std'])}",
        ),
        (
            "Theorem-1 sigma (noise std / h), as noise std / 2h, noise std",
            (
                f"{_num(t1.get('paper_sigma'))}, {_num(t1.get('noise_multiplier'))}, "
                f"{_num(t1.get('noise_std'))}"
            ),
        ),
        (
            "theta (V = theta . phi)",
            str(theta) if len(theta) <= 10 else f"{len(theta)} weights: weights.json",
        ),
    ]
    if "mse_vs_exact" in audit:
        rows.append(
            (
                "MSE vs true V^pi (chain exact, else Monte Carlo) / vs LSTD (audit)",
                f"{_num(audit['mse_vs_exact'])} / {_num(audit.get('mse_vs_lstd'))}",
            )
        )
    lines += ["| quantity | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows] + markdown_rows(report)
    theorem = (
        f"Theorem 1 assumes {t1['assumes']}; under poisson sampling it is shown for "
        "scale only."
    )
    if not t1.get("lemma1_condition_holds", True):
        theorem += (
            " Its sigma here is below the proof's Lemma-1 range (sigma^2 >= 1 / ln 2), "
            "so it is no guarantee."
        )
    plots = report.get("plots", {"release": [], "audit": []})
    release = (
        "**Release** (may be published): "
        + ", ".join(
            f"`{f}`"
            for f in report["release"]["publishable"]
            if f not in plots["release"]
        )
        + "."
    )
    if plots["release"]:
        release += (
            " Release plots: " + ", ".join(f"`{f}`" for f in plots["release"]) + "."
        )
    audit_text = (
        "**Audit** (`audit/`, NOT differentially private, never publish): the errors "
        "against the true values (exact or Monte Carlo) and the LSTD solution read the "
        "sensitive "
        "trajectories without DP. `checkpoints/` hold the secret noise key and "
        "sampling seed: never publish them."
    )
    if plots["audit"]:
        audit_text += (
            " Audit plots: " + ", ".join(f"`{f}`" for f in plots["audit"]) + "."
        )
    lines += ["", theorem, "", release, "", audit_text, ""]
    lines += [f"Wall time: {report['wall_time_s']:.1f} s.", ""]
    return "\n".join(lines)
