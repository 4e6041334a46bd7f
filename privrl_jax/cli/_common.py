"""What every `privrl` command shares: --config, --set, --json and one style of error.

Every expected failure (a bad config, a missing or malformed file, an unusable output
directory, a privacy budget that would be exceeded) ends a command with one line
``error: ...`` on stderr and exit status 2; `--debug` (or ``PRIVRL_DEBUG=1``) adds the
traceback. Anything else is a bug and keeps Python's traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperGroup

T = TypeVar("T")

EXIT_ERROR = 2
# Where the main app's callback records --debug (ctx.meta is shared by every context
# of one invocation, so the top-level group sees what the callback stored).
DEBUG_KEY = "privrl_jax.debug"


def set_help(*examples: str) -> str:
    """The --set help text, with examples that the command's own config accepts."""
    return (
        "Override one config value: section.key=value, the value parsed as YAML "
        f"(e.g. {', '.join(examples)}). Repeatable; applied last."
    )


def set_option(*examples: str) -> Any:
    """The --set option of a command, its help showing ``examples``.

    The examples are keys the command's config has.
    """
    return Annotated[
        list[str] | None,
        typer.Option("--set", metavar="SECTION.KEY=VALUE", help=set_help(*examples)),
    ]


SetOption = set_option("privacy.epsilon=1", "finetune.learning_rate=1e-3")

# metavar "": typer would show "<bool>", which reads as if the flag took a value.
JsonFlag = Annotated[
    bool, typer.Option("--json", metavar="", help="Print one JSON object.")
]
OverwriteFlag = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        metavar="",
        help="Replace the outputs of an earlier run at --out (refused without it).",
    ),
]


def with_default(text: str, default: Any) -> str:
    """Help text ending in typer's `[default: ...]`, escaped for rich markup.

    For an option whose value can also come from a config (so the option itself
    defaults to None).
    """
    # Escaped: typer renders help as rich markup, where [...] is a (dropped) tag.
    return f"{text} \\[default: {default}]"


def config_option(group: str | None) -> Any:
    """The --config option of a command whose shipped configs live in `group`."""
    shipped = (
        f"a config shipped in the package: {group}/NAME or just NAME "
        f"(privrl_jax/configs/{group}/NAME.yaml)"
        if group
        else "a config shipped in the package (GROUP/NAME)"
    )
    return typer.Option(
        "--config",
        metavar="FILE|NAME",
        help=f"A YAML file, or {shipped}. Omitted: the built-in defaults.",
    )


def fail(err: Exception | str) -> NoReturn:
    """Prints `error: ...` on one line to stderr and exits with status 2."""
    typer.secho(f"error: {one_line(err)}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=EXIT_ERROR)


def load_or_fail(load: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`load(*args, **kwargs)`; a bad config becomes `fail`'s one-line error."""
    try:
        return load(*args, **kwargs)
    except ValueError as e:
        fail(e)


def options_to_values(**options: Any) -> Mapping[str, Any]:
    """The options the user gave (not None), as `load_config`'s typed values."""
    return {k: v for k, v in options.items() if v is not None}


# The run directory's lock file (privrl_jax.pipelines._rundir.LOCK_FILE; tests check
# they agree).
RUN_LOCK_FILE = ".lock"


def refuse_busy_out(out: Path) -> None:
    """Fail at once when a live run holds ``out``'s lock.

    Called before the imports and set-up of a run.

    Only a probe: the run takes the lock itself (a run that starts in between is still
    refused there). It creates nothing, so a refused command leaves no ``.lock`` behind.
    The other processes of a multi-process run do not probe: process 0 owns the
    directory, and its lock, taken meanwhile, would refuse them.
    """
    import fcntl  # noqa: PLC0415
    import os  # noqa: PLC0415

    jax = sys.modules.get("jax")  # loaded when the run joined jax.distributed
    if jax is not None and jax.distributed.is_initialized() and jax.process_index():
        return

    lock = Path(out) / RUN_LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return  # no lock file: no live run there
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        fail(
            f"another run is using {out} right now (it holds {lock}); wait for it to "
            "finish or "
            "choose another --out directory."
        )
    finally:
        os.close(fd)


def one_line(err: Exception | str) -> str:
    """`err`'s message on one line (PyYAML and HDF5 messages span several)."""
    return " ".join(str(err).split())


def _loaded_error_types(module: str, *names: str) -> tuple[type[BaseException], ...]:
    # A module that was never imported cannot have raised; looking it up in
    # sys.modules keeps `privrl --help` and the accounting commands from importing
    # jax-heavy modules just to name their errors.
    mod = sys.modules.get(module)
    found = (getattr(mod, n, None) for n in names)
    return tuple(t for t in found if isinstance(t, type))


def expected_error_message(err: BaseException) -> str | None:
    """The one-line message for an expected failure; None for anything else (a bug).

    Expected: ValueError (config, data, ledger and run-directory errors), OSError
    on paths (missing, unreadable, not writable, not HDF5), YAML errors, and the
    library's own RuntimeErrors (a budget that would be exceeded, a diverged run).
    """
    own = (
        _loaded_error_types("privrl_jax.privacy._ledger", "BudgetExceededError")
        + _loaded_error_types("privrl_jax.pipelines._dp_loop", "DivergenceError")
        + _loaded_error_types("privrl_jax.pipelines._launch", "ProcessFailedError")
    )
    yaml_errors = _loaded_error_types("yaml", "YAMLError")
    if isinstance(err, (ValueError, *own, *yaml_errors)):
        return one_line(err)
    if isinstance(err, OSError):
        return _os_error_message(err)
    return None


def _os_error_message(err: OSError) -> str:
    where = f": {err.filename}" if err.filename else ""
    if isinstance(err, FileNotFoundError):
        fix = "check the path"
    elif isinstance(err, PermissionError):
        fix = "check its permissions or choose another path"
    elif isinstance(err, (IsADirectoryError, NotADirectoryError)):
        fix = "give a file where a file is expected, a directory for a directory"
    else:
        fix = "check the path and the disk"
    # h5py's OSErrors carry no strerror and a multi-line message; the first clause is
    # the problem ("Unable to open file (file signature not found)").
    problem = err.strerror or one_line(err).split(", filename =")[0]
    return f"{problem}{where}; {fix}"


class PrivrlGroup(TyperGroup):
    """The main app's group: turns expected failures of any command into one line."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as err:  # noqa: BLE001 -- filtered by expected_error_message
            message = expected_error_message(err)
            if message is None:
                raise
            if ctx.meta.get(DEBUG_KEY):
                traceback.print_exc()
            typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
            raise typer.Exit(code=EXIT_ERROR) from None
