"""What every `privrl` command shares: --config, --set and one style of error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, NoReturn, TypeVar

import typer

T = TypeVar("T")

SET_HELP = (
    "Override one config value: section.key=value, the value parsed as YAML "
    "(e.g. privacy.epsilon=1, agent.hidden_dims=[64,64]). Repeatable; applied last."
)

SetOption = Annotated[
    list[str] | None, typer.Option("--set", metavar="SECTION.KEY=VALUE", help=SET_HELP)
]


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
    typer.secho(f"error: {err}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code=2)


def load_or_fail(load: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`load(*args, **kwargs)`; a bad config becomes `fail`'s one-line error."""
    try:
        return load(*args, **kwargs)
    except ValueError as e:
        fail(e)


def options_to_values(**options: Any) -> Mapping[str, Any]:
    """The options the user gave (not None), as `load_config`'s typed values."""
    return {k: v for k, v in options.items() if v is not None}
