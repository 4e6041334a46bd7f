"""`privrl synth ...` and `privrl quickstart`: the PrivORL pipelines from the command line."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(help="Differentially private synthetic offline-RL datasets (PrivORL).", no_args_is_help=True)

QUICKSTART_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "privorl_n" / "quickstart.yaml"


def _run(config: Path | None, overrides: list[str], out: Path) -> None:
    from privrl_jax.pipelines import privorl_n  # noqa: PLC0415  (keeps `privrl --help` fast)

    try:
        cfg = privorl_n.load(config, overrides)
    except ValueError as e:
        typer.secho(f"error: {e}", err=True, fg=typer.colors.RED)
        raise typer.Exit(code=2) from None
    report = privorl_n.run(cfg, out)
    typer.echo(privorl_n.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, synthetic.hdf5, ledger.json")


@app.command()
def transitions(
    config: Path = typer.Option(None, "--config", help="YAML config (see configs/privorl_n/)."),
    overrides: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
    out: Path = typer.Option(..., "--out", help="Run directory (rerun the same command to resume)."),
) -> None:
    """PrivORL-n: pre-train on public data, DP fine-tune on sensitive data, sample, evaluate."""
    _run(config, overrides, out)


def quickstart(
    out: Path = typer.Option(Path("runs/quickstart"), "--out", help="Run directory."),
    overrides: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
) -> None:
    """CPU-sized PrivORL-n on the embedded mazes (public: medium + large, sensitive: umaze), eps = 10."""
    config = QUICKSTART_CONFIG if QUICKSTART_CONFIG.exists() else None
    _run(config, overrides, out)
