"""The DP core type-checks: ``mypy privrl_jax/privacy`` (pyproject.toml's [tool.mypy]).

mypy is in the dev extra; the test skips where it is not installed.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[1]


def test_privacy_is_mypy_clean():
    # No cache (``--cache-dir=/dev/null``): nothing is written to the tree.
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir=/dev/null", "privrl_jax/privacy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
