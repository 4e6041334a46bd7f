"""`privrl privacy ...`: accounting from the command line."""

import typer

app = typer.Typer(help="Privacy accounting: epsilon, calibration, ledger reports.", no_args_is_help=True)
