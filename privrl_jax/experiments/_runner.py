"""Run an experiment's cells through its pipeline's ``load`` / ``run``; keep the rows.

One run directory per resolved config.

A cell's run directory is ``<runs>/<experiment>/<hash>``, ``hash`` the first 12 hex
digits of the SHA-256 of the resolved config (``pipelines.to_dict``): a finished cell
(its ``row.json`` written) is reused, a changed config gets a new directory. The rows
(one JSON object a line) go to ``<results>/<experiment>/rows.jsonl``, a cell's row
replacing the one stored for the same cell. A row's ``run_dir`` is relative to the runs
root (``<experiment>/<hash>``): rows are committed, run directories are not, and the
same rows must read the same from any checkout.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import importlib
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from privrl_jax import provenance
from privrl_jax.experiments._spec import (
    IMPORTED,
    Cell,
    Experiment,
    cell_key,
    load_experiment,
)

ROWS_FILE = "rows.jsonl"
ROW_FILE = "row.json"


def pipeline_module(exp: Experiment, cell: Cell | None = None) -> Any:
    """``privrl_jax.pipelines.<pipeline>`` of ``cell`` (its ``load`` and ``run``)."""
    name = exp.pipeline if cell is None else exp.pipeline_for(cell)
    if name == IMPORTED:
        raise ValueError(
            f"{exp.name}: no pipeline runs this experiment; its rows are imported "
            "from a legacy script's results (its notes say what the script needed)."
        )
    return importlib.import_module(f"privrl_jax.pipelines.{name}")


def resolve(exp: Experiment, cell: Cell) -> tuple[Any, dict[str, Any], str]:
    """The cell's config through its pipeline's ``load``: (config, as a dict, hash).

    The hash is of the config's identity (``pipelines.to_dict(cfg, identity=True)``):
    a field added later at the value that runs what ran before it existed leaves the
    hash of an older config unchanged, so its stored row stays current.
    """
    from privrl_jax import pipelines  # noqa: PLC0415 -- keeps `privrl --help` fast

    cfg = pipeline_module(exp, cell).load(exp.config_for(cell), exp.overrides_for(cell))
    resolved = pipelines.to_dict(cfg)
    text = json.dumps(
        pipelines.to_dict(cfg, identity=True), sort_keys=True, default=str
    )
    return cfg, resolved, hashlib.sha256(text.encode()).hexdigest()[:12]


def lookup(outputs: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path`` in ``outputs`` (list indices as integers).

    Raises:
      KeyError: the path is not there.
    """
    node: Any = outputs
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            raise KeyError(f"no {part!r} on the way to {path!r}")
    return node


def run_outputs(run_dir: Path) -> dict[str, Any]:
    """What a finished run wrote that a metric may read.

    ``report`` (report.json) and ``audit`` (audit/audit.json, where the pipeline
    audits).
    """
    out: dict[str, Any] = {}
    for key, rel in (("report", "report.json"), ("audit", "audit/audit.json")):
        path = run_dir / rel
        if path.exists():
            out[key] = json.loads(path.read_text())
    return out


def evaluate(exp: Experiment, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The experiment's metrics (``evaluate``: name -> path) read from ``outputs``.

    A list of paths reads the first one present (None when none is: a metric only
    some cells have, such as the agent of the cell's own ``agent`` axis).
    """
    out = {}
    for name, path in exp.evaluate.items():
        if isinstance(path, str):
            out[name] = lookup(outputs, path)
            continue
        out[name] = None
        for p in path:
            try:
                out[name] = lookup(outputs, p)
                break
            except (KeyError, IndexError, TypeError):
                continue
    return out


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_cell(exp_ref: str, cell: Cell, runs_dir: str) -> dict[str, Any]:
    """Runs (or reuses) one cell and returns its row (module doc).

    Args:
      exp_ref: the experiment's name or file (reloaded here: lanes are processes).
      cell: the cell's axis values.
      runs_dir: the root of the run directories.

    Returns:
      The row: ``experiment``, ``cell``, ``key``, ``config_hash``, ``run_dir``
      (relative to ``runs_dir``), ``metrics``, ``wall_s``, ``reused``, ``source``
      and ``provenance``.
    """
    exp = load_experiment(exp_ref)
    cfg, resolved, digest = resolve(exp, cell)
    rel = f"{exp.name}/{digest}"
    run_dir = Path(runs_dir) / rel
    row_file = run_dir / ROW_FILE
    if row_file.exists():
        row = json.loads(row_file.read_text())
        # Metrics are re-read from the stored outputs: an added metric needs no rerun;
        # the cell is this grid's (an axis added at its old default keeps the config).
        row["metrics"] = evaluate(exp, run_outputs(run_dir))
        row["cell"], row["key"] = cell, cell_key(cell)
        row["run_dir"] = rel  # rows written before runs were stored relative
        row["reused"] = True
        return row
    # The pipeline makes the directory (it refuses a non-empty one it did not make).
    load0, t0 = _load_avg(), time.time()
    report = pipeline_module(exp, cell).run(cfg, run_dir)
    wall = time.time() - t0
    outputs = run_outputs(run_dir)
    outputs.setdefault("report", report)
    row = {
        "experiment": exp.name,
        "cell": cell,
        "key": cell_key(cell),
        "config_hash": digest,
        "run_dir": rel,
        "metrics": evaluate(exp, outputs),
        "wall_s": round(wall, 3),
        "source": "run",
        "provenance": provenance()
        | {"loadavg_before": load0, "loadavg_after": _load_avg()},
    }
    tmp = row_file.with_name(ROW_FILE + ".tmp")
    tmp.write_text(json.dumps(row, indent=1, default=str))
    os.replace(tmp, row_file)
    return row | {"reused": False}


def read_rows(results_dir: Path, name: str) -> list[dict[str, Any]]:
    """The stored rows of experiment ``name``.

    Args:
      results_dir: the results root.
      name: the experiment's name.

    Returns:
      The rows of ``<results_dir>/<name>/rows.jsonl``, in file order (empty when the
      file does not exist).
    """
    path = Path(results_dir) / name / ROWS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def row_status(exp_ref: str, results_dir: Path) -> dict[str, list[str]]:
    """What a rerun of the experiment would do with each of its cells.

    Args:
      exp_ref: a shipped experiment's name or a file.
      results_dir: the results root.

    Returns:
      Cell keys by status: ``current`` (a stored row of the config the cell resolves to
      today), ``stale`` (a stored row of another config: the config or its defaults
      changed since, so ``run`` runs the cell again), ``imported`` (a row without a
      config hash, converted from a legacy script's results), ``missing`` (no row).
    """
    exp = load_experiment(exp_ref)
    stored = {r["key"]: r for r in read_rows(results_dir, exp.name)}
    out: dict[str, list[str]] = {
        "current": [],
        "stale": [],
        "imported": [],
        "missing": [],
    }
    for cell in exp.cells():
        key = cell_key(cell)
        row = stored.get(key)
        if row is None:
            out["missing"].append(key)
        elif row.get("config_hash") is None or exp.pipeline_for(cell) == IMPORTED:
            out["imported"].append(key)
        else:
            current = row["config_hash"] == resolve(exp, cell)[2]
            out["current" if current else "stale"].append(key)
    return out


def write_rows(results_dir: Path, name: str, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Writes ``rows`` (one JSON object a line) atomically; returns the file."""
    path = Path(results_dir) / name / ROWS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(ROWS_FILE + ".tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(tmp, path)
    return path


def merge_rows(
    stored: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``stored`` with each of ``new`` replacing the stored row of its cell.

    A new row replaces its cell's stored row in place or is appended; a stored row of
    one of ``new``'s runs under another cell key is dropped; the ``reused`` flag (a
    property of one invocation) is dropped.
    """
    fresh = {r["key"]: {k: v for k, v in r.items() if k != "reused"} for r in new}
    # A stored row of the same run under another key (the grid gained an axis at its
    # old value) is that run's old name: dropped, not counted twice.
    hashes = {r.get("config_hash") for r in new} - {None}
    out = [
        fresh.pop(r["key"], dict(r))
        for r in stored
        if r["key"] in fresh or r.get("config_hash") not in hashes
    ]
    return out + [r for r in fresh.values()]


def select(cells: Sequence[Cell], only: Mapping[str, Sequence[Any]]) -> list[Cell]:
    """The cells whose value on each axis of ``only`` is one of its values."""
    return [
        c
        for c in cells
        if all(axis in c and c[axis] in values for axis, values in only.items())
    ]


def parse_only(items: Sequence[str]) -> dict[str, list[Any]]:
    """Parse ``AXIS=VALUE`` strings (``--only``) into axis -> values.

    Args:
      items: ``AXIS=VALUE`` strings; each value is read as YAML, and an axis repeated
        gets several values.

    Returns:
      Axis -> the list of its values, in the order given.

    Raises:
      ValueError: an item without ``=``.
    """
    out: dict[str, list[Any]] = {}
    for item in items:
        axis, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--only takes AXIS=VALUE; got {item!r}.")
        out.setdefault(axis.strip(), []).append(yaml.safe_load(value))
    return out


def _fmt_s(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def run_experiment(
    exp_ref: str,
    *,
    results_dir: Path,
    runs_dir: Path,
    jobs: int = 1,
    only: Mapping[str, Sequence[Any]] | None = None,
    echo: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> list[dict[str, Any]]:
    """Runs the experiment's (selected) cells and stores their rows.

    Args:
      exp_ref: a shipped experiment's name or a file.
      results_dir: where ``<name>/rows.jsonl`` is kept.
      runs_dir: the root of the run directories.
      jobs: parallel lanes (processes); 1 runs in this process.
      only: axis -> the values to run (``parse_only``).
      echo: where progress lines go.

    Returns:
      All stored rows of the experiment after this invocation.

    Raises:
      ValueError: ``only`` selects no cell.
    """
    exp = load_experiment(exp_ref)
    cells = select(exp.cells(), only or {})
    if not cells:
        raise ValueError(f"{exp.name}: --only selects none of its cells.")
    stored = read_rows(results_dir, exp.name)
    done: list[dict[str, Any]] = []
    t0 = time.time()

    def note(row: dict[str, Any]) -> None:
        done.append(row)
        k = len(done)
        eta = (time.time() - t0) / k * (len(cells) - k)
        how = "reused" if row.get("reused") else f"ran in {row['wall_s']:.1f} s"
        echo(f"[{k}/{len(cells)}] {row['key']}: {how}; ETA {_fmt_s(eta)}")
        # Rows are stored as cells finish: an interrupted run keeps what it ran.
        write_rows(results_dir, exp.name, merge_rows(stored, done))

    echo(f"{exp.name}: {len(cells)} cells, {jobs} lane(s)")
    if jobs <= 1:
        for cell in cells:
            note(run_cell(exp_ref, cell, str(runs_dir)))
    else:
        ctx = multiprocessing.get_context("spawn")  # JAX does not survive fork
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
            futures = [
                pool.submit(run_cell, exp_ref, cell, str(runs_dir)) for cell in cells
            ]
            for fut in concurrent.futures.as_completed(futures):
                note(fut.result())
    return merge_rows(stored, done)
