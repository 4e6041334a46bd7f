"""The marginal baselines' report: the Markdown summary of a report (release and audit,
labelled)."""

from __future__ import annotations

from typing import Any

from privrl_jax.pipelines._synth.report import agent_rows, markdown_head, markdown_tail
from privrl_jax.pipelines.marginal.task import GENERATORS


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PGM / MST report."""
    name = GENERATORS[report["finetune"]["model"]]
    audit = report.get("audit", {})
    lines = markdown_head(report, f"# {name} report") + agent_rows(
        report, describe_seeds=True
    )
    if "fidelity" in audit:
        fid = audit["fidelity"]
        cols = [
            ("release", fid),
            *(
                [("real holdout", audit["anchors"]["real_holdout"])]
                if "anchors" in audit
                else []
            ),
        ]
        for k, what in (
            ("marginal", "marginal score (1 - mean KS)"),
            ("correlation", "correlation score"),
            (
                "sliced_wasserstein",
                "sliced Wasserstein to the sensitive rows (0 = same law)",
            ),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if k in fid:
                lines.append(
                    f"| {what} (audit): {' / '.join(c for c, _ in cols)} | "
                    f"{' / '.join(f'{v[k]:.3f}' for _, v in cols)} |"
                )
    return markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): the fidelity "
            "scores read the sensitive data without DP."
        ),
    )
