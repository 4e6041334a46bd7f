"""The `privrl` command: a thin shell over the pipelines."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

import privrl_jax
from privrl_jax.cli import agent as _agent
from privrl_jax.cli import data as _data
from privrl_jax.cli import experiment as _experiment
from privrl_jax.cli import ope as _ope
from privrl_jax.cli import pool as _pool
from privrl_jax.cli import privacy as _privacy
from privrl_jax.cli import select as _select
from privrl_jax.cli import synth as _synth
from privrl_jax.cli._common import (
    DEBUG_KEY,
    EXIT_ERROR,
    PrivrlGroup,
    one_line,
    refuse_busy_out,
)

# privacy.ENV_* (tests/cli/test_cli_imports.py checks they agree), written out here
# because importing privrl_jax.privacy imports jax: `privrl --help` must not.
ENV_COORDINATOR = "PRIVRL_COORDINATOR"
ENV_NUM_PROCESSES = "PRIVRL_NUM_PROCESSES"
ENV_PROCESS_ID = "PRIVRL_PROCESS_ID"
ENV_AUTO = "PRIVRL_DISTRIBUTED"

app = typer.Typer(
    cls=PrivrlGroup,
    help="privrl_jax: differentially private reinforcement learning in JAX.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"privrl_jax {privrl_jax.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            metavar="",
            envvar="PRIVRL_DEBUG",
            help="Show the traceback of an error, not just its one line.",
        ),
    ] = False,
    coordinator: Annotated[
        str | None,
        typer.Option(
            "--coordinator",
            envvar=ENV_COORDINATOR,
            metavar="HOST:PORT",
            help="Multi-process run: process 0's address (see README, Multi-host).",
            rich_help_panel="Multi-process (jax.distributed)",
        ),
    ] = None,
    num_processes: Annotated[
        int | None,
        typer.Option(
            "--num-processes",
            envvar=ENV_NUM_PROCESSES,
            help="Multi-process run: how many processes.",
            rich_help_panel="Multi-process (jax.distributed)",
        ),
    ] = None,
    process_id: Annotated[
        int | None,
        typer.Option(
            "--process-id",
            envvar=ENV_PROCESS_ID,
            help="Multi-process run: this process's index, 0 to N-1.",
            rich_help_panel="Multi-process (jax.distributed)",
        ),
    ] = None,
    distributed_auto: Annotated[
        bool,
        typer.Option(
            "--distributed-auto",
            metavar="",
            help=(
                "Multi-process run: let JAX detect the cluster (TPU, SLURM, Open MPI)."
            ),
            rich_help_panel="Multi-process (jax.distributed)",
        ),
    ] = False,
) -> None:
    """privrl_jax: differentially private reinforcement learning in JAX."""
    ctx.meta[DEBUG_KEY] = debug
    auto = distributed_auto or os.environ.get(ENV_AUTO, "").lower() == "auto"
    if auto or any(v is not None for v in (coordinator, num_processes, process_id)):
        # Before any command touches JAX's backend: jax.distributed.initialize must come
        # first.
        from privrl_jax import privacy  # noqa: PLC0415  (jax: keeps --help fast)

        try:
            config = (
                privacy.DistributedConfig(auto=True)
                if auto
                else privacy.DistributedConfig(coordinator, num_processes, process_id)
            )
            privacy.initialize_distributed(config)
        except (ValueError, RuntimeError) as err:
            typer.secho(f"error: {one_line(err)}", err=True, fg=typer.colors.RED)
            raise typer.Exit(code=EXIT_ERROR) from None


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    rich_help_panel="Multi-process (jax.distributed)",
)
def launch(
    ctx: typer.Context,
    num_processes: Annotated[
        int, typer.Option("-n", "--num-processes", help="Processes to start.")
    ] = 2,
    devices_per_process: Annotated[
        int | None,
        typer.Option(
            "--devices-per-process", help="Force this many CPU devices in each process."
        ),
    ] = None,
) -> None:
    """Run a privrl command as N cooperating processes on this machine.

    Example: privrl launch -n 2 -- synth transitions --config test --out runs/mh. If one
    process fails, the others are stopped; rerun the same command to resume.
    """
    from privrl_jax import pipelines  # noqa: PLC0415 -- keeps `privrl --help` fast

    args = [a for a in ctx.args if a != "--"]
    if not args:
        raise typer.BadParameter(
            "give the privrl command to run after --, e.g. -- synth transitions ..."
        )
    out = _out_arg(args)
    if out is not None:
        refuse_busy_out(out)  # before N processes start only to be refused
    pipelines.launch_local(
        [sys.executable, "-m", "privrl_jax.cli.main", *args],
        num_processes,
        devices_per_process=devices_per_process,
        run_dir=out,
    )


def _out_arg(args: list[str]) -> Path | None:
    """The ``--out`` directory of a launched command's arguments (None without one)."""
    for i, a in enumerate(args):
        if a == "--out" and i + 1 < len(args):
            return Path(args[i + 1])
        if a.startswith("--out="):
            return Path(a.removeprefix("--out="))
    return None


app.add_typer(_privacy.app, name="privacy")
app.add_typer(_data.app, name="data")
app.add_typer(_agent.app, name="agent")
app.add_typer(_synth.app, name="synth")
app.add_typer(_ope.app, name="ope")
app.add_typer(_pool.app, name="pool")
app.add_typer(_experiment.app, name="experiment")
app.command(name="quickstart")(_synth.quickstart)
app.command(name="select")(_select.select_command)

if __name__ == "__main__":
    app()
