"""The generated results pages and the scoreboard: a committed page that differs from
what the stored rows generate fails here (regenerate: `privrl experiment pages`)."""

from pathlib import Path

import pytest

from privrl_jax import experiments
from privrl_jax.experiments._pages import claim_status, render_pages
from privrl_jax.experiments._runner import write_rows
from privrl_jax.experiments._spec import load_claims

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "results"


def test_committed_pages_are_what_the_stored_results_generate():
    pages = render_pages(ROOT / "results")
    assert set(pages) == {p.name for p in DOCS.glob("*.md")}
    stale = [name for name, text in pages.items() if (DOCS / name).read_text() != text]
    assert not stale, f"regenerate with `privrl experiment pages`: {stale}"


def test_the_scoreboards_plots_are_committed_beside_it():
    # The PNGs' bytes depend on matplotlib's version, so the drift test reads the
    # page (which names the plotted claims); here: each linked plot is there, and no
    # stale one.
    import re  # noqa: PLC0415

    linked = set(
        re.findall(r"\]\((scoreboard_\w+\.png)\)", (DOCS / "scoreboard.md").read_text())
    )
    assert linked == {p.name for p in DOCS.glob("scoreboard_*.png")}
    assert "scoreboard_privorl.png" in linked
    assert "scoreboard_gpope_series.png" in linked  # GPOPE's claims are orderings


def test_every_claim_names_a_paper_and_a_way_to_score_it():
    claims = load_claims()
    assert len({c["id"] for c in claims}) == len(claims)
    names = set(experiments.experiment_names())
    for c in claims:
        assert c["paper"] in ("PrivORL", "GPOPE", "POOL") and c["claim"]
        if c.get("experiment"):
            assert c["experiment"] in names and c["rule"]["kind"]
        else:
            assert c.get("legacy") or c.get("cause"), c["id"]
        if c.get("legacy"):
            assert (ROOT / c["legacy"]).exists(), c["legacy"]


def _rows(tmp_path, values):
    rows = [
        {"cell": {"m": m, "seed": s}, "key": f"m={m}|seed={s}", "metrics": {"v": v}}
        for m, vs in values.items()
        for s, v in enumerate(vs)
    ]
    write_rows(tmp_path, "pool_gap_vs_rho", rows)


@pytest.mark.parametrize(
    ("rule", "want"),
    [
        (
            {"kind": "ordering", "ours": {"m": "a"}, "against": [{"m": "b"}]},
            "reproduces",
        ),
        ({"kind": "ordering", "ours": {"m": "b"}, "against": [{"m": "a"}]}, "does not"),
        (
            {
                "kind": "ordering",
                "ours": {"m": "b"},
                "against": [{"m": "a"}, {"m": "c"}],
            },
            "partly",
        ),
        (
            {"kind": "threshold", "ours": {"m": "a"}, "op": "<", "value": 1.5},
            "reproduces",
        ),
        (
            {
                "kind": "threshold",
                "ours": {"m": "a"},
                "op": "<",
                "value": 0.9,
                "tolerance": 0.2,
            },
            "partly",
        ),
        # With ``over``: each value of m is a test (1.0 < 1.5 only for "a").
        (
            {"kind": "threshold", "ours": {}, "over": "m", "op": "<", "value": 1.5},
            "partly",
        ),
        (
            {"kind": "threshold", "ours": {}, "over": "m", "op": "<", "value": 5},
            "reproduces",
        ),
        (
            {"kind": "threshold", "ours": {}, "over": "m", "op": ">", "value": 5},
            "does not",
        ),
        ({"kind": "interval", "ours": {"m": "a"}, "value": 1.0}, "reproduces"),
        ({"kind": "interval", "ours": {"m": "a"}, "value": 5.0}, "does not"),
    ],
)
def test_claim_rules(tmp_path, monkeypatch, rule, want):
    # Rows 1.0 +- 0.1 for "a", 2.0 for "b", 3.0 for "c"; lower is better by default.
    _rows(tmp_path, {"a": [0.9, 1.0, 1.1], "b": [2.0, 2.1, 1.9], "c": [3.0, 3.1, 2.9]})
    table = {
        "id": "t",
        "layout": "long",
        "rows": ["m"],
        "metrics": {"v": "v"},
        "label": "{m}",
    }
    exp = experiments.load_experiment("pool_gap_vs_rho")
    monkeypatch.setattr(
        experiments._pages,  # noqa: SLF001
        "load_experiment",
        lambda name: type(exp)(
            **{
                **exp.__dict__,
                "tables": [table],
                "axes": {"m": {"a": {}, "b": {}, "c": {}}, "seed": {"seed": "{seed}"}},
                "grid": [{"m": ["a", "b", "c"], "seed": [0, 1, 2]}],
            }
        ),
    )
    claim = {
        "id": "x",
        "experiment": "pool_gap_vs_rho",
        "rule": {"table": "t", "metric": "v", **rule},
    }
    assert claim_status(claim, tmp_path)[0] == want
    assert claim_status({"id": "y", "legacy": "f"}, tmp_path)[0] == ("not migrated")
    assert claim_status({"id": "z"}, tmp_path)[0] == "not run"


def test_a_single_value_is_printed_without_a_spread():
    from privrl_jax.experiments import stats  # noqa: PLC0415
    from privrl_jax.experiments._pages import _summ  # noqa: PLC0415

    assert _summ(stats.summary([0.25])) == "0.250 (n = 1)"
    # Two values: sample std sqrt(0.5) = 0.707; t(0.975, 1) = 12.706 -> 12.706 * 0.5.
    assert _summ(stats.summary([1.0, 2.0])) == "1.500 ± 0.707 [±6.353] (n = 2)"


def test_committed_tables_are_what_the_stored_rows_generate(tmp_path):
    # results/<name>/tables.{md,json} are written by `privrl experiment table NAME`:
    # a hand edit, or notes changed without re-tabulating, shows here.
    root = Path(__file__).resolve().parents[2] / "results"
    stale = []
    for name in experiments.experiment_names():
        rows = experiments.read_rows(root, name)
        if not rows:
            continue
        exp = experiments.load_experiment(name)
        experiments.tabulate(exp, rows, tmp_path / name, plots=False)
        for f in ("tables.md", "tables.json"):
            if (tmp_path / name / f).read_text() != (root / name / f).read_text():
                stale.append(f"{name}/{f}")
    assert not stale, f"re-tabulate with `privrl experiment table NAME`: {stale}"


def test_the_numbers_the_docs_quote_are_what_the_stored_rows_give():
    # docs/*.md quote numbers as links whose title names the row
    # (privrl_jax/experiments/_prose.py); `privrl experiment pages` refills them.
    from privrl_jax.experiments._prose import fill_numbers, quoted_numbers  # noqa: PLC0415

    quoted = {}
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text()
        quoted[path.name] = len(quoted_numbers(text))
        if quoted[path.name]:
            filled = fill_numbers(text, ROOT / "results", where=str(path))
            assert filled == text, f"regenerate with `privrl experiment pages`: {path}"
    assert all(quoted[name] for name in ("reproducing.md", "gpope.md", "pool.md"))
