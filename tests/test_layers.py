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
