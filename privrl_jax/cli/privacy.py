"""`privrl privacy ...`: accounting from the command line."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from privrl_jax import privacy

app = typer.Typer(
    help="Privacy accounting: epsilon, noise calibration, ledger reports.", no_args_is_help=True
)


class AccountantName(str, Enum):
    rdp = "rdp"
    pld = "pld"


def _fail(err: Exception) -> None:
    typer.secho(f"error: {err}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


def _emit(out: dict, as_json: bool, text: str) -> None:
    """Prints one JSON object with --json, else the human-readable line."""
    typer.echo(json.dumps(out) if as_json else text)


# Options shared by `epsilon` and `calibrate`.
SamplingRate = Annotated[float, typer.Option(help="Poisson sampling rate q = batch / N.")]
Steps = Annotated[int, typer.Option(help="Number of DP-SGD steps T.")]
Delta = Annotated[float, typer.Option(help="Target delta.")]
AccountantOpt = Annotated[AccountantName, typer.Option(help="rdp or pld.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


@app.command()
def epsilon(
    noise_multiplier: Annotated[float, typer.Option(help="sigma: noise std / clip norm.")],
    sampling_rate: SamplingRate,
    steps: Steps,
    delta: Delta,
    accountant: AccountantOpt = AccountantName.rdp,
    as_json: AsJson = False,
) -> None:
    """Epsilon spent by T Poisson-sampled DP-SGD steps."""
    try:
        rep = privacy.dpsgd_epsilon(noise_multiplier, sampling_rate, steps, delta, accountant=accountant.value)
    except ValueError as e:
        _fail(e)
    _emit(
        {**rep.to_dict(), "noise_multiplier": noise_multiplier, "sampling_rate": sampling_rate, "steps": steps},
        as_json,
        f"epsilon = {rep.epsilon:.4f} at delta = {delta:g} ({accountant.value.upper()}, "
        f"sigma={noise_multiplier}, q={sampling_rate}, T={steps}; dp-accounting {rep.dp_accounting_version})",
    )


@app.command()
def calibrate(
    target_epsilon: Annotated[float, typer.Option(help="Target epsilon.")],
    delta: Delta,
    sampling_rate: SamplingRate,
    steps: Steps,
    accountant: AccountantOpt = AccountantName.rdp,
    as_json: AsJson = False,
) -> None:
    """Smallest noise multiplier that keeps T steps within the target epsilon."""
    try:
        sigma = privacy.calibrate_noise_multiplier(
            target_epsilon, delta, sampling_rate, steps, accountant=accountant.value
        )
        rep = privacy.dpsgd_epsilon(sigma, sampling_rate, steps, delta, accountant=accountant.value)
    except ValueError as e:
        _fail(e)
    _emit(
        {**rep.to_dict(), "noise_multiplier": sigma, "target_epsilon": target_epsilon,
         "sampling_rate": sampling_rate, "steps": steps},
        as_json,
        f"noise_multiplier = {sigma:.4f} gives epsilon = {rep.epsilon:.4f} <= {target_epsilon} at "
        f"delta = {delta:g} ({accountant.value.upper()}, q={sampling_rate}, T={steps})",
    )


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A run directory holding ledger.json."),
    as_json: AsJson = False,
) -> None:
    """What a run spent: every release in its ledger, total epsilon under RDP and PLD."""
    try:
        rep = privacy.Ledger.load(run_dir).report()
    except privacy.LedgerError as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps(rep, indent=2))
        return
    budget = rep["budget"]
    typer.echo(f"run: {run_dir}  dataset: {rep['dataset_id']} (N={rep['dataset_size']})")
    typer.echo(f"budget: epsilon={budget['epsilon']:g}, delta={budget['delta']:g}")
    typer.echo(f"releases: {rep['num_releases']}")
    for r in rep["releases"]:
        typer.echo(f"  {r['count']:>8} x {r['what']}  [{r['event']['type']}]")
    for acc in ("rdp", "pld"):
        res = rep[acc]
        if "epsilon" in res:
            typer.echo(f"spent ({acc.upper()}): epsilon = {res['epsilon']:.4f} at delta = {res['delta']:g}")
        else:
            typer.echo(f"spent ({acc.upper()}): {res['error']}")
