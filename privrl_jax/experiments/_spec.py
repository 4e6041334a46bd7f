"""An experiment file: what it runs and what it reports.

It runs a pipeline on a base config with overrides and sweep axes; it reports metrics,
tables, and the paper's number it answers.

A file ``privrl_jax/experiments/<name>.yaml`` holds::

    name: pool_gap_vs_rho
    method: pool                 # the results page it belongs on
    title: ...
    answers: {paper: POOL, where: "Sec. 5, Fig. 1", claim: ...}
    pipeline: pool               # privrl_jax.pipelines.<pipeline>: load() and run()
                                 # ("none": imported rows only, e.g. a comparison
                                 # whose extra is not installed; `run` refuses it)
    config: pool/default         # a shipped config name or a YAML path
    overrides: {pool.zones: paper}
    axes:                        # each axis: what its value sets
      method:                    # categorical: a label per value -> its overrides
        POOL: {pool.method: pool}
      rho: {privacy.rho: "{rho}"}   # template: "{axis}" is the cell's value
      seed: {seed: "{seed}", privacy.noise_seed: "{seed} + 1000"}
      model:                     # a categorical value may name its own pipeline
        PGM: {pipeline: marginal, config: marginal/pgm_umaze_delta}   # and config
    grid:                        # a union of products of axis values
      - {method: [POOL], rho: [0.1, 1.0], seed: {range: [0, 10]}}
    evaluate: {gap: report.evaluation.gap}   # metric -> path in the run's outputs
                                 # (or a list of paths: the first one present)
    tables: [...]                # see _tables.py
    legacy: {results: ..., script: ...}      # where the numbers stood before

A template value is formatted with the cell's values, then read as YAML; a formatted
value that is plain arithmetic ("3 + 1000") is evaluated.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
import operator
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# Experiment files ship in this package; the claims list is not an experiment.
NOT_EXPERIMENTS = ("claims",)
# The pipeline of an experiment whose rows are imported only (nothing here runs it).
IMPORTED = "none"
# Keys of a categorical axis value that choose the cell's pipeline and base config
# (not config overrides): one experiment may set several methods side by side.
RUN_KEYS = ("pipeline", "config")

Cell = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment file, parsed (module doc for the fields)."""

    name: str
    method: str
    title: str
    pipeline: str
    config: str
    answers: dict[str, Any]
    overrides: dict[str, Any]
    axes: dict[str, dict[str, Any]]
    grid: list[dict[str, list[Any]]]
    evaluate: dict[str, Any]
    tables: list[dict[str, Any]]
    legacy: dict[str, Any]
    notes: str
    source: str

    def cells(self) -> list[Cell]:
        """Every cell of the grid, in file order, duplicates dropped."""
        seen, out = set(), []
        for block in self.grid:
            unknown = set(block) - set(self.axes)
            if unknown:
                raise ValueError(
                    f"{self.name}: grid names axes {sorted(unknown)} that `axes` "
                    "does not define."
                )
            names = [a for a in self.axes if a in block]
            for values in itertools.product(*(block[a] for a in names)):
                cell = dict(zip(names, values, strict=True))
                key = cell_key(cell)
                if key not in seen:
                    seen.add(key)
                    out.append(cell)
        return out

    def _run_key(self, cell: Cell, key: str) -> str:
        for axis, spec in self.axes.items():
            if axis in cell and _categorical(spec) and key in spec.get(cell[axis], {}):
                return str(spec[cell[axis]][key])
        return str(getattr(self, key))

    def pipeline_for(self, cell: Cell) -> str:
        """The cell's pipeline: its categorical axis value's, else the file's."""
        return self._run_key(cell, "pipeline")

    def config_for(self, cell: Cell) -> str:
        """The cell's base config: its categorical axis value's, else the file's."""
        return self._run_key(cell, "config")

    def overrides_for(self, cell: Cell) -> list[str]:
        """The ``section.key=value`` overrides of ``cell``.

        The file's, then each axis's in the file's order.
        """
        values: dict[str, Any] = dict(self.overrides)
        for axis, spec in self.axes.items():
            if axis not in cell:
                continue
            value = cell[axis]
            if _categorical(spec):
                if value not in spec:
                    raise ValueError(
                        f"{self.name}: axis {axis!r} has no value {value!r}; it has "
                        f"{list(spec)}."
                    )
                values.update(
                    {k: v for k, v in spec[value].items() if k not in RUN_KEYS}
                )
            else:
                values.update({k: _template(v, cell) for k, v in spec.items()})
        return [f"{k}={_yaml_text(v)}" for k, v in values.items()]


def _categorical(spec: Mapping[str, Any]) -> bool:
    # A categorical axis maps each value to its overrides (mappings); a template axis
    # maps config keys to templates (scalars).
    return bool(spec) and all(isinstance(v, Mapping) for v in spec.values())


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_arith(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.left), _arith(node.right))
    raise ValueError("not arithmetic")


def _template(value: Any, cell: Cell) -> Any:
    if not isinstance(value, str):
        return value
    text = value.format(**{k: _yaml_text(v) for k, v in cell.items()})
    try:
        return _arith(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError):
        return yaml.safe_load(text)


def _yaml_text(value: Any) -> str:
    """``value`` as the YAML text the config loader reads back to it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_yaml_text(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


def cell_key(cell: Cell) -> str:
    """A cell's identity in a rows file: its axis values, sorted by axis."""
    return "|".join(f"{k}={_yaml_text(cell[k])}" for k in sorted(cell))


def _expand_values(values: Any) -> list[Any]:
    if isinstance(values, Mapping) and set(values) == {"range"}:
        return list(range(*values["range"]))
    if not isinstance(values, list):
        return [values]
    return values


def parse(data: Mapping[str, Any], source: str = "<dict>") -> Experiment:
    """An :class:`Experiment` from a loaded experiment file.

    Args:
      data: the file's mapping.
      source: where it came from (error messages).

    Returns:
      The experiment.

    Raises:
      ValueError: a missing or unknown key.
    """
    fields = {f.name for f in dataclasses.fields(Experiment)} - {"source"}
    unknown = set(data) - fields
    if unknown:
        raise ValueError(f"{source}: unknown keys {sorted(unknown)}.")
    missing = {"name", "method", "title", "pipeline", "config", "grid"} - set(data)
    if missing:
        raise ValueError(f"{source}: missing keys {sorted(missing)}.")
    grid = [
        {axis: _expand_values(v) for axis, v in block.items()} for block in data["grid"]
    ]
    return Experiment(
        name=data["name"],
        method=data["method"],
        title=data["title"],
        pipeline=data["pipeline"],
        config=data["config"],
        answers=dict(data.get("answers") or {}),
        overrides=dict(data.get("overrides") or {}),
        axes={k: dict(v or {}) for k, v in (data.get("axes") or {}).items()},
        grid=grid,
        evaluate=dict(data.get("evaluate") or {}),
        tables=list(data.get("tables") or []),
        legacy=dict(data.get("legacy") or {}),
        notes=str(data.get("notes") or "").strip(),
        source=source,
    )


def _shipped() -> Iterator[tuple[str, Any]]:
    root = resources.files("privrl_jax.experiments")
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            stem = entry.name[: -len(".yaml")]
            if stem not in NOT_EXPERIMENTS:
                yield stem, entry


def experiment_names() -> list[str]:
    """The names of the shipped experiment files.

    Returns:
      The file stems of ``privrl_jax/experiments/*.yaml`` (``claims`` excluded), sorted.
    """
    return [name for name, _ in _shipped()]


def load_experiment(name: str | Path) -> Experiment:
    """A shipped experiment by name, or an experiment file by path.

    Args:
      name: ``pool_gap_vs_rho`` or ``path/to/file.yaml``.

    Returns:
      The parsed experiment.

    Raises:
      ValueError: no such experiment, or a malformed file.
    """
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return parse(yaml.safe_load(path.read_text()), str(path))
    for stem, entry in _shipped():
        if stem == str(name):
            return parse(yaml.safe_load(entry.read_text()), f"{stem}.yaml")
    raise ValueError(
        f"no experiment {name!r}; shipped ones: {', '.join(experiment_names())}."
    )


def load_claims() -> list[dict[str, Any]]:
    """The papers' claims the scoreboard scores (``claims.yaml``)."""
    text = resources.files("privrl_jax.experiments").joinpath("claims.yaml")
    return list(yaml.safe_load(text.read_text())["claims"])
