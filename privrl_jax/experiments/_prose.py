"""Numbers quoted in the docs' prose, filled from the stored rows.

A page a person writes (``docs/reproducing.md``, the opening of ``docs/<method>.md``)
quotes results; typed by hand, they drift from the rows. A quoted number is written as
a Markdown link to the generated page of its experiment, whose title says where the
number comes from::

    MSE [3.12](results/gpope.md "gpope_mc/mse mse {method: GPOPE, epsilon: 1}")

that is ``"<experiment>/<table> <metric> {<the group>}"`` (experiment ``gpope_mc``,
table ``mse``, metric ``mse``): the group is a YAML flow mapping naming one row of the
table (its cell's values, or ``label``: a row's label). ``privrl experiment pages``
rewrites the link's text with that group's mean (``<metric>:std`` or ``<metric>:ci95``:
its sample std or 95% t half-width), printed with as many decimals as the text had, and
the link's target with the experiment's page;
``tests/experiments/test_pages.py`` fails when a committed doc differs from what the
stored rows fill in. The rendered page shows the number, linked to its table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from privrl_jax.experiments._runner import read_rows
from privrl_jax.experiments._spec import load_experiment
from privrl_jax.experiments._tables import build_table, grid_order

# [number](results/<page>.md "<experiment>/<table> <metric> {<group>}")
MARKER = re.compile(
    r"\[(?P<num>-?\d+(?:\.\d+)?)\]"
    r"\((?P<href>results/[\w-]+\.md) "
    r'"(?P<exp>\w+)/(?P<table>\w+) (?P<metric>[\w.]+)(?::(?P<stat>std|ci95))? '
    r'(?P<group>\{[^"]*\})"\)'
)


def _decimals(num: str) -> int:
    return len(num.split(".")[1]) if "." in num else 0


def _lookup(
    results_dir: Path,
) -> Callable[[str, str, str, Mapping[str, Any]], tuple[float, str]]:
    tables: dict[tuple[str, str], dict] = {}

    def value(
        name: str,
        table_id: str,
        metric: str,
        where: Mapping[str, Any],
        stat: str = "mean",
    ) -> tuple[float, str]:
        exp = load_experiment(name)
        if (name, table_id) not in tables:
            specs = [t for t in exp.tables if t["id"] == table_id]
            if not specs:
                raise ValueError(f"{name} has no table {table_id!r}")
            rows = grid_order(exp, read_rows(results_dir, name))
            tables[name, table_id] = build_table(specs[0], rows)
        cell = {k: v for k, v in where.items() if k != "label"}
        found = [
            g
            for g in tables[name, table_id]["groups"]
            if ("label" not in where or g["label"] == where["label"])
            and all(k in g["cell"] and g["cell"][k] == v for k, v in cell.items())
        ]
        if len(found) != 1:
            raise ValueError(
                f"{name}/{table_id}: {dict(where)} matches {len(found)} rows (name one)"
            )
        if metric not in found[0]["metrics"]:
            raise ValueError(f"{name}/{table_id}: no metric {metric!r}")
        return found[0]["metrics"][metric][stat], f"results/{exp.method}.md"

    return value


def fill_numbers(text: str, results_dir: Path, where: str = "the text") -> str:
    """``text`` with each quoted-number link refilled from the stored rows.

    Args:
      text: Markdown holding links in the module's form.
      results_dir: the results root holding ``<experiment>/rows.jsonl``.
      where: names the text in errors (a file).

    Returns:
      The text with each link's number (at the decimals it was written with) and
      target taken from the rows; the rest unchanged.

    Raises:
      ValueError: a link whose group matches no row or several, an unknown table or
        metric, or a group without a finite mean.
    """
    value = _lookup(Path(results_dir))

    def fill(m: re.Match) -> str:
        try:
            group = yaml.safe_load(m["group"])
            mean, href = value(
                m["exp"], m["table"], m["metric"], group, m["stat"] or "mean"
            )
        except (ValueError, KeyError, FileNotFoundError, yaml.YAMLError) as e:
            raise ValueError(f"{where}: quoted number {m[0]!r}: {e}") from None
        if not math.isfinite(mean):
            raise ValueError(f"{where}: quoted number {m[0]!r}: the mean is {mean}")
        num = f"{mean:.{_decimals(m['num'])}f}"
        title = m[0][m[0].index('"') :]
        return f"[{num}]({href} {title}"

    return MARKER.sub(fill, text)


def quoted_numbers(text: str) -> list[str]:
    """The quoted-number links of ``text``, as written."""
    return [m[0] for m in MARKER.finditer(text)]


def fill_docs(results_dir: Path, docs: Path) -> list[Path]:
    """Refill the quoted numbers of every ``docs/*.md`` that has any.

    Args:
      results_dir: the results root holding ``<experiment>/rows.jsonl``.
      docs: the docs directory (its ``*.md``, not its subdirectories).

    Returns:
      The files that changed.
    """
    changed = []
    for path in sorted(Path(docs).glob("*.md")):
        text = path.read_text()
        if not MARKER.search(text):
            continue
        new = fill_numbers(text, results_dir, where=str(path))
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed
