"""benchmarks/_results.py (the result writer) and the benchmark scripts' use of it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


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


def test_benchmark_scripts_import_only_names_their_sibling_modules_define():
    # A helper renamed in one script (privorl_pld_runs lost ``_uptime``) broke another
    # that imported it, found only when that study was run again: every
    # ``from SIBLING import NAME`` in benchmarks/*.py must name a top-level definition.
    import ast

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    defined = {}
    for path in bench.glob("*.py"):
        names = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                names |= {
                    n.id
                    for t in targets
                    for n in ast.walk(t)
                    if isinstance(n, ast.Name)
                }
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        defined[path.stem] = names
    bad = [
        f"{path.name}:{node.lineno} {node.module}.{a.name}"
        for path in sorted(bench.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module in defined
        for a in node.names
        if a.name not in defined[node.module]
    ]
    assert not bad, bad


def test_a_retabulation_keeps_the_runs_host_and_load(tmp_path):
    """``ran=False`` (no run started) keeps the stored provenance, XLA flags and load,
    and records the tabulating host's under ``tabulated``; a run writes its own."""
    import json  # noqa: PLC0415

    from _results import write_results  # noqa: PLC0415

    stored = {
        "runs": [1],
        "provenance": {"host": "the runs' host"},
        "xla_flags": "--one-thread",
        "uptime": "load 2.00",
    }
    (tmp_path / "t.json").write_text(json.dumps(stored))
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n", ran=False)
    got = json.loads((tmp_path / "t.json").read_text())
    assert got["runs"] == [1, 2]
    assert {k: got[k] for k in ("provenance", "xla_flags", "uptime")} == {
        k: stored[k] for k in ("provenance", "xla_flags", "uptime")
    }
    assert got["tabulated"]["provenance"] != stored["provenance"]
    assert (
        "`uptime` when the runs were written: load 2.00;"
        in (tmp_path / "t.md").read_text()
    )
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n", ran=True)
    got = json.loads((tmp_path / "t.json").read_text())
    assert "tabulated" not in got and got["uptime"] != "load 2.00"


def test_gpope_e2e_table_charges_a_device_row_its_host_rows_compile():
    """A device row that reused its host row's executable (compile ~0) is tabulated as a
    cold run: its JAX total and speed-up include the host row's compile."""
    import gpope_throughput as ge  # noqa: PLC0415

    base = {
        "mode": "uniform",
        "trials": 10,
        "steps": 5,
        "host_draw_s": 2.0,
        "run_s": 1.0,
        "numpy_total_s": 40.0,
        "speedup_steady": 0.0,
        "load_1min": 1.0,
        "useful_units": 50,
        "computed_units": 50,
        "padded_units_run": 50,
        "padded_units_per_step": 50,
    }
    host = base | {"schedule": "host", "draw_s": 2.0, "compile_s": 3.0}
    dev = base | {"schedule": "device", "draw_s": 1.0, "compile_s": 0.0}
    md = ge.render_e2e(
        {
            "rows": [host, dev],
            "checks": {"uniform": {"max_abs_diff_sigma0": 0.0, "max_abs_theta": 1.0}},
            "uptime_end": "",
        }
    )
    dev_line = next(line for line in md.splitlines() if "| device |" in line)
    cells = [c.strip() for c in dev_line.strip("|").split("|")]
    # draw 1 + the host row's compile 3 + run 1 = 5 s; 40 / 5 = 8x; draw share 1/5.
    assert cells[4:9] == ["3.00", "1.00", "5.00", "40.0", "8x"]
    assert cells[11] == "20%"


def test_write_results_replaces_both_files_whole(tmp_path):
    """The tuning scripts' writer: the JSON holds the payload plus the host's load, the
    Markdown ends with the load line, and no temporary file is left behind."""
    import json  # noqa: PLC0415

    from _results import write_results  # noqa: PLC0415

    (tmp_path / "t.json").write_text("{truncated")  # a previous, broken write
    write_results(tmp_path, "t", {"runs": [1, 2]}, "| a |\n")
    got = json.loads((tmp_path / "t.json").read_text())
    assert got["runs"] == [1, 2] and "uptime" in got and "provenance" in got
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("| a |\n") and "`uptime` when written:" in md
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.md"]


def test_hlo_op_count_counts_one_branch_of_a_conditional():
    # A conditional runs one branch: ``ops`` counts the larger one, and
    # ``ops_all_branches`` both (issue 52's noise draw sits behind one).
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    from dpsgd_vs_opacus import hlo_op_count  # noqa: PLC0415

    def f(p, x, w):
        def big(x):  # two matmuls: two ops that cannot fuse into one
            return (x @ w) @ w

        return jax.lax.cond(p, big, lambda x: x @ w, x)

    args = (True, jnp.ones((8, 8)), jnp.ones((8, 8)))
    text = jax.jit(f).lower(*args).compile().as_text()
    assert text.count(" conditional(") == 1
    got = hlo_op_count(text)
    plain = hlo_op_count(
        jax.jit(lambda x, w: x @ w).lower(*args[1:]).compile().as_text()
    )
    branches = got["ops_all_branches"] - got["ops"]
    assert plain["ops"] == plain["ops_all_branches"] >= 1
    # The smaller branch (one matmul) is what is left out; the entry keeps the
    # conditional itself.
    assert branches == 1 and got["ops"] >= 3
