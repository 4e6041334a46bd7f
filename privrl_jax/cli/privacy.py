"""`privrl privacy ...`: accounting from the command line."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privrl_jax.cli._common import JsonFlag

if TYPE_CHECKING:
    from privrl_jax import privacy

app = typer.Typer(
    help="Privacy accounting: epsilon, noise calibration, ledger reports.",
    no_args_is_help=True,
)


class AccountantName(str, Enum):
    """The accountants a command can use."""

    rdp = "rdp"
    pld = "pld"


class SamplingName(str, Enum):
    """The sampling schemes a command can account for."""

    poisson = "poisson"
    uniform_one = "uniform_one"
    full_batch = "full_batch"


def _fail(err: Exception) -> None:
    typer.secho(f"error: {err}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


def _emit(out: dict, as_json: bool, text: str) -> None:
    """Prints one JSON object with --json, else the human-readable line."""
    typer.echo(json.dumps(out) if as_json else text)


# Options shared by `epsilon` and `calibrate`.
Steps = Annotated[int, typer.Option(help="Number of DP-SGD steps T.")]
Delta = Annotated[float, typer.Option(help="Target delta.")]
AccountantOpt = Annotated[AccountantName, typer.Option(help="rdp or pld.")]
AsJson = JsonFlag  # a flag: --json takes no value
SamplingOpt = Annotated[
    SamplingName,
    typer.Option(
        help="poisson (add/remove-one), uniform_one (one of N per step, replace-one) "
        "or full_batch (every unit every step)."
    ),
]
DatasetSize = Annotated[
    int | None,
    typer.Option(
        help="N, the number of privacy units (needed for uniform_one and full_batch)."
    ),
]


def _plan(
    sampling: SamplingName,
    sampling_rate: float,
    dataset_size: int | None,
    steps: int,
    noise_multiplier: float | None = None,
) -> privacy.DPPlan:
    """The DP plan the options describe.

    Clip norm 1: sigma and epsilon do not depend on it.
    """
    from privrl_jax import privacy  # noqa: PLC0415  (jax: keeps --help fast)

    if sampling is not SamplingName.poisson and dataset_size is None:
        raise ValueError(f"--sampling {sampling.value} needs --dataset-size N.")
    if sampling is SamplingName.poisson and sampling_rate is None:
        raise ValueError("--sampling poisson needs --sampling-rate q (batch / N).")
    if sampling is SamplingName.poisson:
        # N only scales the sampler's normaliser here; epsilon depends on q alone.
        sampler = privacy.PoissonSampler(
            dataset_size=dataset_size or 1,
            sampling_rate=sampling_rate,
            microbatch_size=1,
        )
    elif sampling is SamplingName.uniform_one:
        sampler = privacy.UniformOneSampler(dataset_size=dataset_size)
    else:
        sampler = privacy.FullBatchSampler(dataset_size=dataset_size, microbatch_size=1)
    return privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=1.0,
        steps=steps,
        noise_multiplier=noise_multiplier,
    )


def _described(plan: privacy.DPPlan, dataset_size: int | None) -> dict:
    out = plan.describe()
    if dataset_size is None:  # Poisson without N: epsilon depends on q alone
        out.pop("dataset_size"), out.pop("expected_batch_size")
    return out


def _sensitivity_note(plan: privacy.DPPlan) -> str:
    factor = plan.neighboring.sensitivity_factor
    return (
        f"{plan.neighboring.name}: noise std = {factor:g} x sigma x C"
        if factor != 1
        else f"{plan.neighboring.name}: noise std = sigma x C"
    )


@app.command()
def epsilon(
    noise_multiplier: Annotated[
        float,
        typer.Option(
            help="sigma: noise std / L2 sensitivity (C add/remove, 2C replace-one)."
        ),
    ],
    steps: Steps,
    delta: Delta,
    sampling_rate: Annotated[
        float | None,
        typer.Option(help="Poisson sampling rate q = batch / N (poisson only)."),
    ] = None,
    sampling: SamplingOpt = SamplingName.poisson,
    dataset_size: DatasetSize = None,
    accountant: AccountantOpt = AccountantName.rdp,
    as_json: AsJson = False,
) -> None:
    """Epsilon spent by T DP steps of a sampling scheme.

    Sigma has dp-accounting's meaning (noise std / L2 sensitivity).
    """
    try:
        plan = _plan(sampling, sampling_rate, dataset_size, steps, noise_multiplier)
        rep = plan.epsilon(delta, accountant.value)
    except ValueError as e:
        _fail(e)
    _emit(
        {
            **rep.to_dict(),
            **_described(plan, dataset_size),
            "noise_multiplier": noise_multiplier,
        },
        as_json,
        f"epsilon = {rep.epsilon:.4f} at delta = {delta:g} "
        f"({accountant.value.upper()}, "
        f"sigma={noise_multiplier}, {sampling.value} q={plan.sampling_rate:g}, "
        f"T={steps}; "
        f"{_sensitivity_note(plan)}; dp-accounting {rep.dp_accounting_version})",
    )


@app.command()
def calibrate(
    target_epsilon: Annotated[float, typer.Option(help="Target epsilon.")],
    delta: Delta,
    steps: Steps,
    sampling_rate: Annotated[
        float | None,
        typer.Option(help="Poisson sampling rate q = batch / N (poisson only)."),
    ] = None,
    sampling: SamplingOpt = SamplingName.poisson,
    dataset_size: DatasetSize = None,
    accountant: AccountantOpt = AccountantName.rdp,
    as_json: AsJson = False,
) -> None:
    """Smallest sigma that keeps T steps within the target epsilon.

    Sigma is noise std / L2 sensitivity.
    """
    try:
        plan = _plan(sampling, sampling_rate, dataset_size, steps).calibrate(
            target_epsilon, delta, accountant.value
        )
        rep = plan.epsilon(delta, accountant.value)
    except ValueError as e:
        _fail(e)
    sigma = plan.noise_multiplier
    _emit(
        {
            **rep.to_dict(),
            **_described(plan, dataset_size),
            "noise_multiplier": sigma,
            "target_epsilon": target_epsilon,
        },
        as_json,
        f"noise_multiplier = {sigma:.6f} gives epsilon = {rep.epsilon:.6f} <= "
        f"{target_epsilon} at "
        f"delta = {delta:g} ({accountant.value.upper()}, {sampling.value} "
        f"q={plan.sampling_rate:g}, "
        f"T={steps}; {_sensitivity_note(plan)})",
    )


def _numbers(value) -> str:
    values = value if isinstance(value, list) else [value]
    return ",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in values)


def _params_text(params: dict) -> str:
    """The mechanism's parameters beside a group of releases.

    Sigma, q, C (or the sensitivity) and the relation, so two groups that differ show
    how.
    """
    fields = (
        ("sigma", params.get("noise_multipliers", params.get("noise_multiplier"))),
        ("q", params.get("sampling_rate")),
        ("C", params.get("l2_clip_norms")),
        ("sensitivity", params.get("l2_sensitivity")),
        ("N", params.get("dataset_size")),
    )
    out = [f"{k}={_numbers(v)}" for k, v in fields if v is not None]
    if params.get("neighboring"):
        out.append(str(params["neighboring"]).lower().replace("_", "-"))
    return " ".join(out)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A run directory holding ledger.json."),
    as_json: AsJson = False,
) -> None:
    """What a run spent: every release in its verified ledger, total epsilon.

    The total is given under both RDP and PLD.

    The ledger's hash chain, every event against its recorded parameters, and the ledger
    heads held by the run's checkpoints and released files are verified first; an
    edited, truncated or missing ledger is an error (exit 2).
    """
    from privrl_jax import privacy  # noqa: PLC0415  (keeps --help fast)
    from privrl_jax.pipelines import verify_run  # noqa: PLC0415

    try:
        rep = verify_run(run_dir).report()
    except privacy.LedgerError as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps(rep, indent=2))
        return
    budget = rep["budget"]
    if rep.get("not_private"):
        typer.secho(f"NOT PRIVATE: {rep['not_private']}", fg=typer.colors.RED)
    if rep["over_budget"]:
        typer.secho(
            f"OVER BUDGET: this run spent more than epsilon = {budget['epsilon']:g}.",
            fg=typer.colors.RED,
        )
    typer.echo(
        f"run: {run_dir}  dataset: {rep['dataset_id']} (N={rep['dataset_size']})"
    )
    typer.echo(f"ledger: verified (chain head {rep['chain_head'][:16]}...)")
    typer.echo(f"budget: epsilon={budget['epsilon']:g}, delta={budget['delta']:g}")
    typer.echo(f"releases: {rep['num_releases']}")
    for r in rep["releases"]:
        params = _params_text(r.get("params") or {})
        typer.echo(
            f"  {r['count']:>8} x {r['what']}  [{r['event']['type']}]"
            + (f"  {params}" if params else "")
        )
    for acc in ("rdp", "pld"):
        res = rep[acc]
        if "epsilon" in res:
            typer.echo(
                f"spent ({acc.upper()}): epsilon = {res['epsilon']:.4f} at delta = "
                f"{res['delta']:g}"
            )
        else:
            typer.echo(f"spent ({acc.upper()}): {res['error']}")


@app.command(name="audit")
def audit_command(
    run_dir: Path = typer.Argument(..., help="A run directory holding ledger.json."),
    canaries: Annotated[
        int, typer.Option(help="Gradient canaries m of the one-run audit.")
    ] = 10_000,
    seed: Annotated[int, typer.Option(help="Draws the canaries' inclusion bits.")] = 0,
    accountant: Annotated[
        AccountantName,
        typer.Option(help="The accountant the run was accounted with (rdp or pld)."),
    ] = AccountantName.rdp,
    as_json: AsJson = False,
) -> None:
    """Epsilon demonstrated beside epsilon accounted: a one-run canary audit.

    It covers every mechanism the run's verified ledger records (Steinke, Nasr &
    Jagielski 2023) and is written to RUN_DIR/audit/epsilon_lower_bound.json.

    The audit reruns each recorded mechanism (the plan's sampler, clip norm, sigma and
    steps; POOL's Gaussian mechanism) with canaries on stand-in data, never on the run's
    data, so it is not a release. A demonstrated epsilon above the accounted one is a
    privacy bug (exit 2).
    """
    from privrl_jax import privacy  # noqa: PLC0415
    from privrl_jax.pipelines import (  # noqa: PLC0415
        AUDIT_FILE,
        audit_lines,
        audit_run,
        raise_on_violation,
        verify_run,
    )
    from privrl_jax.privacy.audit import PrivacyAuditError  # noqa: PLC0415

    if canaries < 100:
        _fail(
            ValueError(
                "--canaries must be >= 100 (1% of them are guessed each way); got "
                f"{canaries}."
            )
        )
    try:
        ledger = verify_run(run_dir)
    except privacy.LedgerError as e:
        _fail(e)
    out = audit_run(
        Path(run_dir),
        ledger,
        canaries=canaries,
        seed=seed,
        accountant=AccountantName(accountant).value,
    )
    if as_json:
        typer.echo(json.dumps(out, indent=2))
    else:
        for line in audit_lines(out):
            typer.echo(line)
        typer.echo(f"wrote {Path(run_dir) / AUDIT_FILE}")
    try:
        raise_on_violation(out)
    except PrivacyAuditError as e:
        _fail(e)
