"""`privrl experiment ...`: run the shipped experiment files and tabulate their rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Experiments as data: list, run, check and tabulate the shipped experiments.",
    no_args_is_help=True,
)

ResultsOpt = Annotated[
    Path,
    typer.Option(
        "--results", help="Where results/<experiment>/rows.jsonl and tables are kept."
    ),
]
RUNS_DEFAULT = Path("runs/experiments")


@app.command(name="list")
def list_command() -> None:
    """The shipped experiments: name, pipeline, cells, the paper's number it answers."""
    from privrl_jax import experiments  # noqa: PLC0415 -- keeps `privrl --help` fast

    for name in experiments.experiment_names():
        exp = experiments.load_experiment(name)
        a = exp.answers
        cells = exp.cells()
        # An experiment may set several methods side by side (each its pipeline).
        pipes = ", ".join(dict.fromkeys(exp.pipeline_for(c) for c in cells))
        typer.echo(
            f"{name}: {pipes}, {len(cells)} cells; "
            f"{a.get('paper', '')} {a.get('where', '')}".rstrip()
        )


@app.command(name="run")
def run_command(
    name: Annotated[str, typer.Argument(help="A shipped experiment or a YAML file.")],
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Parallel lanes (processes).")
    ] = 1,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="AXIS=VALUE",
            help="Run only the cells with this value (repeat; one axis's values OR).",
        ),
    ] = None,
    results: ResultsOpt = Path("results"),
    runs: Annotated[
        Path, typer.Option("--runs", help="Root of the run directories.")
    ] = RUNS_DEFAULT,
) -> None:
    """Run the experiment's cells, store the rows and tabulate them.

    A finished cell is reused.
    """
    from privrl_jax import experiments  # noqa: PLC0415

    try:
        exp = experiments.load_experiment(name)
        rows = experiments.run_experiment(
            name,
            results_dir=results,
            runs_dir=runs,
            jobs=jobs,
            only=experiments.parse_only(only or []),
        )
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    experiments.tabulate(exp, rows, results / exp.name)
    typer.echo((results / exp.name / "tables.md").read_text())


@app.command(name="status")
def status_command(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="Shipped experiments or YAML files (default: all)."),
    ] = None,
    results: ResultsOpt = Path("results"),
) -> None:
    """Which stored rows a rerun would reuse: current, stale, imported, missing cells.

    A stale row was made under another config (a changed default or field): `run`
    runs its cell again. Nothing runs here; each cell's config is resolved.
    """
    from privrl_jax import experiments  # noqa: PLC0415

    for name in names or experiments.experiment_names():
        try:
            st = experiments.row_status(name, results)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
        counts = ", ".join(f"{len(v)} {k}" for k, v in st.items())
        typer.echo(f"{Path(name).stem}: {counts}")
        for key in st["stale"][:3]:
            typer.echo(f"  stale: {key}")


@app.command(name="table")
def table_command(
    name: Annotated[str, typer.Argument(help="A shipped experiment or a YAML file.")],
    results: ResultsOpt = Path("results"),
    plots: Annotated[bool, typer.Option(help="Write the PNGs.")] = True,
) -> None:
    """Re-tabulate the stored rows (JSON, Markdown, PNG) without running anything."""
    from privrl_jax import experiments  # noqa: PLC0415

    try:
        exp = experiments.load_experiment(name)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    rows = experiments.read_rows(results, exp.name)
    if not rows:
        raise typer.BadParameter(
            f"no stored rows in {results / exp.name}; run `privrl experiment run "
            f"{exp.name}` first."
        )
    experiments.tabulate(exp, rows, results / exp.name, plots=plots)
    typer.echo((results / exp.name / "tables.md").read_text())


@app.command(name="pages")
def pages_command(
    results: ResultsOpt = Path("results"),
    docs: Annotated[Path, typer.Option("--docs", help="Where the pages go.")] = Path(
        "docs/results"
    ),
) -> None:
    """Write docs/results/ from the stored rows.

    The index, one page per method, the scoreboard and its plots; and the numbers the
    pages beside it (docs/*.md) quote from the rows.
    """
    from privrl_jax import experiments  # noqa: PLC0415

    for path in experiments.write_pages(results, docs, prose_dir=docs.parent):
        typer.echo(f"wrote {path}")
    counts = experiments.scoreboard(results)[1]
    typer.echo("scoreboard: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
