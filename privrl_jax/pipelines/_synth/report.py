"""The common parts of the synthesis pipelines' report.md.

The head of the table, the agent rows, the fidelity rows and the closing paragraphs, and
the whole report of the transition-level baselines (marginal, PATE-GAN).
"""

from __future__ import annotations

from typing import Any

from privrl_jax.pipelines._audit_run import markdown_rows

RELEASE = (
    "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
    "`report.json`, `config.yaml`."
)
# The audit's fidelity scores in the order the baselines' reports show them.
FIDELITY = (
    ("marginal", "marginal score (1 - mean KS)"),
    ("correlation", "correlation score"),
    ("sliced_wasserstein", "sliced Wasserstein to the sensitive rows (0 = same law)"),
    ("free_cell_share", "share of positions in the sensitive maze's free cells"),
)


def sigma_text(sigma: float) -> str:
    return "0 (no noise: not private)" if sigma == 0 else f"{sigma:.3f}"


def score_text(res: dict[str, Any], seeds: int) -> str:
    mean = res.get("score_mean", float("nan"))
    return (
        f"{mean:.1f} ± {res.get('score_std', float('nan')):.1f}"
        if seeds > 1
        else f"{mean:.1f}"
    )


def markdown_head(report: dict[str, Any], title: str, q_of: str = "") -> list[str]:
    """The title, the warnings, and the table's first rows.

    Budget, epsilon spent, DP steps (``q_of``: what q samples, e.g. ``
    (trajectories)``).
    """
    p, fin = report["privacy"], report["finetune"]
    budget = p["budget"]
    fmt = lambda e: "n/a" if e is None else f"{e:.3f}"
    lines = [title, ""]
    if "warning" in report:
        lines += [f"**{report['warning']}**", ""]
    if p.get("over_budget"):
        lines += [
            "**OVER BUDGET: the ledger records more than the budget's epsilon.**",
            "",
        ]
    return lines + [
        "| quantity | value |",
        "|---|---|",
        f"| budget (epsilon, delta) | ({budget['epsilon']:g}, {budget['delta']:g}) |",
        f"| epsilon spent (RDP / PLD) | {fmt(p.get('rdp', {}).get('epsilon'))} / "
        f"{fmt(p.get('pld', {}).get('epsilon'))} |",
        f"| DP steps, noise multiplier, q{q_of} | {fin['steps']}, "
        f"{sigma_text(fin['noise_multiplier'])}, {fin['sampling_rate']:.4f} |",
        *clip_rows(fin),
        *markdown_rows(report),
    ]


def clip_rows(fin: dict[str, Any]) -> list[str]:
    """The clip norm's row under adaptive clipping: its start, target and final value.

    Empty for a fixed clip norm (the plan's, which the ledger records).
    """
    adaptive = fin.get("adaptive_clipping")
    if adaptive is None or fin.get("final_l2_clip_norm") is None:
        return []
    return [
        f"| clip norm C (adaptive, target quantile "
        f"{adaptive['target_quantile']:g}): initial -> final | "
        f"{fin['l2_clip_norms'][0]:.4g} -> {fin['final_l2_clip_norm']:.4g} |"
    ]


def agent_rows(report: dict[str, Any], describe_seeds: bool) -> list[str]:
    """One row per agent: its score on the synthetic data / on the real data (audit).

    ``describe_seeds`` names the seed count in the row's label.
    """
    real_agents = report.get("audit", {}).get("agents_real", {})
    rows = []
    for name, res in report.get("agents_synthetic", {}).items():
        real = real_agents.get(name, {})
        seeds = len(res.get("per_seed", [])) or 1
        what = (
            (
                f" (mean ± std over {seeds} agent seeds)"
                if seeds > 1
                else " (one agent seed)"
            )
            if describe_seeds
            else ""
        )
        rows.append(
            f"| {name} normalised score{what}: synthetic / real (audit) | "
            f"{score_text(res, seeds)} / "
            f"{score_text(real, seeds) if real else 'not trained'} |"
        )
    return rows


def markdown_tail(
    lines: list[str], report: dict[str, Any], *, release: str, audit: str
) -> str:
    """``lines`` and the closing paragraphs as one markdown text.

    The closing paragraphs say what the release and the audit are, and the wall time.
    """
    return "\n".join(
        [
            *lines,
            "",
            release,
            "",
            audit,
            "",
            f"Wall time: {report['wall_time_s']:.0f} s.",
            "",
        ]
    )


def fidelity_rows(audit: dict[str, Any]) -> list[str]:
    """One row per fidelity score in ``audit``.

    The release's, then the real holdout's where the audit scored that anchor.
    """
    if "fidelity" not in audit:
        return []
    fid = audit["fidelity"]
    cols = [("release", fid)]
    if "anchors" in audit:
        cols.append(("real holdout", audit["anchors"]["real_holdout"]))
    return [
        f"| {what} (audit): {' / '.join(c for c, _ in cols)} | "
        f"{' / '.join(f'{v[k]:.3f}' for _, v in cols)} |"
        for k, what in FIDELITY
        if k in fid
    ]


def baseline_markdown(
    report: dict[str, Any], title: str, rows: tuple[str, ...] = ()
) -> str:
    """The report.md of a transition-level baseline.

    The head, the baseline's own ``rows``, the agent rows, the audit's fidelity rows and
    the closing paragraphs.
    """
    lines = [
        *markdown_head(report, title),
        *rows,
        *agent_rows(report, describe_seeds=True),
        *fidelity_rows(report.get("audit", {})),
    ]
    return markdown_tail(
        lines,
        report,
        release=RELEASE,
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): the "
            "fidelity scores read the sensitive data without DP."
        ),
    )
