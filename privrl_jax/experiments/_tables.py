"""An experiment's tables from its rows: JSON, Markdown and PNG.

A table (an entry of the file's ``tables``)::

    id: gap
    title: Relative optimality gap
    layout: wide            # wide: one metric, `rows` x `columns`; long: metric
                            # columns; steps: differences between successive values
                            # of `axis` within each `pair` (seed)
    rows: [method]          # the axes a row groups by (the others are replicates)
    where: {delta: [bounded]}   # optional: only rows with these cell values
    columns: rho            # wide only: the axis across
    metric: gap             # wide only
    metrics: {free_cell_share: "share in free cells (higher)"}   # long only
    prefix: release         # long only: the rows' metric keys are "<prefix>.<metric>"
    anchors:                # long only: extra rows read from other prefixes, once per
      - {label: real holdout, prefix: real_holdout, one_per: seed}   # `one_per` value
                            # (an anchor's own `where` picks the rows it reads)
    label: "{method}"       # the row label (cell values; floats take format specs)
    relabel: {"a": "b"}     # optional: labels replaced after formatting
    sort: true              # optional: rows sorted by their axis values, not file order
    order: {method: [Q, P]} # optional: rows in these values' order (per axis)
    column_label: "rho={rho:g}"
    format: "{mean:.3f} ± {std:.3f} [±{ci95:.3f}]"
    tests:                  # each other value of `axis` against `baseline`
      - {kind: welch, metric: gap, axis: method, baseline: POOL, within: [rho],
         pair: seed, correction: holm, family: "..."}
    plot: {x: rho, series: method, metric: gap, xscale: log, ylabel: ...}
    footer: "..."           # optional: a paragraph after the table

A wide table may add ``anchor_columns`` (``[{label, metric, where, across}]``): a
column per anchor whose value in a row is the ``metric`` of the rows that
share the row's axes except those in ``across`` and match ``where``, one per seed (a
score every run of a seed shares: pre-training only, real data). ``row_header`` with
" | " spans several row columns (the label then holds as many); ``align: right``.

``layout: steps`` may list its pairs (``steps: [[a, b], ...]``), a point being a value
of ``axis`` or a name of ``anchors`` (``{name: prefix}``): :func:`_listed_steps_table`.

``layout: pairs`` (``rows``, ``reference: {where, match}``, ``pair``, ``metrics``): each
group's within-pair differences against the reference rows (:func:`_pairs_table`).

``layout: average`` (``rows``, ``columns``, ``metric``, ``over``) is, per row and
column, the mean over the ``over`` cells of each cell's mean (and how many cells),
beside ``reference`` rows (a paper's numbers), and ``wins`` lines: in how many cells
``ours``' mean is above every one of ``against``'s.

Every summary is :func:`stats.summary` (mean, std ddof = 1, 95% t half-width).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privrl_jax.experiments import stats
from privrl_jax.experiments._spec import IMPORTED, Experiment, cell_key

DEFAULT_FORMAT = "{mean:.3f} ± {std:.3f} [±{ci95:.3f}]"


def _group(rows: Sequence[Mapping[str, Any]], axes: Sequence[str]) -> dict:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        if all(a in r["cell"] for a in axes):
            groups.setdefault(tuple(r["cell"][a] for a in axes), []).append(r)
    return groups


def _metric(row: Mapping[str, Any], key: str) -> float | None:
    value = row["metrics"].get(key)
    return None if value is None else float(value)


def _values(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    return [v for r in rows if (v := _metric(r, key)) is not None]


def _label(template: str, cell: Mapping[str, Any]) -> str:
    return template.format(**cell)


def build_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict:
    """One table's numbers: its groups' summaries and its tests.

    Args:
      spec: the table's entry in the experiment file (module doc).
      rows: the experiment's rows.

    Returns:
      A dict with keys ``id``, ``title``, ``layout``, ``groups`` (each with ``label``,
      ``cell`` and ``metrics``, a summary per metric), ``columns``, ``tests``,
      ``family`` and ``correction``.
    """
    layout = spec.get("layout", "long")
    if layout == "pairs":
        return _pairs_table(spec, rows)
    rows = _where(spec, rows)
    if layout == "steps":
        return _steps_table(spec, rows)
    if layout == "average":
        return _average_table(spec, rows)
    axes = list(spec.get("rows", []))
    if layout == "wide":
        axes = [*axes, spec["columns"]]
        keys = {spec["metric"]: spec["metric"]}
    else:
        prefix = spec.get("prefix")
        keys = {m: f"{prefix}.{m}" if prefix else m for m in spec["metrics"]}
    groups = []
    for values, members in _group(rows, axes).items():
        cell = dict(zip(axes, values, strict=True))
        summ = {m: stats.summary(_values(members, k)) for m, k in keys.items()}
        if all(s["n"] == 0 for s in summ.values()):
            continue
        groups.append(
            {
                "label": _label(spec.get("label", "{}"), cell),
                "cell": cell,
                "metrics": summ,
            }
        )
    if spec.get("sort"):
        # By the row axes' values (a grid may list them in another order).
        groups.sort(key=lambda g: tuple(g["cell"][a] for a in axes))
    if spec.get("order"):
        # Listed values first, in the listed order, per axis; the rest after them.
        order = spec["order"]

        def rank(g: Mapping[str, Any]) -> tuple:
            return tuple(
                order[a].index(g["cell"][a]) if g["cell"][a] in order[a] else 1 << 30
                for a in order
            )

        groups.sort(key=rank)
    for g in groups:
        g["label"] = spec.get("relabel", {}).get(g["label"], g["label"])
    groups = (
        _anchors(spec, spec.get("anchors_first", []), rows)
        + groups
        + _anchors(spec, spec.get("anchors", []), rows)
    )
    out = {
        "id": spec["id"],
        "title": spec.get("title", spec["id"]),
        "layout": layout,
        "groups": groups,
        "tests": [t for test in spec.get("tests", []) for t in _tests(test, rows)],
    }
    if layout == "wide":
        out["columns"] = spec["columns"]
        out["groups"] += _anchor_columns(spec, rows, groups)
    return out


def _anchor_columns(
    spec: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    groups: Sequence[Mapping[str, Any]],
) -> list[dict]:
    """A wide table's ``anchor_columns``: one group per (row, anchor).

    Each group's column is the anchor's label (module doc).
    """
    out = []
    row_axes = list(spec.get("rows", []))
    metric = spec["metric"]
    for anchor in spec.get("anchor_columns", []):
        keep = [a for a in row_axes if a not in anchor.get("across", [])]
        members = _where({"where": anchor.get("where", {})}, rows)
        seen = set()
        for g in groups:
            label = g["label"]
            if label in seen:
                continue
            seen.add(label)
            first: dict[Any, float] = {}
            for r in members:
                if all(r["cell"].get(a) == g["cell"][a] for a in keep):
                    v = _metric(r, anchor["metric"])
                    if v is not None:
                        first.setdefault(
                            r["cell"].get(anchor.get("one_per", "seed")), v
                        )
            if first:
                cell = {a: g["cell"][a] for a in row_axes}
                out.append(
                    {
                        "label": label,
                        "cell": cell | {spec["columns"]: anchor["label"]},
                        "metrics": {metric: stats.summary(list(first.values()))},
                    }
                )
    return out


def _average_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict:
    """An average table: per (row, column), the mean over the ``over`` cells.

    Each entry is the mean of each cell's mean, with the number of cells; ``wins``:
    per row, the cells where ``ours`` is above every one of ``against`` (module doc).
    """
    row_axes, col, over = list(spec["rows"]), spec["columns"], list(spec["over"])
    metric = spec["metric"]
    cells = _group(rows, [*row_axes, *over, col])
    means = {k: stats.summary(_values(v, metric))["mean"] for k, v in cells.items()}
    nr, no = len(row_axes), len(over)
    groups = []
    for rk in dict.fromkeys(k[:nr] for k in means):
        for c in dict.fromkeys(k[-1] for k in means):
            v = [m for k, m in means.items() if k[:nr] == rk and k[-1] == c]
            groups.append(
                {
                    "label": _label(spec.get("label", "{}"), dict(zip(row_axes, rk))),
                    "cell": dict(zip(row_axes, rk, strict=True)) | {col: c},
                    # Over the cells: n cells, their means' mean, std, interval.
                    "metrics": {metric: stats.summary(v)},
                }
            )
    wins = []
    for w in spec.get("wins", []):
        counts = []
        for rk in dict.fromkeys(k[:nr] for k in means):
            won = total = 0
            for ok in dict.fromkeys(k[nr : nr + no] for k in means if k[:nr] == rk):
                ours = means.get((*rk, *ok, w["ours"]))
                base = [
                    means[(*rk, *ok, m)] for m in w["against"] if (*rk, *ok, m) in means
                ]
                if ours is None or not base:
                    continue
                total += 1
                won += ours > max(base)
            counts.append({"row": dict(zip(row_axes, rk)), "won": won, "cells": total})
        wins.append({"label": w["label"], "ours": w["ours"], "counts": counts})
    return {
        "id": spec["id"],
        "title": spec.get("title", spec["id"]),
        "layout": "average",
        "groups": groups,
        "wins": wins,
        "columns": col,
        "tests": [],
    }


def _where(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list:
    """The rows a table reads, as its ``where`` selects.

    Those whose cell has one of the values its ``where`` lists on each named axis (all
    rows without a ``where``).
    """
    where = spec.get("where") or {}
    return [
        r
        for r in rows
        if all(r["cell"].get(axis) in values for axis, values in where.items())
    ]


def _pairs_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict:
    """Within-pair differences of each group against a reference.

    Per group (``rows`` axes of the rows ``where`` selects) and metric, ``group -
    reference`` over the ``pair`` values (seeds) both have, the reference being the rows
    its ``where`` selects that share the group's ``match`` axes; the summary, how many
    rose and the paired t-test's p (NaN at zero spread).
    """
    ref_spec = spec["reference"]
    pair, prefix = spec.get("pair", "seed"), spec.get("prefix")
    axes, match = list(spec["rows"]), list(ref_spec.get("match", []))
    refs = _where(ref_spec, rows)
    groups = []
    for values, members in _group(_where(spec, rows), axes).items():
        cell = dict(zip(axes, values, strict=True))
        ref = [r for r in refs if all(r["cell"].get(a) == cell[a] for a in match)]
        summ = {}
        for m in spec["metrics"]:
            key = f"{prefix}.{m}" if prefix else m
            a: dict[Any, float] = {}
            for r in ref:
                if (v := _metric(r, key)) is not None:
                    a.setdefault(r["cell"].get(pair), v)
            b = {r["cell"].get(pair): _metric(r, key) for r in members}
            common = [k for k in b if k in a and b[k] is not None]
            d = [b[k] - a[k] for k in common]
            res = (
                stats.paired([b[k] for k in common], [a[k] for k in common])
                if len(common) > 1
                else {"p": math.nan}
            )
            summ[m] = stats.differences(d) | {"p": res["p"]}
        groups.append(
            {
                "label": _label(spec.get("label", "{}"), cell),
                "cell": cell,
                "metrics": summ,
            }
        )
    if spec.get("order"):
        order = spec["order"]
        groups.sort(
            key=lambda g: tuple(
                order[a].index(g["cell"][a]) if g["cell"][a] in order[a] else 1 << 30
                for a in order
            )
        )
    return {
        "id": spec["id"],
        "title": spec.get("title", spec["id"]),
        "layout": "pairs",
        "groups": groups,
        "tests": [],
    }


def _steps_table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict:
    """Within-pair differences ``b - a`` between successive values of ``axis``.

    In file order: each metric's summary and how many pairs rose. A seed's own data and
    pre-training shift all its rows alike; the differences remove that shift.
    """
    axis, pair = spec["axis"], spec.get("pair", "seed")
    prefix = spec.get("prefix")
    if "steps" in spec:
        return _listed_steps_table(spec, rows)
    values = list(dict.fromkeys(r["cell"][axis] for r in rows if axis in r["cell"]))
    by = {(r["cell"].get(pair), r["cell"][axis]): r for r in rows if axis in r["cell"]}
    groups = []
    for a, b in zip(values, values[1:], strict=False):
        pairs = sorted(
            {p for p, v in by if v == a} & {p for p, v in by if v == b},
            key=lambda p: list(dict.fromkeys(q for q, _ in by)).index(p),
        )
        if not pairs:
            continue
        summ = {}
        for m in spec["metrics"]:
            key = f"{prefix}.{m}" if prefix else m
            d = [_metric(by[(p, b)], key) - _metric(by[(p, a)], key) for p in pairs]
            summ[m] = stats.differences(d)
        label = spec.get("step_label", "{a}->{b}").format(a=a, b=b)
        groups.append({"label": label, "cell": {"from": a, "to": b}, "metrics": summ})
    return {
        "id": spec["id"],
        "title": spec.get("title", spec["id"]),
        "layout": "steps",
        "groups": groups,
        "tests": [],
    }


def _listed_steps_table(
    spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> dict:
    """``layout: steps`` with ``steps: [[a, b], ...]``: the listed pairs, in order.

    A point is a value of ``axis`` (its rows' ``<prefix>.<metric>``, labelled by
    ``value_label``) or a name of ``anchors`` (name -> prefix: per pair value, its
    first row with that metric, as the anchors of a long table).
    """
    axis, pair = spec["axis"], spec.get("pair", "seed")
    prefix, anchors = spec.get("prefix"), dict(spec.get("anchors", {}))
    seeds = list(dict.fromkeys(r["cell"].get(pair) for r in rows))

    def point(name: Any, metric: str) -> dict[Any, float]:
        out: dict[Any, float] = {}
        for r in rows:
            if isinstance(name, str) and name in anchors:
                v = _metric(r, f"{anchors[name]}.{metric}")
            elif r["cell"].get(axis) == name:
                v = _metric(r, f"{prefix}.{metric}" if prefix else metric)
            else:
                continue
            if v is not None:
                out.setdefault(r["cell"].get(pair), v)
        return out

    def label(name: Any) -> str:
        if isinstance(name, str) and name in anchors:
            return str(name)
        return spec.get("value_label", "{value}").format(value=name)

    groups = []
    for a, b in spec["steps"]:
        summ = {}
        for m in spec["metrics"]:
            va, vb = point(a, m), point(b, m)
            common = [p for p in seeds if p in va and p in vb]
            d = [vb[p] - va[p] for p in common]
            summ[m] = stats.summary(d) | {"rose": sum(x > 0 for x in d)}
        if all(s["n"] == 0 for s in summ.values()):
            continue
        text = spec.get("step_label", "{a} -> {b}").format(a=label(a), b=label(b))
        groups.append({"label": text, "cell": {"from": a, "to": b}, "metrics": summ})
    return {
        "id": spec["id"],
        "title": spec.get("title", spec["id"]),
        "layout": "steps",
        "groups": groups,
        "tests": [],
    }


def _anchors(
    spec: Mapping[str, Any],
    anchors: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
) -> list[dict]:
    """Rows read from another metric prefix, one value per ``one_per`` (its first row).

    Without ``prefix``, the metrics of the rows the anchor's ``where`` picks (e.g. cells
    lacking the table's row axis).

    Scores every run of a seed shares (a pre-trained model, a holdout).
    """
    out = []
    for anchor in anchors:
        one_per = anchor.get("one_per", "seed")
        first: dict[Any, Mapping[str, Any]] = {}
        for r in _where(anchor, rows):
            first.setdefault(r["cell"].get(one_per), r)
        members = list(first.values())
        # Without a prefix an anchor reads the metrics themselves (other cells' rows).
        pre = f"{anchor['prefix']}." if anchor.get("prefix") else ""
        summ = {
            m: stats.summary(_values(members, f"{pre}{m}")) for m in spec["metrics"]
        }
        if any(s["n"] for s in summ.values()):
            # An anchor may name the cell it stands for (a claim rule finds it so).
            cell = dict(anchor.get("cell", {}))
            out.append({"label": anchor["label"], "cell": cell, "metrics": summ})
    return out


def _tests(test: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """One ``tests`` entry: each other value of ``axis`` against ``baseline``.

    Within each combination of ``within``; p adjusted over all of them (the family).
    """
    axis, base, metric = test["axis"], test["baseline"], test["metric"]
    within = list(test.get("within", []))
    pair = test.get("pair", "seed")
    kind = test.get("kind", "welch")
    out = []
    for w, members in _group(rows, within).items():
        by_value = _group(members, [axis])
        if (base,) not in by_value:
            continue
        ref = by_value[(base,)]
        for (value,), other in by_value.items():
            if value == base or ("values" in test and value not in test["values"]):
                continue
            if kind == "paired":
                a = {r["cell"][pair]: _metric(r, metric) for r in other}
                b = {r["cell"][pair]: _metric(r, metric) for r in ref}
                common = sorted(k for k in a if k in b)
                res = stats.paired([a[k] for k in common], [b[k] for k in common])
            else:
                res = stats.welch(_values(other, metric), _values(ref, metric))
            out.append(
                {
                    "within": dict(zip(within, w, strict=True)),
                    "value": value,
                    "baseline": base,
                    "metric": metric,
                    "kind": kind,
                    **res,
                }
            )
    method = test.get("correction", "holm")
    for t, p in zip(out, stats.correct([t["p"] for t in out], method), strict=True):
        t["p_adjusted"] = p
        t["correction"] = method
        t["family"] = test.get("family", f"the {len(out)} tests of this table")
    return out


def _cell_text(s: Mapping[str, float], fmt: str) -> str:
    if s["n"] == 0:
        return "—"
    return fmt.format(**s)


def table_markdown(spec: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    """The Markdown lines of one built table (and of its tests, when it has some)."""
    fmt = spec.get("format", DEFAULT_FORMAT)
    lines = [f"### {table['title']}", ""]
    if spec.get("caption"):
        lines += [spec["caption"].strip(), ""]
    if table["layout"] == "wide":
        col = spec["columns"]
        row_axes = list(spec.get("rows", []))
        # A constant row (no noise, say) holds one value, shown in every column.
        constant = set(spec.get("constant_rows", []))
        cols = list(
            dict.fromkeys(
                g["cell"][col] for g in table["groups"] if g["label"] not in constant
            )
        )
        rows = list(dict.fromkeys(g["label"] for g in table["groups"]))
        at = {(g["label"], g["cell"][col]): g for g in table["groups"]}
        for g in table["groups"]:
            if g["label"] in constant:
                at.update({(g["label"], c): g for c in cols})
        col_label = spec.get("column_label", f"{col}={{{col}}}")
        anchors = [a["label"] for a in spec.get("anchor_columns", [])]
        header = spec.get("row_header", " / ".join(row_axes))
        lines.append(
            f"| {header} | "
            + " | ".join(
                c if c in anchors else _label(col_label, {col: c}) for c in cols
            )
            + " |"
        )
        value_sep = "---:|" if spec.get("align") == "right" else "---|"
        lines.append("|" + "---|" * (header.count(" | ") + 1) + value_sep * len(cols))
        for label in rows:
            cells = [
                _cell_text(at[(label, c)]["metrics"][spec["metric"]], fmt)
                if (label, c) in at
                else "—"
                for c in cols
            ]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    elif table["layout"] == "pairs":
        metrics = spec["metrics"]
        fmt = spec.get("format", "{mean:+.3f} [±{ci95:.3f}] ({rose}/{n}; p {p:.2g})")
        ncols = sum(h.count(" | ") + 1 for h in metrics.values())
        header = spec.get("row_header", "pair")
        lines.append(f"| {header} | seeds | " + " | ".join(metrics.values()) + " |")
        # A row header with " | " spans several columns (the label holds as many).
        lines.append("|" + "---|" * (header.count(" | ") + 2 + ncols))
        for g in table["groups"]:
            n = max(s["n"] for s in g["metrics"].values())
            lines.append(
                f"| {g['label']} | {n} | "
                + " | ".join(fmt.format(**g["metrics"][m]) for m in metrics)
                + " |"
            )
    elif table["layout"] == "average":
        lines += _average_markdown(spec, table)
    elif table["layout"] == "steps":
        metrics = spec["metrics"]
        header = spec.get("row_header", "step")
        lines.append(f"| {header} | seeds | " + " | ".join(metrics.values()) + " |")
        lines.append("|" + "---|" * (header.count(" | ") + 2 + len(metrics)))
        for g in table["groups"]:
            n = max(s["n"] for s in g["metrics"].values())
            lines.append(
                f"| {g['label']} | {n} | "
                + " | ".join(
                    f"{s['mean']:+.3f} [±{s['ci95']:.3f}] rose {s['rose']}/{s['n']}"
                    for s in (g["metrics"][m] for m in metrics)
                )
                + " |"
            )
    else:
        metrics = spec["metrics"]
        header = spec.get("row_header", "row")
        lines.append(f"| {header} | seeds | " + " | ".join(metrics.values()) + " |")
        # A row header with " | " spans several columns (the label holds as many).
        lines.append("|" + "---|" * (header.count(" | ") + 2 + len(metrics)))
        for g in table["groups"]:
            n = max(s["n"] for s in g["metrics"].values())
            lines.append(
                f"| {g['label']} | {n} | "
                + " | ".join(_cell_text(g["metrics"][m], fmt) for m in metrics)
                + " |"
            )
    if spec.get("footer"):
        lines += ["", spec["footer"].strip()]
    if table["tests"]:
        t0 = table["tests"][0]
        alpha = spec.get("alpha", 0.05)
        passed = sum(t["p_adjusted"] < alpha for t in table["tests"])
        lines += [
            "",
            f"{t0['kind'].capitalize()} t-tests of `{t0['metric']}` against "
            f"{t0['baseline']}; p adjusted by {t0['correction']} over the family: "
            f"{t0['family']} ({len(table['tests'])} tests); {passed} of "
            f"{len(table['tests'])} have adjusted p < {alpha:g}.",
            "",
            "| at | vs | diff | t | df | p | p adjusted |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in table["tests"]:
            at_txt = (
                ", ".join(
                    f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in t["within"].items()
                )
                or "—"
            )
            lines.append(
                f"| {at_txt} | {t['value']} | {t['diff']:+.3f} | {t['t']:.2f} | "
                f"{t['df']:.1f} | {t['p']:.2g} | {t['p_adjusted']:.2g} |"
            )
    return lines


def _average_markdown(spec: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    col = table["columns"]
    cols = list(dict.fromkeys(g["cell"][col] for g in table["groups"]))
    labels = list(dict.fromkeys(g["label"] for g in table["groups"]))
    at = {
        (g["label"], g["cell"][col]): g["metrics"][spec["metric"]]
        for g in table["groups"]
    }
    fmt = spec.get("format", "{mean:.1f} ({n})")
    ref = spec.get("reference", {})
    lines = [
        f"| {spec.get('row_header', 'row')} | source | " + " | ".join(cols) + " |",
        "|---|---|" + "---:|" * len(cols),
    ]
    for label in labels:
        ours = [
            fmt.format(**at[(label, c)]) if at.get((label, c), {}).get("n") else "-"
            for c in cols
        ]
        lines.append(
            f"| {label} | {spec.get('ours_label', 'ours')} | " + " | ".join(ours) + " |"
        )
        for r in ref.get("rows", []):
            vals = r["values"].get(label, {})
            cells = [f"{vals[c]:.1f}" if c in vals else "-" for c in cols]
            lines.append(f"| {label} | {r['label']} | " + " | ".join(cells) + " |")
    for w in table.get("wins", []):
        lines += [
            "",
            f"{w['ours']}'s mean above {w['label']}: "
            + "; ".join(
                f"{spec.get('row_header', 'row')} "
                f"{_label(spec.get('label', '{}'), c['row'])}: {c['won']} of "
                f"{c['cells']} cells"
                for c in w["counts"]
            )
            + ".",
        ]
    return lines


def _x(value: Any, finite_max: float) -> float:
    v = float(value)
    # inf one step right of the largest finite value, as the eps-sweep plots did.
    return finite_max * 2 if math.isinf(v) else v


def plot_table(
    spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], path: Path
) -> None:
    """The table's ``plot``: per series, the metric's mean and 95% interval vs x."""
    import matplotlib  # noqa: PLC0415 -- only when a PNG is written

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    p = spec["plot"]
    x_axis, series, metric = p["x"], p.get("series"), p["metric"]
    rows = _where(spec, rows)
    groups = _group(rows, [series] if series else [])
    xs_all = [float(r["cell"][x_axis]) for r in rows if x_axis in r["cell"]]
    finite = [v for v in xs_all if math.isfinite(v)] or [1.0]
    fig, ax = plt.subplots(figsize=(6, 4))
    for (name, *_), members in groups.items() if series else [((None,), rows)]:
        by_x = _group(members, [x_axis])
        xs = sorted(by_x, key=lambda v: _x(v[0], max(finite)))
        summ = [stats.summary(_values(by_x[x], metric)) for x in xs]
        ax.errorbar(
            [_x(x[0], max(finite)) for x in xs],
            [s["mean"] for s in summ],
            yerr=[0 if math.isnan(s["ci95"]) else s["ci95"] for s in summ],
            marker="o",
            capsize=3,
            label=str(name) if series else None,
        )
    if p.get("xscale"):
        ax.set_xscale(p["xscale"])
    if p.get("yscale"):
        ax.set_yscale(p["yscale"])
    ax.set_xlabel(p.get("xlabel", x_axis))
    ax.set_ylabel(p.get("ylabel", metric))
    ax.set_title(spec.get("title", spec["id"]), fontsize=9)
    if series:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def experiment_markdown(
    exp: Experiment,
    tables: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
) -> str:
    """The experiment's Markdown: what it answers, its tables, its rows' source."""
    a = exp.answers
    lines = [f"## {exp.title}", ""]
    if a:
        lines += [
            f"Answers {a.get('paper', '?')} {a.get('where', '')}: "
            f"{a.get('claim', '')}".rstrip(),
            "",
        ]
    sources = sorted({r.get("source", "run") for r in rows})
    lines += [
        f"Experiment `{exp.name}` (`privrl experiment run {exp.name}`): "
        f"{_run_text(exp)}, {len(exp.cells())} cells; "
        f"{len(rows)} stored rows from "
        f"{', '.join(f'`{s}`' for s in sources) or 'none'}.",
        "",
    ]
    if exp.notes:
        lines += [exp.notes, ""]
    specs = {s["id"]: s for s in exp.tables}
    for t in tables:
        lines += [*table_markdown(specs[t["id"]], t), ""]
    return "\n".join(lines).rstrip() + "\n"


def _run_text(exp: Experiment) -> str:
    cells = exp.cells()
    runs = list(dict.fromkeys((exp.pipeline_for(c), exp.config_for(c)) for c in cells))
    if runs == [(IMPORTED, exp.config)]:
        return "imported rows only (no pipeline runs it)"
    if len(runs) == 1:
        return f"pipeline `{runs[0][0]}`, config `{runs[0][1]}`"
    return "pipelines and configs " + ", ".join(f"`{p}` `{c}`" for p, c in runs)


def grid_order(exp: Experiment, rows: Sequence[Mapping[str, Any]]) -> list:
    """The rows of the experiment's grid cells, in the grid's order.

    A table's rows and columns follow the file, not the order in which cells happened to
    run, and a row of a cell the file no longer has is not tabulated (it stays in the
    rows file).
    """
    index = {cell_key(c): i for i, c in enumerate(exp.cells())}
    return sorted((r for r in rows if r["key"] in index), key=lambda r: index[r["key"]])


def tabulate(
    exp: Experiment,
    rows: Sequence[Mapping[str, Any]],
    out_dir: Path,
    *,
    plots: bool = True,
) -> list[dict]:
    """Build every table of ``exp`` from ``rows`` and write them into ``out_dir``.

    Writes ``tables.json``, ``tables.md`` and one PNG per plotted table.

    Args:
      exp: the experiment.
      rows: its rows.
      out_dir: ``<results>/<name>``.
      plots: write the PNGs.

    Returns:
      The built tables.
    """
    rows = grid_order(exp, rows)
    tables = [build_table(spec, rows) for spec in exp.tables]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tables.json").write_text(
        json.dumps({"experiment": exp.name, "tables": tables}, indent=1, default=str)
        + "\n"
    )
    (out_dir / "tables.md").write_text(experiment_markdown(exp, tables, rows))
    if plots:
        for spec in exp.tables:
            if spec.get("plot"):
                plot_table(spec, rows, out_dir / f"{spec['id']}.png")
    return tables
