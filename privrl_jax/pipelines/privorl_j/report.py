"""PrivORL-j's report: the Markdown summary of a report (release, audit: labelled)."""

from __future__ import annotations

from typing import Any

from privrl_jax.pipelines._synth.report import (
    RELEASE,
    agent_rows,
    markdown_head,
    markdown_tail,
)


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PrivORL-j report."""
    audit = report.get("audit", {})
    syn = report["synthetic"]
    lines = markdown_head(
        report,
        "# PrivORL-j report (unit of privacy: one trajectory)",
        " (trajectories)",
    )
    lines += [
        "| synthetic trajectories / transitions / mean length | "
        f"{syn['num_trajectories']} / {syn['num_transitions']} / "
        f"{syn['mean_length']:.1f} |",
        "| stitching gap, synthetic: at fragment boundaries / inside fragments | "
        f"{syn['stitching']['at_fragment_boundaries']:.4f} / "
        f"{syn['stitching']['inside_fragments']:.4f} |",
    ]
    if "real_stitching" in audit:
        rs = audit["real_stitching"]
        lines.append(
            f"| stitching gap, real (audit) | {rs['at_fragment_boundaries']:.4f} / "
            f"{rs['inside_fragments']:.4f} |"
        )
    lines += agent_rows(report, describe_seeds=False)
    if audit.get("trajscore", {}).get("f1") is not None:
        ts = audit["trajscore"]
        lines.append(
            f"| TrajScore (audit): F1 / precision / recall | {ts['f1']:.3f} / "
            f"{ts['precision']:.3f} / {ts['recall']:.3f} |"
        )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        anchors = audit.get("anchors", {})
        cols = [("release", fid)] + [
            (name, anchors[k])
            for k, name in (
                ("pretrain_only", "pre-training only"),
                ("real_holdout", "real holdout"),
            )
            if k in anchors
        ]
        names = " / ".join(n for n, _ in cols)
        for key, what in (
            ("marginal", "marginal score (1 - mean KS)"),
            ("correlation", "correlation score"),
            ("sliced_wasserstein", "sliced Wasserstein to the sensitive steps"),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if key in fid:
                lines.append(
                    f"| {what} (audit): {names} | "
                    f"{' / '.join(f'{c[key]:.3f}' for _, c in cols)} |"
                )
    return markdown_tail(
        lines,
        report,
        release=RELEASE,
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish). "
            "`checkpoints/` hold the secret "
            "noise key: never publish them."
        ),
    )
