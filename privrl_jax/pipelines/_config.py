"""Nested frozen-dataclass configs loaded from YAML with ``key=value`` overrides."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"config section {where!r} must be a mapping; got {value!r}.")
        return from_dict(tp, value, prefix=f"{where}.")
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            value = [value]
        return tuple(_coerce(v, args[0], where) for v in value)
    if tp is float:
        if isinstance(value, str) and value.lower() in ("inf", "infinity", ".inf"):
            return float("inf")
        if isinstance(value, str):
            # YAML 1.1 reads "1e-3" (no dot) as a string; a float field takes it as the number it spells.
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


def from_dict(cls: type[T], data: dict[str, Any], *, prefix: str = "") -> T:
    """Builds dataclass ``cls`` from a nested dict; unknown keys are errors that list valid ones."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(
            f"unknown config key(s) {sorted(prefix + k for k in unknown)}; valid keys here: "
            f"{sorted(prefix + n for n in names)}."
        )
    kwargs = {k: _coerce(v, hints[k], prefix + k) for k, v in data.items()}
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


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Applies ``section.key=value`` strings (values parsed as YAML) to a nested dict copy."""
    data = yaml.safe_load(yaml.safe_dump(data)) or {}
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value.")
        path, raw = item.split("=", 1)
        node = data
        *parents, leaf = path.strip().split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {p!r} is not a config section.")
        node[leaf] = yaml.safe_load(raw)
    return data


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] = ()) -> T:
    """Loads ``cls`` from a YAML file (or its defaults) plus ``--set`` style overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ValueError(f"config file {path} does not exist (see configs/ for examples).")
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"config file {path} must hold a mapping at the top level.")
    return from_dict(cls, apply_overrides(data, list(overrides)))
