"""The scoreboard's rules on small synthetic rows whose statuses are known by hand.

One toy experiment (``toy``: method m in {a, b, c}, x in {1, 2}, 3 seeds; c only at
x = 1) and a second one (``other``) that an ordering may compare against. Each seed
adds -0.25 / 0 / +0.25 (exact in binary) to the group's base value, so every group's
mean is its base and its std 0.25: a at x = 1, 2: 1.0, 3.0; b: 2.0, 2.0; c: 1.0 (a tie
with a at x = 1).
"""

import math
from pathlib import Path

import pytest
import scipy.stats

from privrl_jax import experiments
from privrl_jax.experiments import _pages
from privrl_jax.experiments._runner import read_rows, write_rows
from privrl_jax.experiments._spec import cell_key

BASE = {("a", 1): 1.0, ("a", 2): 3.0, ("b", 1): 2.0, ("b", 2): 2.0, ("c", 1): 1.0}
OFFSETS = (-0.25, 0.0, 0.25)
# 95% t half-width of three values of std 0.25: t_{0.975, 2} 0.25 / sqrt(3).
CI95 = scipy.stats.t.ppf(0.975, 2) * 0.25 / math.sqrt(3)
# Welch's p of a against b at either x: |diff| 1, each mean's variance 0.0625 / 3, df 4.
P_AB = 2 * scipy.stats.t.sf(1.0 / math.sqrt(2 * 0.0625 / 3), 4)

TOY_TABLE = {
    "id": "t",
    "layout": "long",
    "rows": ["m", "x"],
    "metrics": {"v": "v"},
    "label": "{m} {x}",
    # Each other m against a, within each x: b and c at x = 1, b at x = 2 (family 3).
    "tests": [
        {"kind": "welch", "metric": "v", "axis": "m", "baseline": "a", "within": ["x"]}
    ],
}


def _experiment(name, tables, axes, grid):
    base = experiments.load_experiment("pool_gap_vs_rho")
    return type(base)(
        **{
            **base.__dict__,
            "name": name,
            "tables": tables,
            "axes": axes,
            "grid": grid,
        }
    )


def _cells_rows(cells, value):
    return [{"cell": c, "key": cell_key(c), "metrics": {"v": value(c)}} for c in cells]


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    seeds = {"seed": "{seed}"}
    toy = _experiment(
        "toy",
        [TOY_TABLE],
        {"m": {"a": {}, "b": {}, "c": {}}, "x": {1: {}, 2: {}}, "seed": seeds},
        [
            {"m": ["a", "b"], "x": [1, 2], "seed": [0, 1, 2]},
            {"m": ["c"], "x": [1], "seed": [0, 1, 2]},
        ],
    )
    other = _experiment(
        "other",
        [
            {
                "id": "u",
                "layout": "long",
                "rows": ["m", "x"],
                "metrics": {"v": "v"},
                "label": "{m}",
            }
        ],
        {"m": {"ref": {}}, "x": {1: {}, 2: {}}, "seed": seeds},
        [{"m": ["ref"], "x": [1, 2], "seed": [0, 1, 2]}],
    )
    empty = _experiment("empty", [TOY_TABLE], toy.axes, toy.grid)
    exps = {e.name: e for e in (toy, other, empty)}
    monkeypatch.setattr(_pages, "load_experiment", exps.__getitem__)
    write_rows(
        tmp_path,
        "toy",
        _cells_rows(toy.cells(), lambda c: BASE[(c["m"], c["x"])] + OFFSETS[c["seed"]]),
    )
    # other: 1.5 at both x (between a's 1.0 and 3.0).
    write_rows(
        tmp_path,
        "other",
        _cells_rows(other.cells(), lambda c: 1.5 + OFFSETS[c["seed"]]),
    )
    return tmp_path


def _status(results, **rule):
    claim = {
        "id": "x",
        "experiment": rule.pop("experiment", "toy"),
        "rule": {"table": "t", "metric": "v", **rule},
    }
    return _pages.claim_status(claim, results)


# ---------------------------------------------------------------------- ordering
@pytest.mark.parametrize(
    ("rule", "want"),
    [
        # a < b at x = 1, not at x = 2.
        (
            {"ours": {"m": "a"}, "against": [{"m": "b"}], "over": "x"},
            ("partly", "holds in 1 of 2 comparisons"),
        ),
        # The same with `over` a list of axes.
        (
            {"ours": {"m": "a"}, "against": [{"m": "b"}], "over": ["x"]},
            ("partly", "holds in 1 of 2 comparisons"),
        ),
        # Higher is better: b > a at x = 2 only.
        (
            {
                "ours": {"m": "b"},
                "against": [{"m": "a"}],
                "over": "x",
                "better": "higher",
            },
            ("partly", "holds in 1 of 2 comparisons"),
        ),
        # One cell, no `over`: a at x = 1 below b at x = 1.
        (
            {"ours": {"m": "a", "x": 1}, "against": [{"m": "b", "x": 1}]},
            ("reproduces", "holds in 1 of 1 comparisons"),
        ),
        # Both against-groups beaten at x = 1: every comparison holds.
        (
            {
                "ours": {"m": "a", "x": 1},
                "against": [{"m": "b", "x": 1}, {"m": "b", "x": 2}],
            },
            ("reproduces", "holds in 2 of 2 comparisons"),
        ),
        # A tie (a = c at x = 1) does not hold; c has no x = 2 cell: not compared.
        (
            {"ours": {"m": "a"}, "against": [{"m": "c"}], "over": "x"},
            ("does not", "holds in 0 of 1 comparisons"),
        ),
        # No group to compare against anywhere: nothing was measured.
        (
            {"ours": {"m": "a"}, "against": [{"m": "zz"}], "over": "x"},
            ("not run", "holds in 0 of 0 comparisons"),
        ),
        # Against another experiment's table: a (1.0, 3.0) vs other's ref (1.5, 1.5).
        (
            {
                "ours": {"m": "a"},
                "against": [{"experiment": "other", "table": "u", "m": "ref"}],
                "over": "x",
            },
            ("partly", "holds in 1 of 2 comparisons"),
        ),
        # ... where b (2.0) never beats it.
        (
            {
                "ours": {"m": "b"},
                "against": [{"experiment": "other", "table": "u", "m": "ref"}],
                "over": "x",
            },
            ("does not", "holds in 0 of 2 comparisons"),
        ),
    ],
)
def test_ordering(results, rule, want):
    assert _status(results, kind="ordering", **rule) == want


# ------------------------------------------------------------------- significant
def test_the_toy_tests_are_welchs_against_scipy(results):
    table = _pages._table_of("toy", "t", results)  # noqa: SLF001
    got = {(t["value"], t["within"]["x"]): t["p"] for t in table["tests"]}
    assert set(got) == {("b", 1), ("b", 2), ("c", 1)}  # the family: 3 tests
    assert got[("b", 1)] == pytest.approx(P_AB, rel=1e-9)
    assert got[("b", 2)] == pytest.approx(P_AB, rel=1e-9)
    assert 0.005 < P_AB < 0.01


@pytest.mark.parametrize(
    ("rule", "want"),
    [
        # b - a = +1 at x = 1 (a lower: won), -1 at x = 2 (a higher: lost); Holm over
        # the family of 3 puts both of b's p at 3 P_AB < 0.05.
        (
            {"values": ["b"], "better": "lower"},
            ("partly", "1 of 2 tests have adjusted p < 0.05 (holm over a family of 3)"),
        ),
        (
            {"values": ["b"], "better": "higher"},
            ("partly", "1 of 2 tests have adjusted p < 0.05 (holm over a family of 3)"),
        ),
        # alpha between the raw p and the Holm-adjusted 3 P_AB: none is significant
        # (uncorrected, one would be).
        (
            {"values": ["b"], "better": "lower", "alpha": 2 * P_AB},
            (
                "does not",
                f"0 of 2 tests have adjusted p < {2 * P_AB:g} "
                "(holm over a family of 3)",
            ),
        ),
        # c ties a (p = 1): no win.
        (
            {"values": ["c"], "better": "lower"},
            (
                "does not",
                "0 of 1 tests have adjusted p < 0.05 (holm over a family of 3)",
            ),
        ),
        # Both: one win of three.
        (
            {"values": ["b", "c"], "better": "lower"},
            ("partly", "1 of 3 tests have adjusted p < 0.05 (holm over a family of 3)"),
        ),
        # No test of that value: not run.
        (
            {"values": ["zz"], "better": "lower"},
            ("not run", "0 of 0 tests have adjusted p < 0.05 ( over a family of 3)"),
        ),
    ],
)
def test_significant(results, rule, want):
    assert _status(results, kind="significant", **rule) == want


# -------------------------------------------------------------- interval, threshold
@pytest.mark.parametrize(
    ("value", "tolerance", "want"),
    [
        (1.0 + CI95 * 0.999, 0.0, "reproduces"),  # inside the 95% interval
        (1.0 - CI95 * 0.999, 0.0, "reproduces"),
        (1.0 + CI95 * 1.001, 0.0, "does not"),  # just outside, no tolerance
        (1.0 + CI95 * 1.001, 0.5, "partly"),  # |1 - v| = 0.62 <= 0.5 v = 0.81
        (2.0, 0.5, "partly"),  # |1 - 2| = 1 <= 0.5 x 2
        (2.0, 0.4, "does not"),  # 1 > 0.8
    ],
)
def test_interval(results, value, tolerance, want):
    status, ours = _status(
        results,
        kind="interval",
        ours={"m": "a", "x": 1},
        value=value,
        tolerance=tolerance,
    )
    assert status == want
    assert ours == f"1 [{1 - CI95:.3g}, {1 + CI95:.3g}]"


@pytest.mark.parametrize(
    ("value", "tolerance", "want"),
    [
        (1.0, 0.0, "not enough data"),  # equal, but one value shows no interval
        (1.5, 0.0, "not enough data"),  # no tolerance: nothing to judge by
        (1.1, 0.1, "partly"),  # |1 - 1.1| = 0.1 <= 0.1 x 1.1
        (1.5, 0.1, "does not"),  # 0.5 > 0.15
    ],
)
def test_interval_of_one_value_falls_back_to_the_tolerance(
    results, value, tolerance, want, monkeypatch
):
    # "one": the toy table without its tests (Welch's needs two values a sample),
    # seed 1 (offset 0) alone stored: a at x = 1 is n = 1, mean 1.0.
    toy = _pages.load_experiment("toy")
    one = _experiment("one", [{**TOY_TABLE, "tests": []}], toy.axes, toy.grid)
    exps = {"toy": toy, "one": one}
    monkeypatch.setattr(_pages, "load_experiment", exps.__getitem__)
    rows = [r for r in read_rows(results, "toy") if r["cell"]["seed"] == 1]
    write_rows(results, "one", rows)
    rule = dict(kind="interval", ours={"m": "a", "x": 1}, value=value)
    status, ours = _status(results, experiment="one", tolerance=tolerance, **rule)
    assert (status, ours) == (want, "1 (n = 1: no interval)")
    claim = {"id": "x", "experiment": "one"}
    claim["rule"] = {"table": "t", "metric": "v", "tolerance": tolerance, **rule}
    numbers = _pages.claim_numbers(claim, results)
    assert numbers["n"] == 1 and math.isnan(numbers["ci95"])
    assert numbers["status"] == want


@pytest.mark.parametrize(
    ("op", "value", "tolerance", "want"),
    [
        ("<=", 1.0, 0.0, "reproduces"),  # a tie meets <= and >=
        (">=", 1.0, 0.0, "reproduces"),
        ("<", 1.0, 0.0, "does not"),  # ... not < or >
        (">", 1.0, 0.0, "does not"),
        ("<", 0.9, 0.2, "partly"),  # |1 - 0.9| = 0.1 <= 0.2 x 0.9
        ("<", 0.9, 0.1, "does not"),  # 0.1 > 0.09
        (">", 0.5, 0.0, "reproduces"),
    ],
)
def test_threshold(results, op, value, tolerance, want):
    status, ours = _status(
        results,
        kind="threshold",
        ours={"m": "a", "x": 1},
        op=op,
        value=value,
        tolerance=tolerance,
    )
    assert status == want
    assert ours == f"1 ± {CI95:.3g} (95% t)"


# ------------------------------------------------------------------------ not run
def test_missing_groups_rows_and_experiments_are_not_run(results):
    for kind in ("interval", "threshold"):
        rule = {"kind": kind, "ours": {"m": "zz"}, "op": "<", "value": 1.0}
        assert _status(results, **rule) == ("not run", "")
    # An experiment without stored rows.
    rule = {"kind": "interval", "ours": {"m": "a"}, "value": 1.0}
    assert _status(results, experiment="empty", **rule) == ("not run", "")
    assert _pages.claim_status(
        {"id": "y", "legacy": "f", "legacy_says": "s"}, results
    ) == (
        "not migrated",
        "s",
    )
    assert _pages.claim_status({"id": "z"}, results) == ("not run", "")


def test_a_group_that_matches_several_rows_is_refused(results):
    # Without `over`, {"m": "a"} is a's row at x = 1 and at x = 2: scoring the first
    # would be silent.
    line = (
        "claim x: {'m': 'a'} matches 2 rows of table 't' ('a 1', 'a 2'): name the "
        "cell, or `over` the axes that tell them apart."
    )
    with pytest.raises(ValueError) as err:
        _status(results, kind="ordering", ours={"m": "a"}, against=[{"m": "c"}])
    assert str(err.value) == line
    with pytest.raises(ValueError) as err:
        _status(results, kind="interval", ours={"m": "a"}, value=1.0)
    assert str(err.value) == line
    with pytest.raises(ValueError, match=r"\{'m': 'b'\} matches 2 rows"):
        _status(results, kind="ordering", ours={"m": "c"}, against=[{"m": "b"}])


def test_an_unknown_rule_is_refused(results):
    with pytest.raises(ValueError, match="claim x: unknown rule kind 'median'"):
        _status(results, kind="median", ours={"m": "a", "x": 1})


# ------------------------------------------------------------ scoreboard and plots
def test_the_scoreboard_counts_each_status_and_plots_the_numeric_claims(
    results, monkeypatch
):
    def claim(i, paper, **rule):
        return {
            "id": f"c{i}",
            "paper": paper,
            "where": "Fig. 1",
            "claim": "toy",
            "experiment": "toy",
            "rule": {"table": "t", "metric": "v", **rule},
        }

    claims = [
        claim(0, "POOL", kind="interval", ours={"m": "a", "x": 1}, value=1.1),
        claim(1, "POOL", kind="threshold", ours={"m": "b", "x": 1}, op="<", value=1.0),
        claim(
            2, "GPOPE", kind="ordering", ours={"m": "a"}, against=[{"m": "b"}], over="x"
        ),
        claim(3, "GPOPE", kind="interval", ours={"m": "zz"}, value=1.0),
        {"id": "c4", "paper": "PrivORL", "where": "-", "claim": "-", "legacy": "f"},
    ]
    monkeypatch.setattr(_pages, "load_claims", lambda: claims)
    page, counts = _pages.scoreboard(results)
    assert counts == {
        "reproduces": 1,
        "partly": 1,  # a beats b at x = 1 only
        "does not": 1,  # b's 2.0 is not < 1.0
        "not enough data": 0,
        "not run": 1,
        "not migrated": 1,
    }
    plots = _pages.scoreboard_plots(results)
    assert [p["id"] for p in plots["POOL"]] == ["c0", "c1"]
    assert plots["GPOPE"] == plots["PrivORL"] == []
    c0, c1 = plots["POOL"]
    assert c0["paper"] == 1.1 and c0["mean"] == 1.0 and c0["n"] == 3
    assert c0["ci95"] == pytest.approx(CI95, rel=1e-12)
    assert (c0["status"], c1["status"], c1["mean"]) == ("reproduces", "does not", 2.0)
    assert "![POOL: the paper's numbers beside ours](scoreboard_pool.png)" in page
    assert "GPOPE: no claim compares a number of the paper" in page
    assert "scoreboard_gpope.png" not in page


def test_the_plot_is_deterministic_and_refuses_no_points(tmp_path):
    one = {"id": "c0", "kind": "threshold", "metric": "v", "paper": 1.1}
    one |= {"tolerance": 0.2, "mean": 1.0, "ci95": CI95, "n": 3, "status": "partly"}
    # One value: no interval (NaN half-width), drawn without bars.
    two = one | {"id": "c1", "tolerance": 0.0, "ci95": math.nan, "n": 1}
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _pages.plot_claims("POOL", [one, two], a)
    _pages.plot_claims("POOL", [one, two], b)
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError, match="POOL: no claim to plot"):
        _pages.plot_claims("POOL", [], a)


# ------------------------------------------------------------------ series figure
def _series(results, **rule):
    claim = {"id": "x", "paper": "GPOPE", "experiment": "toy"}
    claim["rule"] = {"table": "t", "metric": "v", **rule}
    return _pages.claim_series(claim, results)


def test_claim_series_gives_each_compared_group_at_each_x(results):
    s = _series(
        results, kind="ordering", ours={"m": "a"}, against=[{"m": "b"}], over="x"
    )
    assert (s["status"], s["over"], s["xs"], s["numeric"]) == (
        "partly",
        "x",
        ["1", "2"],
        True,
    )
    (a, b) = s["series"]
    assert (a["label"], a["means"], a["n"]) == ("a", [1.0, 3.0], [3, 3])
    assert (b["label"], b["means"]) == ("b", [2.0, 2.0])
    assert a["ci95"] == pytest.approx([CI95, CI95], rel=1e-12)
    assert s["value"] is None
    # c has no row at x = 2: NaN there, not a shifted series.
    s = _series(
        results, kind="ordering", ours={"m": "a"}, against=[{"m": "c"}], over="x"
    )
    assert s["series"][1]["means"][0] == 1.0 and math.isnan(s["series"][1]["means"][1])
    # No `over`: one position, one point per group.
    s = _series(
        results, kind="ordering", ours={"m": "a", "x": 1}, against=[{"m": "b", "x": 1}]
    )
    assert s["xs"] == [""] and [g["means"] for g in s["series"]] == [[1.0], [2.0]]
    assert [g["label"] for g in s["series"]] == ["m = a, x = 1", "m = b, x = 1"]
    # A threshold over an axis: ours alone, and the threshold's value.
    s = _series(results, kind="threshold", ours={"m": "b"}, over="x", op="<", value=2.5)
    assert (s["status"], s["value"]) == ("reproduces", 2.5)
    assert [g["means"] for g in s["series"]] == [[2.0, 2.0]]
    # Rules that compare with the paper's number have no series.
    assert _series(results, kind="interval", ours={"m": "a", "x": 1}, value=1.0) is None


def test_the_series_figure_is_deterministic_and_refuses_no_items(results, tmp_path):
    items = [
        _series(
            results, kind="ordering", ours={"m": "a"}, against=[{"m": "b"}], over="x"
        ),
        _series(
            results, kind="threshold", ours={"m": "b"}, over="x", op="<", value=2.5
        ),
    ]
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _pages.plot_claim_series("GPOPE", items, a)
    _pages.plot_claim_series("GPOPE", items, b)
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError, match="GPOPE: no claim series to plot"):
        _pages.plot_claim_series("GPOPE", [], a)


def test_write_pages_draws_the_gpope_series_and_no_paper_number_plot(
    results, tmp_path, monkeypatch
):
    claims = [
        {
            "id": "g0",
            "paper": "GPOPE",
            "where": "Sec. 6",
            "claim": "toy",
            "experiment": "toy",
            "rule": {
                "kind": "ordering",
                "table": "t",
                "metric": "v",
                "ours": {"m": "a"},
                "against": [{"m": "b"}],
                "over": "x",
            },
        }
    ]
    monkeypatch.setattr(_pages, "load_claims", lambda: claims)
    monkeypatch.setattr(_pages, "experiment_names", lambda: ["toy"])
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scoreboard_pool.png").write_bytes(b"stale")
    _pages.write_pages(results, docs)
    assert {p.name for p in docs.glob("*.png")} == {"scoreboard_gpope_series.png"}
    page = (docs / "scoreboard.md").read_text()
    assert "](scoreboard_gpope_series.png)" in page and "GPOPE: `g0`." in page
