"""The `privrl` command: a thin shell over the pipelines."""

from __future__ import annotations

import typer

from privrl_jax.cli import agent as _agent
from privrl_jax.cli import data as _data
from privrl_jax.cli import privacy as _privacy

app = typer.Typer(
    help="privrl_jax: differentially private reinforcement learning in JAX.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(_privacy.app, name="privacy")
app.add_typer(_data.app, name="data")
app.add_typer(_agent.app, name="agent")

if __name__ == "__main__":
    app()
