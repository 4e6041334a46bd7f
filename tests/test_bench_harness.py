"""benchmarks/_harness.py: the one timing harness of the speed scripts."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import _harness as h  # noqa: E402


def _recorder():
    calls = []
    return calls, {k: (lambda k=k: calls.append(k)) for k in ("a", "b", "c")}


def test_interleave_orders_each_round_as_asked():
    calls, fns = _recorder()
    h.interleave(fns, rounds=3, reps=2, order="alternate", warmup=1)
    # One warm-up call each, then forward, reversed, forward; reps back to back.
    assert calls == list("abc") + list("aabbcc") + list("ccbbaa") + list("aabbcc")
    calls.clear()
    h.interleave(fns, rounds=2, order="fixed", warmup=0)
    assert calls == list("abcabc")


def test_interleave_shuffles_with_its_seed_and_records_every_call():
    calls, fns = _recorder()
    t = h.interleave(fns, rounds=4, reps=3, seed=0, warmup=0)
    rounds = [calls[i : i + 9 : 3] for i in range(0, 36, 9)]
    assert all(sorted(r) == list("abc") for r in rounds)
    # The orders are random.Random(0)'s: the same seed gives the same order.
    calls2, fns2 = _recorder()
    h.interleave(fns2, rounds=4, reps=3, seed=0, warmup=0)
    assert calls2 == calls and len({tuple(r) for r in rounds}) > 1
    assert [len(r) for r in t.seconds["a"]] == [3] * 4 and len(t.loads) == 4


def test_a_block_of_calls_is_one_time_per_round():
    _, fns = _recorder()
    t = h.interleave(fns, rounds=2, reps=5, per_call=False)
    assert [len(r) for r in t.seconds["b"]] == [1, 1]


def test_interleave_refuses_an_unknown_order_and_no_rounds():
    with pytest.raises(ValueError, match="order"):
        h.interleave({}, rounds=1, order="random")
    with pytest.raises(ValueError, match="rounds"):
        h.interleave({}, rounds=0)


def test_timings_medians_and_ratios_per_round():
    t = h.Timings(
        {"x": [[1.0, 3.0], [2.0, 2.0]], "y": [[1.0, 1.0], [4.0, 4.0]]}, [1, 3]
    )
    assert t.flat("x") == [1.0, 3.0, 2.0, 2.0] and t.median("x") == 2.0
    assert t.fastest("x") == 1.0 and t.round_means("x") == [2.0, 2.0]
    assert t.ratios("x", "y") == [2.0, 0.5]  # round means 2 / 1 and 2 / 4
    assert t.protocol().startswith("median of 2 interleaved rounds x 2; host ")
    assert "1-min load 1.0-3.0" in t.protocol()
    table = t.ratio_table("y", "y", {"n": {"x": 7, "y": 8}}).splitlines()
    assert table[0] == "| piece | ms (median) | vs y | ms (fastest) | n |"
    # x: median 2 s, fastest 1 s; y: median 2.5 s (of 1, 1, 4, 4).
    assert table[2] == "| x | 2000.0 | 0.80x | 1000.0 | 7 |"
    assert t.ms()["median_ms"] == {"x": 2000.0, "y": 2500.0}


def test_ratio_cells_spread_and_tables():
    assert h.ratio_cell([1.0, 1.5, 3.0]) == "1.00x / 1.50x / 3.00x (1.50x)"
    assert h.ratio_cell([]) == "-"
    assert h.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert h.markdown_table(("a", "b"), [(1, "x"), (2.5, "y")]) == (
        "| a | b |\n|---|---|\n| 1 | x |\n| 2.5 | y |"
    )


def test_write_outputs_writes_the_json_with_provenance_and_the_markdown(tmp_path):
    h.write_outputs(tmp_path / "sub" / "t", {"rows": [1]}, "| a |")
    got = json.loads((tmp_path / "sub" / "t.json").read_text())
    assert got["rows"] == [1] and "versions" in got["provenance"]
    assert (tmp_path / "sub" / "t.md").read_text() == "| a |\n"
    h.write_outputs(tmp_path / "l", [1, 2])  # a list: provenance beside it, no md
    assert json.loads((tmp_path / "l.json").read_text()) == [1, 2]
    assert (tmp_path / "l.provenance.json").exists()
    assert not (tmp_path / "l.md").exists()


def test_compiled_stats_of_a_matmul():
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    x = jnp.ones((16, 16), jnp.float32)
    c = jax.jit(lambda a: a @ a).lower(x).compile()
    s = h.compiled_stats(c)
    # One dot of 16 x 16 by 16 x 16: 2 * 16^3 flops; one op that runs (the dot).
    assert s["gflop"] == pytest.approx(2 * 16**3 / 1e9)
    assert s["ops"] >= 1 and s["while_loops"] == 0
    assert set(h.HLO_COUNTS) <= set(s)
    # Arguments + output: two 16 x 16 float32 buffers at least.
    assert s["xla_step_mb"] >= 2 * 16 * 16 * 4 / 2**20


def test_run_worker_reads_the_last_json_line(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(
        "import sys, json\nprint('noise')\nprint(json.dumps({'args': sys.argv[1:]}))\n"
    )
    got, _ = h.run_worker(["--x", "1"], script)
    assert got == {"args": ["--x", "1"]}
    script.write_text("import sys\nsys.exit('broken')\n")
    got, err = h.run_worker([], script)
    assert got is None and "broken" in err


def test_the_results_helpers_use_the_packages_statistics():
    # benchmarks/_results.py keeps no statistics of its own (issue 48): its summary is
    # the package's.
    import _results  # noqa: PLC0415

    from privrl_jax.experiments import stats  # noqa: PLC0415

    assert _results.summary is stats.summary


def test_the_timing_scripts_share_one_model_with_the_same_parameters():
    # ghost_step_parts.py times dpsgd_vs_opacus.py's model through jax_model, with its
    # LayerNorms swapped for a subclass: the parameters must be those of the model as
    # dpsgd_vs_opacus.py always built it (auto-named modules), names and values.
    import dpsgd_vs_opacus as bench  # noqa: PLC0415
    import flax.linen as nn  # noqa: PLC0415
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    class Reference(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(8)(x)
            for _ in range(2):
                h = h + nn.Dense(8)(nn.silu(nn.LayerNorm()(h)))
            return nn.Dense(3)(nn.silu(nn.LayerNorm()(h)))

    class Sub(nn.LayerNorm):
        pass

    cfg = bench.Config("t", width=8, depth=2, dim=3, batch=4)
    x = jnp.ones(3)
    want = Reference().init(jax.random.key(0), x)
    for norm in (None, Sub):
        model, loss = bench.jax_model(cfg, norm)
        got = model.init(jax.random.key(0), x)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        assert all(
            bool(jnp.array_equal(a, b))
            for a, b in zip(
                jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
            )
        )
    item = tuple(jnp.asarray(a[0]) for a in bench._data(cfg))
    assert float(loss(got, item)) > 0


def test_timing_args_add_the_protocols_flags():
    import argparse  # noqa: PLC0415

    p = h.timing_args(argparse.ArgumentParser(), rounds=4, reps=2, threads=1)
    assert vars(p.parse_args([])) == {"rounds": 4, "reps": 2, "threads": 1}
    got = p.parse_args(["--rounds", "7", "--reps", "1", "--threads", "3"])
    assert (got.rounds, got.reps, got.threads) == (7, 1, 3)
    assert "threads" not in vars(
        h.timing_args(argparse.ArgumentParser()).parse_args([])
    )
