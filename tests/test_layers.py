"""The package's layering (pyproject.toml's [tool.importlinter] contracts) holds."""

from pathlib import Path

# A hard import, not importorskip: the dev extra installs import-linter, and a
# skipped check would let the layering rot unnoticed.
from importlinter import cli

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_import_contracts_are_kept(monkeypatch):
    # import-linter finds the package on sys.path; run from the repository root so
    # the checked source is this checkout's. No cache: nothing is written to the tree.
    monkeypatch.chdir(PYPROJECT.parent)
    exit_code = cli.lint_imports(
        config_filename=str(PYPROJECT), no_cache=True, no_logo=True
    )
    assert exit_code == cli.EXIT_STATUS_SUCCESS, "a contract is broken; see stdout"


def _private_imports(path: Path) -> list[str]:
    """The ``privrl_jax`` modules a file imports whose dotted path has a ``_`` part."""
    import ast  # noqa: PLC0415

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "privrl_jax" and any(p.startswith("_") for p in parts[1:]):
                found.append(name)
    return found


# Scripts that measure, ablate or cross-check internals (the noise draw, the maze
# controllers, GPOPE's and POOL's statistics, the auditor's counts) import them from
# their modules: the public faces hold what a user needs (tests/test_public_surface.py).
# The list may shrink as scripts become experiment files; it never grows silently.
_INTERNAL_USERS = {
    "agent_flops.py",
    "agents_throughput.py",
    "dp_loop_speed.py",
    "dpsgd_throughput.py",
    "dpsgd_vs_opacus.py",
    "env_throughput.py",
    "ghost_conv_speed.py",
    "ghost_step_parts.py",
    "gpope_throughput.py",
    "reference_returns.py",
}


def test_benchmarks_import_internals_only_where_listed(tmp_path):
    """The benchmarks are users of the library: outside the listed scripts they
    import what the subpackages export, never a ``_private`` module or name."""
    bench = PYPROJECT.parent / "benchmarks"
    found = {p.name: _private_imports(p) for p in sorted(bench.glob("*.py"))}
    assert {k for k, v in found.items() if v} == _INTERNAL_USERS
    # The check sees each form of a private import.
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from privrl_jax.pipelines._dp_loop import run_dp_loop\n"
        "from privrl_jax.agents import _rollouts\n"
        "import privrl_jax.ope._gpope\n"
        "from privrl_jax import privacy\n"
    )
    assert _private_imports(probe) == [
        "privrl_jax.pipelines._dp_loop",
        "privrl_jax.pipelines._dp_loop.run_dp_loop",
        "privrl_jax.agents._rollouts",
        "privrl_jax.ope._gpope",
    ]
