"""benchmarks/_results.py: the epsilon sweeps' statistics against hand computations."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _results import (  # noqa: E402
    metric_table,
    paired_differences,
    paired_rows,
    summary,
)

METRICS = {"a": ("metric a", "higher")}


def test_summary_is_the_sample_std_and_the_student_t_interval():
    s = summary([1.0, 2.0, 3.0])
    # std (ddof = 1) = 1; t(0.975, 2) = 4.302653 (tables); half-width = t / sqrt(3).
    assert s["n"] == 3 and s["mean"] == 2.0 and s["std"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert math.isnan(summary([5.0])["std"])


def test_paired_differences_pair_each_seed_with_itself():
    # Seed 1 sits 10 above seed 0 at every epsilon: the pairs see only the steps.
    runs = [
        {"seed": s, "epsilon": e, "release": {"a": 10.0 * s + v}}
        for s in (0, 1)
        for e, v in ((1.0, 0.0), (10.0, 1.0 + s), (math.inf, 0.5))
    ]
    out, lines = paired_differences(runs, [1.0, 10.0, math.inf], METRICS)
    assert list(out) == ["1->10", "10->inf"]
    assert out["1->10"]["a"]["mean"] == pytest.approx(1.5)  # +1 and +2
    assert out["1->10"]["a"]["std"] == pytest.approx(math.sqrt(0.5))
    assert out["1->10"]["a"]["rose"] == 2 and out["10->inf"]["a"]["rose"] == 0
    assert out["10->inf"]["a"]["mean"] == pytest.approx(-1.0)  # -0.5 and -1.5
    assert lines[2].startswith("| 1->10 | 2 | +1.500 [±")


def test_metric_table_skips_rows_without_scores():
    table, lines = metric_table(
        [("x", [{"a": 1.0}, {"a": 3.0}]), ("empty", [])], METRICS
    )
    assert list(table) == ["x"] and table["x"]["a"]["mean"] == 2.0
    assert len(lines) == 3 and lines[2].startswith("| x | 2 | 2.000 ± 1.414 [±")


def test_benchmark_scripts_call_the_shared_helpers_with_their_arguments():
    # The helpers' signatures change under the scripts (metric_table gained a required
    # ``metrics`` and three scripts kept calling it without, failing only at the end
    # of their runs): every call in benchmarks/*.py must bind to the signature.
    import ast
    import inspect

    import _results

    helpers = {
        n: inspect.signature(f)
        for n, f in vars(_results).items()
        if inspect.isfunction(f) and f.__module__ == "_results"
    }
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    bad = []
    for path in sorted(bench.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in helpers
            ):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords
            ):
                continue
            try:
                helpers[node.func.id].bind(
                    *node.args, **{k.arg: k.value for k in node.keywords}
                )
            except TypeError as e:
                bad.append(f"{path.name}:{node.lineno} {node.func.id}: {e}")
    assert not bad, bad


def test_paired_rows_pair_any_two_rows_over_their_common_seeds():
    # Seed 2 has no "real" row: the pair uses seeds 0 and 1 only.
    rows = {
        "pre": {0: {"a": 1.0}, 1: {"a": 11.0}, 2: {"a": 5.0}},
        "real": {0: {"a": 4.0}, 1: {"a": 13.0}},
    }
    out, lines = paired_rows(rows, [("pre", "real"), ("pre", "missing")], METRICS)
    assert list(out) == ["pre -> real"]
    s = out["pre -> real"]["a"]
    assert s["n"] == 2 and s["mean"] == pytest.approx(2.5)  # +3 and +2
    assert s["std"] == pytest.approx(math.sqrt(0.5)) and s["rose"] == 2
    assert lines[2].startswith("| pre -> real | 2 | +2.500 [±")
