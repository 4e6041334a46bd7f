"""The marginal baselines' report: the Markdown summary (release, audit: labelled)."""

from __future__ import annotations

from typing import Any

from privrl_jax.pipelines._synth.report import baseline_markdown
from privrl_jax.pipelines.marginal.task import GENERATORS


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PGM / MST / PrivSyn report."""
    name = GENERATORS[report["finetune"]["model"]]
    return baseline_markdown(report, f"# {name} report")
