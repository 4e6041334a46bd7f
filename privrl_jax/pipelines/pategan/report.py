"""The PATE-GAN baselines' report: the Markdown summary (release, audit: labelled)."""

from __future__ import annotations

from typing import Any

from privrl_jax.pipelines._synth.report import baseline_markdown
from privrl_jax.pipelines.pategan.task import GENERATORS


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PATE-GAN report."""
    fin = report["finetune"]
    return baseline_markdown(
        report,
        f"# {GENERATORS[fin['model']]} report",
        rows=(
            f"| teachers, vote queries (rounds x per round) | {fin['num_teachers']}, "
            f"{fin['steps']} ({fin['rounds']} x {fin['queries_per_round']}) |",
        ),
    )
