"""benchmarks/gpope_mountain_car_onpolicy.py --add: new epsilons' rows join the stored
ones, stored rows are never replaced, and another protocol or data set is refused."""

import copy
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpope_mountain_car_onpolicy as mc  # noqa: E402

SHIPPED = json.loads(
    (ROOT / "benchmarks/results/gpope_mountain_car_onpolicy.json").read_text()
)


def _first_run(results: dict) -> dict:
    """``results`` as its first run wrote it, before any ``--add``: the shipped file
    has had epsilons added since, and the test adds them again."""
    if "runs" not in results:
        return results
    first = results["runs"][0]
    out = {k: v for k, v in results.items() if k != "runs"}
    out["rows"] = [r for r in results["rows"] if r["epsilon"] in first["epsilons"]]
    out["seconds"], out["uptime"] = first["seconds"], first["uptime"]
    return out


STORED = _first_run(SHIPPED)


def _new_run(epsilons):
    """A run of other epsilons on the same data: the stored setting and data references
    recomputed (tuples as the script builds them, floats off by rounding), rows copied
    from the first stored row under new epsilons with a marker to trace them."""
    new = copy.deepcopy(STORED)
    new.pop("provenance")
    new["setting"]["return_bounds"] = tuple(new["setting"]["return_bounds"])
    new["setting"]["gram_eigenvalues_uniform_rho"] = [
        x * (1 + 1e-9) for x in new["setting"]["gram_eigenvalues_uniform_rho"]
    ]
    new["setting"]["reference_trials"] = 0
    new["setting"]["episodes_cut_at_T"] = {"mean": 0.5}  # per run; not compared
    new["references"] = {
        k: v for k, v in new["references"].items() if not k.startswith("GPOPE")
    }
    new["rows"] = [dict(STORED["rows"][0], epsilon=e, marker=e) for e in epsilons]
    new["seconds"], new["uptime"] = 100.0, "load 1"
    return new


def test_add_keeps_stored_rows_and_inserts_new_ones_in_order():
    out = mc.merge_rows(STORED, _new_run([0.5, 2.0, 5.0]))
    eps = [r["epsilon"] for r in out["rows"]]
    assert eps == [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
    stored = {r["epsilon"]: r for r in STORED["rows"]}
    for r in out["rows"]:
        if r["epsilon"] in stored:
            assert r == stored[r["epsilon"]]  # untouched
        else:
            assert r["marker"] == r["epsilon"]
    # The stored references (with the GPOPE no-noise runs) and setting are kept.
    assert out["references"] == STORED["references"]
    assert out["setting"] == STORED["setting"]
    assert [r["epsilons"] for r in out["runs"]] == [[0.1, 1.0, 10.0], [0.5, 2.0, 5.0]]
    assert out["seconds"] == pytest.approx(STORED["seconds"] + 100.0)
    md = mc.render_md(out)
    assert "Run time (ε = 0.1, 1, 10)" in md and "Run time (ε = 0.5, 2, 5) 100 s" in md
    # The shipped file is what the first run plus one add of 0.5, 2, 5 gives.
    assert [r["epsilons"] for r in SHIPPED.get("runs", out["runs"])] == [
        [0.1, 1.0, 10.0],
        [0.5, 2.0, 5.0],
    ]
    # A second add keeps the run history.
    again = mc.merge_rows(out, _new_run([20.0]))
    assert len(again["runs"]) == 3 and again["rows"][-1]["epsilon"] == 20.0


def test_add_refuses_a_stored_epsilon_another_protocol_or_other_data():
    with pytest.raises(ValueError, match="stored already"):
        mc.merge_rows(STORED, _new_run([0.5, 1.0]))
    other = _new_run([0.5])
    other["setting"]["trials"] = 50
    with pytest.raises(ValueError, match="trials"):
        mc.merge_rows(STORED, other)
    other = _new_run([0.5])
    other["setting"]["gpope"]["l2_clip_norm"] = 0.1
    with pytest.raises(ValueError, match="gpope"):
        mc.merge_rows(STORED, other)
    other = _new_run([0.5])
    other["references"]["LSTD (data)"]["mean"] *= 1.01
    with pytest.raises(ValueError, match="LSTD"):
        mc.merge_rows(STORED, other)
