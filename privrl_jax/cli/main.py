"""The `privrl` command: a thin shell over the pipelines."""

from __future__ import annotations

from typing import Annotated

import typer

from privrl_jax.cli import agent as _agent
from privrl_jax.cli import data as _data
from privrl_jax.cli import ope as _ope
from privrl_jax.cli import pool as _pool
from privrl_jax.cli import privacy as _privacy
from privrl_jax.cli import synth as _synth
from privrl_jax.cli._common import DEBUG_KEY, PrivrlGroup

app = typer.Typer(
    cls=PrivrlGroup,
    help="privrl_jax: differentially private reinforcement learning in JAX.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def main(
    ctx: typer.Context,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            metavar="",
            envvar="PRIVRL_DEBUG",
            help="Show the traceback of an error, not just its one line.",
        ),
    ] = False,
) -> None:
    """privrl_jax: differentially private reinforcement learning in JAX."""
    ctx.meta[DEBUG_KEY] = debug


app.add_typer(_privacy.app, name="privacy")
app.add_typer(_data.app, name="data")
app.add_typer(_agent.app, name="agent")
app.add_typer(_synth.app, name="synth")
app.add_typer(_ope.app, name="ope")
app.add_typer(_pool.app, name="pool")
app.command(name="quickstart")(_synth.quickstart)

if __name__ == "__main__":
    app()
