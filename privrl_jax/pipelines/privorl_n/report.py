"""PrivORL-n's report: the Markdown summary of a report, and its plots' column names.

The summary labels the release and the audit; the names are those of the encoded columns
the plots show.
"""

from __future__ import annotations

from typing import Any

from privrl_jax import diffusion
from privrl_jax.pipelines._synth.report import (
    agent_rows,
    markdown_head,
    markdown_tail,
    score_text,
)


def column_names(layout: diffusion.TransitionLayout, dim: int) -> list[str] | None:
    """Names of the encoded transition columns for plots.

    None when discrete dims are one-hot.
    """
    nxt = "s'-s" if layout.next_obs_delta else "s'"
    names = (
        [f"obs s[{i}]" for i in range(layout.obs_dim)]
        + [f"action a[{i}]" for i in range(layout.act_dim)]
        + ["reward r"]
        + [f"next obs {nxt}[{i}]" for i in range(layout.obs_dim)]
        + (
            ["terminal = 0", "terminal = 1"]
            if layout.one_hot_terminals
            else ["terminal"]
        )
    )
    return names if len(names) == dim else None


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-n report."""
    audit = report.get("audit", {})
    lines = markdown_head(report, "# PrivORL-n report") + agent_rows(
        report, describe_seeds=True
    )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        lines.append(
            "| fidelity (audit; 1 = identical, 0 = disjoint): marginal (1 - mean KS) "
            "/ correlation "
            f"(1 - mean abs. Pearson gap / 2) | {fid['marginal']:.3f} / "
            f"{fid['correlation']:.3f} |"
        )
        anchors = audit.get("anchors", {})
        cols = [
            ("release", fid),
            *[
                (name, anchors[k])
                for k, name in (
                    ("pretrain_only", "pre-training only"),
                    ("real_holdout", "real holdout"),
                )
                if k in anchors
            ],
        ]
        for key, what in (
            (
                "sliced_wasserstein",
                "sliced Wasserstein to the sensitive rows (0 = same law)",
            ),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if key in fid:
                lines.append(
                    f"| {what} (audit): {' / '.join(n for n, _ in cols)} | "
                    f"{' / '.join(f'{c[key]:.3f}' for _, c in cols)} |"
                )
        pre_agents = anchors.get("agents_pretrain_only", {})
        for name, res in pre_agents.items():
            seeds = len(res.get("per_seed", [])) or 1
            lines.append(
                f"| {name} normalised score on the pre-training-only samples (audit "
                "anchor) | "
                f"{score_text(res, seeds)} |"
            )
    if "mia" in audit:
        mia = audit["mia"]
        lines.append(
            f"| MIA (audit) TPR@10%FPR / TPR@1%FPR / AUC | {mia['tpr_at_10_fpr']:.3f} "
            f"/ {mia['tpr_at_1_fpr']:.3f} / {mia['auc']:.3f} |"
        )
    if "mia_distance" in audit:
        mia = audit["mia_distance"]
        lines.append(
            "| MIA, distance to the closest synthetic row (audit; black-box) "
            "TPR@10%FPR / TPR@1%FPR / AUC | "
            f"{mia['tpr_at_10_fpr']:.3f} / {mia['tpr_at_1_fpr']:.3f} / "
            f"{mia['auc']:.3f} |"
        )
    lines += cost_table(report)
    return markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`; "
            "the synthetic-data agent scores read only the release and the environment."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): "
            "fidelity, the real-data agent "
            "scores (the second number in the agent rows), the membership-inference "
            "attack and the plots "
            "read the sensitive data without DP. `checkpoints/` hold the secret noise "
            "key: never publish them."
        ),
    )


def _updates(res: dict[str, Any]) -> int | None:
    """The update budget an agent result was trained for (its curve's last step)."""
    curve = (res.get("per_seed") or [{}])[0].get("curve") or []
    return curve[-1]["step"] if curve else None


def _agent_cell(res: dict[str, Any] | None) -> str:
    if not res:
        return "not trained"
    seeds = len(res.get("per_seed", [])) or 1
    n = _updates(res)
    notes = [f"{n // 1000}k updates" if n and n % 1000 == 0 else f"{n} updates"]
    if seeds > 1:
        notes.append(f"{seeds} seeds")
    if "cached" in res:
        notes.append("cached")
    return f"{score_text(res, seeds)} ({', '.join(notes)})"


def cost_table(report: dict[str, Any]) -> list[str]:
    """The "What DP costs" rows: the release between its two anchors.

    The anchors are the pre-trained model alone (public data only, epsilon = 0) and the
    real data (no privacy), on the agents and the fidelity the audit measured, then the
    epsilon audit's line. Empty without the anchors.
    """
    audit = report.get("audit", {})
    anchors = audit.get("anchors", {})
    if "fidelity" not in audit or "real_holdout" not in anchors:
        return []
    eps = report["privacy"].get("rdp", {}).get("epsilon")
    rel = "release" + (f" (epsilon = {eps:.2f})" if eps is not None else "")
    pre = anchors.get("pretrain_only")
    rows = [
        "",
        "## What DP costs (audit)",
        "",
        f"| | pre-training only (epsilon = 0) | {rel} | real data (no privacy) |",
        "|---|---|---|---|",
    ]
    pre_agents = anchors.get("agents_pretrain_only", {})
    real_agents = audit.get("agents_real", {})
    for name, res in report.get("agents_synthetic", {}).items():
        rows.append(
            f"| {name} normalised score | {_agent_cell(pre_agents.get(name))} | "
            f"{_agent_cell(res)} | {_agent_cell(real_agents.get(name))} |"
        )
    fid, hold = audit["fidelity"], anchors["real_holdout"]
    for key, what in (
        ("free_cell_share", "share of positions in the sensitive maze's free cells"),
        ("sliced_wasserstein", "sliced Wasserstein to the sensitive rows (0 = same)"),
    ):
        if key in fid:
            cells = [f"{c[key]:.3f}" if c else "n/a" for c in (pre, fid, hold)]
            rows.append(f"| {what} | {' | '.join(cells)} |")
    notes = [
        "Real data: agents trained on the sensitive training rows, fidelity of the "
        "real holdout (rows never trained on). A cached score was trained by "
        "`benchmarks/quickstart_real_anchor.py` on this run's rows and protocol "
        "(`audit/audit.json` has its provenance)."
    ]
    if any(
        len(res.get("per_seed", [])) <= 1
        for res in report.get("agents_synthetic", {}).values()
    ):
        notes.append(
            "Agent scores are of one seed: over seeds they spread with a std of about "
            "5 points on umaze, and now and then an agent never takes off "
            "(benchmarks/README.md, the PrivORL-n agent sweep), so a gap of that size "
            "between two cells is not a difference."
        )
    notes += [
        f"Epsilon audit: {line}."
        for line in (report.get("epsilon_audit") or {}).get("lines", [])
    ]
    for note in notes:
        rows += ["", note]
    return rows
