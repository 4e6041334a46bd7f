"""The one config loader of every command: YAML + ``section.key=value`` overrides.

A config is a (nested) frozen dataclass whose sections are shared between methods
where they mean the same thing (`_sections`, `_synth_config`); their field defaults
are the shared ones. A method's own defaults are YAML, not subclasses: a pipeline's
``defaults.yaml`` (``privrl_jax/configs/<group>/defaults.yaml``) lies under every config
of that pipeline. ``load_config`` reads that file, then the chosen YAML file or shipped
config (``privrl_jax/configs/<group>/<name>.yaml``, named ``<group>/<name>``) key by
key over it, applies typed values (command-line options), then ``--set`` overrides
whose values are parsed as YAML, and checks every key and type. Every error is a
one-line ``ValueError`` that names the key and says what is expected.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import os
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

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
    """The one-line error of a mode outside its choices: ``"{key} must be 'a', 'b' or
    'c'; got 'x'."``."""
    quoted = [repr(c) for c in choices]
    listed = (
        f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else quoted[0]
    )
    return ValueError(f"{key} must be {listed}; got {value!r}.")


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
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"config key {where!r} must be an integer; got {value!r}.")
        return value
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


def to_dict(config: Any) -> dict[str, Any]:
    """A plain nested dict (tuples as lists), ready for YAML/JSON."""

    def plain(v):
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return plain(dataclasses.asdict(config))


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
    """``top`` laid over ``base`` key by key: sections (mappings in both) merge, any
    other value of ``top`` (a list too) replaces ``base``'s."""
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
    """Loads dataclass ``cls``: ``defaults``, the YAML ``path`` over it, then typed
    ``values``, then ``--set`` overrides.

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

    Raises:
      ValueError: a missing config, bad YAML, an unknown key or a bad value (one line).
    """
    data = _read_yaml(defaults) if defaults is not None else {}
    if path is not None:
        data = merge_configs(data, _read_yaml(path))
    for key, value in (values or {}).items():
        _set_path(data, key, value, f"{key}={value!r}")
    return from_dict(cls, apply_overrides(data, overrides))
