"""The one config loader of every command: YAML + ``section.key=value`` overrides.

A config is a (nested) frozen dataclass whose sections are shared between methods
where they mean the same thing (`_sections`, `_synth_config`); their field defaults
are the shared ones. A method's own defaults are YAML, not subclasses: a pipeline's
``defaults.yaml`` (``privrl_jax/configs/<group>/defaults.yaml``) lies under every config
of that pipeline. ``load_config`` reads that file, then the chosen YAML file or shipped
config (``privrl_jax/configs/<group>/<name>.yaml``, named ``<group>/<name>``) key by
key over it, applies typed values (command-line options), then ``--set`` overrides
whose values are parsed as YAML, and checks every key and type. Each section checks
its values' ranges first (its ``BOUNDS`` table, `check_bounds`: every value that sizes
work or enters the model), then what ties its fields together. Every error is a
one-line ``ValueError`` that names the key and says what is expected.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import math
import os
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

T = TypeVar("T")

ConfigSource = str | os.PathLike | Traversable


def _shipped_root() -> Traversable:
    return resources.files("privrl_jax").joinpath("configs")


def shipped_configs() -> list[str]:
    """Names (``group/name``) of the YAML configs that ship inside the package."""
    root = _shipped_root()
    if not root.is_dir():
        return []
    return sorted(
        f"{group.name}/{f.name.removesuffix('.yaml')}"
        for group in root.iterdir()
        if group.is_dir()
        for f in group.iterdir()
        if f.name.endswith(".yaml")
    )


def shipped_config(name: str) -> Traversable:
    """The shipped config ``name`` (``privorl_n/quickstart``, ``.yaml`` optional).

    Args:
      name: ``group/name`` of a config in :func:`shipped_configs`.

    Returns:
      The config file inside the package, a ``Traversable`` (read it with
      ``read_text``).

    Raises:
      ValueError: the package holds no such config (a bad name or a broken install).
    """
    name = name.removesuffix(".yaml")
    if name not in shipped_configs():
        raise ValueError(
            f"no shipped config {name!r}; the package ships {shipped_configs()} "
            "(if this list lacks one it should have, reinstall privrl_jax)."
        )
    return _shipped_root().joinpath(*f"{name}.yaml".split("/"))


def qualify_config(
    spec: str | os.PathLike | None, group: str
) -> str | os.PathLike | None:
    """``spec`` as ``load_config`` should get it from a command of ``group``.

    An existing file is kept; a bare shipped name (``quickstart``) becomes
    ``group/quickstart`` when that config ships; anything else is returned unchanged,
    so ``load_config`` reports it.

    Args:
      spec: a YAML path, a shipped config's name (bare or ``group/name``), or None.
      group: the command's config group (``pool``, ``gpope``, ...).

    Returns:
      The spec to pass to ``load_config`` (None stays None).
    """
    if spec is None or Path(spec).is_file():
        return spec
    name = os.fspath(spec).removesuffix(".yaml")
    if "/" not in name and f"{group}/{name}" in shipped_configs():
        return f"{group}/{name}"
    return spec


def _read_yaml(source: ConfigSource) -> dict[str, Any]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_file():
            source = path
        elif path.exists():
            raise ValueError(f"config {os.fspath(source)!r} is not a file.")
        elif os.fspath(source).removesuffix(".yaml") in shipped_configs():
            source = shipped_config(os.fspath(source))
        else:
            raise ValueError(
                f"config {os.fspath(source)!r} is neither a YAML file nor a shipped "
                "config; "
                f"shipped configs: {shipped_configs()}."
            )
    try:
        data = yaml.safe_load(source.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"config {source}: not valid YAML ({_one_line(e)}).") from None
    if not isinstance(data, dict):
        raise ValueError(f"config {source} must hold a mapping at the top level.")
    return data


def _one_line(err: Exception) -> str:
    # PyYAML's messages span lines and quote the input; the problem alone is enough.
    return " ".join(str(getattr(err, "problem", None) or err).split())


def _is_sequence_type(tp: Any) -> bool:
    return typing.get_origin(tp) in (tuple, collections.abc.Sequence)


def one_of_error(key: str, value: Any, choices: Sequence[Any]) -> ValueError:
    """The one-line error of a mode outside its choices.

    ``"{key} must be 'a', 'b' or 'c'; got 'x'."``.
    """
    quoted = [repr(c) for c in choices]
    listed = (
        f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else quoted[0]
    )
    return ValueError(f"{key} must be {listed}; got {value!r}.")


# Upper bounds of the values that size work: far above any setting we run (D4RL's
# largest maze2d set is 4M transitions, the paper's network is 1024 wide), far below
# what would exhaust memory or run for days, so a typo (1e12) is refused in one line
# before anything is collected, trained or spent, not after.
MAX_ROWS = 100_000_000  # data set and release rows (held in memory: ~4 GB of floats)
MAX_STEPS = 10_000_000  # optimiser, DP, agent or sampler steps of one run
MAX_BATCH = 1_000_000  # rows a step or a sampling call holds at once
MAX_WIDTH = 65_536  # units of one layer, features, bins
MAX_COUNT = 10_000  # layers, heads, seeds, draws, rounds of an inner loop


@dataclasses.dataclass(frozen=True)
class Bound:
    """The range a config value must lie in: ``[low, high]``, either end open.

    ``integer`` values must also be whole (an ``int`` field). A field whose value is a
    tuple has every element checked; None (an optional value left empty) is not
    checked.
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a number (not NaN, not a bool) in range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if math.isnan(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self, integer: bool) -> str:
        """``"an integer in [1, 10,000,000]"``, ``"a number in [0, 1)"``, ..."""
        kind = "an integer" if integer else "a number"
        fmt = lambda x: f"{int(x):,}" if float(x).is_integer() else f"{x:g}"  # noqa: E731
        if math.isinf(self.high):
            return f"{kind} {'>' if self.low_open else '>='} {fmt(self.low)}"
        if math.isinf(self.low):
            return f"{kind} {'<' if self.high_open else '<='} {fmt(self.high)}"
        return (
            f"{kind} in {'(' if self.low_open else '['}{fmt(self.low)}, "
            f"{fmt(self.high)}{')' if self.high_open else ']'}"
        )


def at_least(low: float, high: float = math.inf) -> Bound:
    """``[low, high]`` (sizes and counts: ``at_least(1, MAX_STEPS)``)."""
    return Bound(low, high)


def positive(high: float = math.inf) -> Bound:
    """``(0, high]``, finite (rates, norms, epochs)."""
    return Bound(0.0, high, low_open=True, high_open=math.isinf(high))


UNIT = Bound(0.0, 1.0)  # a probability or share: [0, 1]
DECAY = Bound(0.0, 1.0, high_open=True)  # an EMA decay: [0, 1) (1 would never move)


def check_bounds(config: Any, section: str) -> None:
    """Checks ``config``'s values against its class's ``BOUNDS`` tables.

    A section declares ``BOUNDS: ClassVar[dict[str, Bound]]`` (a subclass declares only
    the fields it adds; the tables of its bases apply too) and derives from
    :class:`Section`, which calls this first when it is built, so that its own checks
    of several fields (divisibility, sums) meet values already in range, and a config
    built in Python is checked as one loaded from YAML.

    Raises:
      ValueError: ``"{section}.{key} must be an integer in [1, 10,000,000]; got
        -20."``: the first value out of range.
    """
    hints = typing.get_type_hints(type(config))
    for klass in reversed(type(config).__mro__):
        for name, bound in vars(klass).get("BOUNDS", {}).items():
            value = getattr(config, name)
            if value is None:
                continue
            values = value if isinstance(value, tuple) else (value,)
            if not all(bound.contains(v) for v in values):
                integer = int in (hints[name], *typing.get_args(hints[name])) or any(
                    int in typing.get_args(a) for a in typing.get_args(hints[name])
                )
                raise ValueError(
                    f"{section}.{name} must be {bound.describe(integer)}"
                    f"{' each' if isinstance(value, tuple) else ''}; got {value!r}."
                )


class Section:
    """A config section whose ``BOUNDS`` are checked when it is built.

    A frozen dataclass derives from it and names its key in the config (``SECTION =
    "model"``; ``""`` at the top level): building one, from YAML or in Python, runs
    :func:`check_bounds` with that key. A section with checks of its own (several
    fields at once) calls ``super().__post_init__()`` first, so they meet values
    already in range.
    """

    SECTION: ClassVar[str] = ""
    # Fields added after results were stored, each with the value at which it runs
    # exactly what ran before it existed (a default-off option). At that value a field
    # is left out of the config's identity (``to_dict(..., identity=True)``, what the
    # experiment runner hashes), so the stored rows of older configs stay current; any
    # other value is part of it. A test reruns a stored cell bit for bit to show it.
    HASH_NEUTRAL: ClassVar[dict[str, Any]] = {}

    def __post_init__(self) -> None:
        check_bounds(self, self.SECTION)

    def hash_neutral(self) -> Mapping[str, Any]:
        """This config's hash-neutral fields and their neutral values.

        ``HASH_NEUTRAL``; a section whose fields are read only in some of its modes
        overrides it to add them, at their defaults, in the modes that never read them
        (their value cannot change what runs there).
        """
        return self.HASH_NEUTRAL


def _check_literal(value: Any, tp: Any, where: str) -> None:
    if value not in typing.get_args(tp):
        raise one_of_error(where, value, typing.get_args(tp))


def check_modes(config: Any, prefix: str = "") -> None:
    """Checks every ``Literal``-typed field of the (nested) dataclass ``config``.

    The loader checks modes as it reads them; a config's ``__post_init__`` calls this so
    that one built in Python gets the same one-line error (a mode outside its choices
    would otherwise fall through to some ``else`` branch and run something else).
    """
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value, tp = getattr(config, f.name), hints[f.name]
        if dataclasses.is_dataclass(value):
            check_modes(value, f"{prefix}{f.name}.")
        elif typing.get_origin(tp) is typing.Literal:
            _check_literal(value, tp, prefix + f.name)


def _whole_number(value: Any) -> int | None:
    """``value`` as an int when it is one, else None.

    Also when spelled ``1e6`` (YAML 1.1 reads that as a string) or ``1.0e6`` (a float).
    A size written in exponent form is then checked against its range like any other,
    not refused for its spelling.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and "e" in value.lower():
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        _check_literal(value, tp, where)
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(
                f"config section {where!r} must be a mapping; got {value!r}."
            )
        return from_dict(tp, value, prefix=f"{where}.")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if _is_sequence_type(tp):
        # YAML lists become tuples: configs are frozen and hashable (jit static args).
        if not isinstance(value, (list, tuple)):
            value = [value]
        return tuple(_coerce(v, args[0], where) if args else v for v in value)
    if tp is float:
        if isinstance(value, str) and value.lower() in ("inf", "infinity", ".inf"):
            return float("inf")
        if isinstance(value, str):
            # YAML 1.1 reads "1e-3" (no dot) as a string; a float field takes it as
            # the number it spells.
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key {where!r} must be a number; got {value!r}.")
        return float(value)
    if tp is int:
        whole = _whole_number(value)
        if whole is None:
            raise ValueError(f"config key {where!r} must be an integer; got {value!r}.")
        return whole
    if tp is bool and not isinstance(value, bool):
        raise ValueError(f"config key {where!r} must be true or false; got {value!r}.")
    if tp is str and not isinstance(value, str):
        raise ValueError(f"config key {where!r} must be a string; got {value!r}.")
    return value


def coerce_fields(
    cls: type, data: Mapping[str, Any], *, prefix: str = ""
) -> dict[str, Any]:
    """``data`` checked against dataclass ``cls``'s fields and converted to their types.

    Raises:
      ValueError: an unknown key (the message lists the valid ones) or a value of the
        wrong type.
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = set(data) - names
    if unknown:
        raise ValueError(
            f"unknown config key(s) {sorted(prefix + k for k in unknown)}; "
            f"valid keys here: {sorted(prefix + n for n in names)}."
        )
    return {k: _coerce(v, hints[k], prefix + k) for k, v in data.items()}


def from_dict(cls: type[T], data: Mapping[str, Any], *, prefix: str = "") -> T:
    """Builds dataclass ``cls`` from a nested dict; unknown, missing keys are errors."""
    kwargs = coerce_fields(cls, data, prefix=prefix)
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(
            f"missing config key(s) {[prefix + k for k in missing]}: give them in "
            "the YAML config, as options, or with --set KEY=VALUE."
        )
    return cls(**kwargs)


def to_dict(config: Any, *, identity: bool = False) -> dict[str, Any]:
    """A config as a plain nested dict (tuples as lists), ready for YAML/JSON.

    Args:
      config: a config dataclass instance (nested dataclasses become dicts).
      identity: leave out each field a section declares hash-neutral
        (``Section.HASH_NEUTRAL``) while it holds its neutral value: the config's
        identity, which the experiment runner hashes.

    Returns:
      The dict.
    """

    def plain(v):
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    out = plain(dataclasses.asdict(config))
    if identity:
        _drop_neutral(config, out)
    return out


def _drop_neutral(config: Any, out: dict[str, Any]) -> None:
    hook = getattr(config, "hash_neutral", None)
    neutral = hook() if callable(hook) else getattr(type(config), "HASH_NEUTRAL", {})
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in neutral and type(value) is type(neutral[f.name]):
            if value == neutral[f.name]:
                del out[f.name]
        elif dataclasses.is_dataclass(value):
            _drop_neutral(value, out[f.name])


def _set_path(data: dict[str, Any], path: str, value: Any, item: str) -> None:
    *parents, leaf = path.strip().split(".")
    if not all([*parents, leaf]):
        raise ValueError(f"override {item!r} must look like section.key=value.")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise ValueError(f"override {item!r}: {p!r} is not a config section.")
    node[leaf] = value


def apply_overrides(
    data: Mapping[str, Any], overrides: Iterable[str]
) -> dict[str, Any]:
    """Applies ``section.key=value`` strings (YAML values) to a copy of ``data``."""
    data = copy.deepcopy(dict(data))
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value.")
        path, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ValueError(
                f"override {item!r}: the value is not valid YAML ({_one_line(e)})."
            ) from None
        _set_path(data, path, value, item)
    return data


def merge_configs(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` laid over ``base`` key by key.

    Sections (mappings in both) merge; any other value of ``top`` (a list too) replaces
    ``base``'s.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_configs(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_config(
    cls: type[T],
    path: ConfigSource | None = None,
    overrides: Iterable[str] = (),
    *,
    values: Mapping[str, Any] | None = None,
    defaults: ConfigSource | None = None,
) -> T:
    """Load the config dataclass ``cls`` from its layers.

    ``defaults``, the YAML ``path`` over it, then typed ``values``, then ``--set``
    overrides.

    Args:
      cls: the (nested) config dataclass.
      path: a YAML file, or the name of a shipped config (``privorl_n/quickstart``, see
        `shipped_configs`); None: ``defaults`` alone.
      overrides: ``section.key=value`` strings; values are parsed as YAML.
      values: already-typed values keyed by dotted path (command-line options); the
        overrides apply after them.
      defaults: the method's own defaults (its shipped ``<group>/defaults``), merged
        under ``path`` by `merge_configs`; keys neither states take the dataclass
        defaults.

    Returns:
      The ``cls`` instance, checked by its ``__post_init__``.

    Raises:
      ValueError: a missing config, bad YAML, an unknown key or a bad value (one line).
    """
    data = _read_yaml(defaults) if defaults is not None else {}
    if path is not None:
        data = merge_configs(data, _read_yaml(path))
    for key, value in (values or {}).items():
        _set_path(data, key, value, f"{key}={value!r}")
    return from_dict(cls, apply_overrides(data, overrides))
