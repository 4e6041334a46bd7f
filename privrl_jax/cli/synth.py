"""`privrl synth ...` and `privrl quickstart`: the PrivORL pipelines from the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privrl_jax.cli._common import (
    SetOption,
    config_option,
    fail,
    load_or_fail,
    refuse_busy_out,
)

if TYPE_CHECKING:
    from privrl_jax.pipelines import ConfigSource

app = typer.Typer(
    help="Differentially private synthetic offline-RL datasets (PrivORL).",
    no_args_is_help=True,
)

# Shipped inside the package (privrl_jax/configs/privorl_n/quickstart.yaml), so a wheel
# install runs the same quickstart as a source checkout.
QUICKSTART_CONFIG = "privorl_n/quickstart"


def _run(config: ConfigSource | None, overrides: list[str], out: Path) -> None:
    refuse_busy_out(out)
    from privrl_jax.pipelines import privorl_n  # here: keeps `privrl --help` fast

    cfg = load_or_fail(privorl_n.load, config, overrides)
    report = privorl_n.run(cfg, out)
    if (
        "process_id" in report
    ):  # another process of a multi-process run: process 0 reports
        return
    typer.echo(privorl_n.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, synthetic.hdf5, ledger.json")


def quickstart_config() -> ConfigSource:
    """The shipped quickstart config; a missing one is an error, never a fallback."""
    from privrl_jax import pipelines

    return load_or_fail(pipelines.shipped_config, QUICKSTART_CONFIG)


@app.command()
def transitions(
    out: Annotated[
        Path,
        typer.Option("--out", help="Run directory (rerun the same command to resume)."),
    ],
    config: Annotated[str | None, config_option("privorl_n")] = None,
    overrides: SetOption = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="privorl_n (default), or a marginal-based baseline: pgm, mst, aim or "
            "privsyn (configs in privrl_jax/configs/marginal/; without --config, "
            "<model>_umaze_delta; pgm, mst and aim need "
            'pip install ".[baselines]"), or a GAN baseline: pategan or '
            "pategan_pretrained (configs in "
            "privrl_jax/configs/pategan/; without --config, umaze or "
            "umaze_pretrained).",
        ),
    ] = "privorl_n",
) -> None:
    """PrivORL-n: pre-train on public data, DP fine-tune on sensitive, sample, evaluate.

    With --model pgm|mst|aim|privsyn: the marginal-based baselines of PrivORL's Table I;
    with --model pategan|pategan_pretrained: PATE-GAN and PrePATE-GAN; each written in
    the same release / audit layout, ledger and report.
    """
    from privrl_jax import pipelines

    if model == "privorl_n":
        _run(pipelines.qualify_config(config, "privorl_n"), overrides or [], out)
    elif model in ("pgm", "mst", "aim", "privsyn"):
        # Without --config, the shipped umaze setting that bins s' - s on its public
        # one-step bound: the built-in defaults bin s' over the whole space, which loses
        # the dynamics.
        _run_marginal(
            pipelines.qualify_config(config or f"{model}_umaze_delta", "marginal"),
            [f"model.name={model}", *(overrides or [])],
            out,
        )
    elif model in ("pategan", "pategan_pretrained"):
        default = "umaze" if model == "pategan" else "umaze_pretrained"
        _run_pategan(
            pipelines.qualify_config(config or default, "pategan"),
            [f"model.name={model}", *(overrides or [])],
            out,
        )
    else:
        fail(
            "--model must be privorl_n, pgm, mst, aim, privsyn, pategan or "
            "pategan_pretrained; got "
            f"{model!r}."
        )


def _run_pategan(config: ConfigSource | None, overrides: list[str], out: Path) -> None:
    refuse_busy_out(out)
    from privrl_jax.pipelines import pategan  # here: keeps `privrl --help` fast

    cfg = load_or_fail(pategan.load, config, overrides)
    report = pategan.run(cfg, out)
    typer.echo(pategan.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, synthetic.hdf5, ledger.json")


def _run_marginal(config: ConfigSource | None, overrides: list[str], out: Path) -> None:
    refuse_busy_out(out)
    from privrl_jax.pipelines import marginal  # here: keeps `privrl --help` fast

    cfg = load_or_fail(marginal.load, config, overrides)
    try:
        report = marginal.run(cfg, out)
    except ImportError as e:  # the optional extra is missing: one line, not a traceback
        fail(e)
    typer.echo(marginal.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, synthetic.hdf5, ledger.json")


def quickstart(
    out: Annotated[Path, typer.Option("--out", help="Run directory.")] = Path(
        "runs/quickstart"
    ),
    overrides: SetOption = None,
) -> None:
    """CPU-sized PrivORL-n on the embedded mazes, eps = 10.

    Public: medium + large; sensitive: umaze.
    """
    _run(quickstart_config(), overrides or [], out)


@app.command()
def trajectories(
    out: Annotated[
        Path,
        typer.Option("--out", help="Run directory (rerun the same command to resume)."),
    ],
    config: Annotated[str | None, config_option("privorl_j")] = None,
    overrides: SetOption = None,
) -> None:
    """PrivORL-j: trajectory-level DP synthesis.

    Fragments + a conditional diffusion transformer.
    """
    refuse_busy_out(out)
    from privrl_jax import pipelines
    from privrl_jax.pipelines import privorl_j  # here: keeps `privrl --help` fast

    cfg = load_or_fail(
        privorl_j.load, pipelines.qualify_config(config, "privorl_j"), overrides or []
    )
    report = privorl_j.run(cfg, out)
    if (
        "process_id" in report
    ):  # another process of a multi-process run: process 0 reports
        return
    typer.echo(privorl_j.render_markdown(report))
    typer.echo(f"wrote {out}/report.md, report.json, synthetic.hdf5, ledger.json")
