"""`privrl ope ...`: differentially private off-policy evaluation (GPOPE)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privrl_jax.cli._common import (
    config_option,
    load_or_fail,
    refuse_busy_out,
    set_option,
)

app = typer.Typer(
    help="Differentially private off-policy evaluation (GPOPE).",
    no_args_is_help=True,
)


# --set examples this command's config accepts (tests/cli/test_help.py loads them).
OpeSet = set_option("privacy.epsilon=1", "gpope.steps=500")


@app.command(name="run")
def run_command(
    out: Annotated[
        Path,
        typer.Option("--out", help="Run directory (rerun the same command to resume)."),
    ],
    config: Annotated[str | None, config_option("gpope")] = None,
    overrides: OpeSet = None,
) -> None:
    """GPOPE on the medical chain MDP, Mountain Car or the HIV simulator (env.name).

    DP plan, noisy GTD2 steps, report and audit.
    """
    refuse_busy_out(out)
    from privrl_jax import pipelines  # here: keeps `privrl --help` fast
    from privrl_jax.pipelines import gpope

    spec = pipelines.qualify_config(config, "gpope")
    cfg = load_or_fail(gpope.load, spec, overrides or [])
    report = gpope.run(cfg, out)
    if (
        "process_id" in report
    ):  # another process of a multi-process run: process 0 reports
        return
    typer.echo(gpope.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, weights.json, ledger.json")
