"""The code is formatted and lint-clean (pyproject.toml's [tool.ruff]), checked by the
test command.

A hard dependency of the dev extra, like import-linter: a skipped check would let style
rot.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["privrl_jax", "tests", "benchmarks"]


@pytest.mark.parametrize(
    "command",
    [["check", "--no-cache"], ["format", "--check", "--no-cache"]],
    ids=["check", "format"],
)
def test_ruff_is_clean(command):
    res = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
