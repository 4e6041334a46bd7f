"""``privrl select``'s Markdown report: the release, then the audit (NOT DP)."""

from __future__ import annotations

from typing import Any


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _table(header: list[str], rows: Any) -> list[str]:
    """A Markdown table after a blank line.

    The header, then one line per row of cells, each formatted by ``_fmt``.
    """
    lines = ["", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return lines + ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]


_METHOD = {"gpope": "GPOPE", "privorl_n": "PrivORL-n", "maze_agent": "GPOPE"}


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: what may be published, then the labelled audit."""
    sel, chosen = report["selection"], report["chosen"]
    lines = [
        "# Private selection",
        "",
        "## Release (DP: may be published)",
        "",
        f"- pipeline: {report['pipeline']}, {report['num_candidates']} candidates "
        "(the grid is public)",
        f"- number of runs: {sel['distribution']} with mean {sel['mean']:g}",
        f"- one run ({_METHOD.get(report['pipeline'], report['pipeline'])} and its "
        f"score): epsilon {sel['run_epsilon']:.4g}"
        + (
            " (the candidates' DP events differ: the pointwise max of their RDP "
            "curves; each alone "
            + ", ".join(f"{e:.4g}" for e in sel["candidate_epsilons"])
            + ")"
            if sel.get("heterogeneous")
            else ""
        ),
        f"- the whole selection: epsilon **{report['epsilon_spent']:.4g}** at delta "
        f"{report['delta']:g} (RDP, dp-accounting's RepeatAndSelectDpEvent)",
        "- naive composition instead: every candidate once "
        f"{report['naive']['every_candidate_once']:.4g}, ceil(mean) runs "
        f"{report['naive']['mean_runs_composed']:.4g}",
        f"- chosen candidate: {chosen['candidate']} {chosen['hyper_parameters']}, "
        f"DP score {_fmt(chosen['score'])}",
    ]
    if report["naive"]["every_candidate_once"] < report["epsilon_spent"]:
        lines.append(
            "- note: running every candidate once and composing would cost less on "
            "this small grid; the repeated selection pays off on larger grids"
        )
    if "warning" in report:
        lines += ["", f"**{report['warning']}**"]
    lines += _table(["candidate", "hyper-parameters"], enumerate(report["candidates"]))
    audit = report.get("audit")
    if audit and report["pipeline"] == "privorl_n":
        lines += _privorl_n_audit(audit)
    elif audit and report["pipeline"] == "maze_agent":
        lines += _maze_audit(audit)
    elif audit:
        lines += [
            "",
            "## Audit (NOT DP: never publish)",
            "",
            audit["notice"],
            "",
            f"- runs K = {audit['runs']}; chosen release's true MSE "
            f"{_fmt(audit['chosen_mse'])}",
        ]
        if "regret" in audit:
            lines.append(
                f"- policy selection: chosen policy's true value "
                f"{_fmt(audit['chosen_true_value'])}, best candidate's "
                f"{_fmt(audit['oracle']['true_value'])} (candidate "
                f"{audit['oracle']['candidate']}); regret {_fmt(audit['regret'])}"
            )
        elif "oracle" in audit:
            lines.append(
                f"- oracle (one audit run of each candidate, best true MSE): "
                f"candidate {audit['oracle']['candidate']}, MSE "
                f"{_fmt(audit['oracle']['mse'])}; gap "
                f"{_fmt(audit.get('gap_to_oracle'))}"
            )
        lines += _table(
            ["run", "candidate", "DP score", "true MSE"],
            (
                (j, r["candidate"], r["score"], r["mse"])
                for j, r in enumerate(audit["history"])
            ),
        )
        if "every_candidate" in audit:
            lines += _table(
                ["candidate", "audit run's score", "true MSE"],
                (
                    (i, m["score"], m["mse"])
                    for i, m in enumerate(audit["every_candidate"])
                ),
            )
    return "\n".join(lines) + "\n"


def _privorl_n_audit(audit: dict) -> list[str]:
    """The audit of a PrivORL-n selection: true score = sliced Wasserstein (lower)."""
    lines = [
        "",
        "## Audit (NOT DP: never publish)",
        "",
        audit["notice"],
        "",
        f"- runs K = {audit['runs']}; chosen release's sliced Wasserstein distance to "
        f"the sensitive rows {_fmt(audit['chosen_sw'])}",
    ]
    for name in ("oracle", "stand_in"):
        if name in audit:
            lines.append(
                f"- {name.replace('_', '-')}: candidate {audit[name]['candidate']}, "
                f"{_fmt(audit[name]['sliced_wasserstein'])}"
            )
    if "stand_in_total_epsilon" in audit:
        eq = audit["stand_in_total_epsilon"]
        lines.append(
            f"- stand-in at the selection's total epsilon {_fmt(eq['epsilon'])}: "
            f"{_fmt(eq['sliced_wasserstein'])}"
        )
    if "expected_chosen_sw" in audit:
        lines.append(
            f"- expected choice over K, the draws and the score's noise: "
            f"{_fmt(audit['expected_chosen_sw'])}; the score's noiseless statistic "
            f"ranks the candidates with Kendall tau {_fmt(audit['rank_agreement'])}"
        )
    statistic = f"{audit.get('score_kind', 'score')} statistic (no noise)"
    return lines + _table(
        ["run", "candidate", "DP score", statistic, "sliced Wasserstein"],
        (
            (j, r["candidate"], r["score"], r["statistic"], r["sliced_wasserstein"])
            for j, r in enumerate(audit["history"])
        ),
    )


def _maze_audit(audit: dict) -> list[str]:
    """The audit of a maze policy selection: true discounted returns (higher)."""
    lines = [
        "",
        "## Audit (NOT DP: never publish)",
        "",
        audit["notice"],
        "",
        f"- runs K = {audit['runs']}; chosen agent's true value "
        f"{_fmt(audit['chosen_true_value'])}, oracle's "
        f"{_fmt(audit['oracle']['true_value'])} (candidate "
        f"{audit['oracle']['candidate']}), random {_fmt(audit['random_true_value'])}, "
        f"last {_fmt(audit['last_true_value'])}; regret {_fmt(audit['regret'])}",
    ]
    for name, err in audit.get("scorer", {}).items():
        lines.append(
            f"- scorer ({name}) against the true values: RMSE {_fmt(err['rmse'])}, "
            f"Spearman {_fmt(err['spearman'])}"
        )
    lines += _table(
        ["run", "candidate", "DP value", "true value"],
        (
            (j, r["candidate"], r["score"], r["true_value"])
            for j, r in enumerate(audit["history"])
        ),
    )
    if "every_candidate" in audit:
        lines += _table(
            ["candidate", "audit run's DP value", "LSTDQ (no noise)", "true value"],
            (
                (i, e["dp_value"], e["lstd_value"], e["true_value"])
                for i, e in enumerate(audit["every_candidate"])
            ),
        )
    return lines
