"""`privrl pool ...`: private offline RL with one-sided feedback (POOL)."""

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
    help="Private offline RL with one-sided feedback (POOL) on lost-sales inventory.",
    no_args_is_help=True,
)


# --set examples this command's config accepts (tests/cli/test_help.py loads them).
PoolSet = set_option("privacy.rho=0.5", "pool.bonus_scale=0.02")


@app.command(name="run")
def run_command(
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Run directory (a rerun of a finished run spends nothing)."
        ),
    ],
    config: Annotated[str | None, config_option("pool")] = None,
    overrides: PoolSet = None,
) -> None:
    """POOL (or a baseline): private statistics, pessimistic backward induction.

    Prints the run's report.
    """
    refuse_busy_out(out)
    from privrl_jax import pipelines  # here: keeps `privrl --help` fast
    from privrl_jax.pipelines import pool

    spec = pipelines.qualify_config(config, "pool")
    cfg = load_or_fail(pool.load, spec, overrides or [])
    report = pool.run(cfg, out)
    typer.echo(pool.render_markdown(report))
    typer.echo(
        f"wrote {out}/report.md, report.json, policy.npz, policy.json, ledger.json"
    )
