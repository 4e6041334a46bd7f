"""`privrl select`: choose a pipeline's hyper-parameters privately.

The choice is made on the sensitive data.
"""

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

# --set examples this command's config accepts (tests/cli/test_select_cli.py loads
# them).
SelectSet = set_option("privacy.epsilon=4", "repetitions.mean=8")


def select_command(
    out: Annotated[
        Path,
        typer.Option("--out", help="Run directory (rerun the same command to resume)."),
    ],
    config: Annotated[str | None, config_option("select")] = None,
    overrides: SelectSet = None,
) -> None:
    """Private selection over a grid of GPOPE or PrivORL-n configs (Papernot-Steinke).

    Random repeats, the best DP score released, the whole search in one ledger.
    Prints the run's report.
    """
    refuse_busy_out(out)
    from privrl_jax import pipelines  # here: keeps `privrl --help` fast
    from privrl_jax.pipelines import select

    spec = pipelines.qualify_config(config, "select")
    cfg = load_or_fail(select.load, spec, overrides or [])
    report = select.run(cfg, out)
    typer.echo(select.render_markdown(report))
    typer.echo(
        f"wrote {out}/{select.RELEASE_FILE}, report.md, report.json, ledger.json "
        "(audit/ and checkpoints/: never publish)"
    )
