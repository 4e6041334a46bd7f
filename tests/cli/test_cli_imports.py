"""`privrl --help` starts at once: no help text imports jax (issue 49).

jax takes seconds to import; only commands that compute import it, inside their bodies.
"""

import json
import subprocess
import sys
import textwrap

import pytest

import privrl_jax

# Runs in a fresh interpreter: this test session has long since imported jax.
_PROBE = textwrap.dedent(
    """
    import json, sys
    import typer
    from typer.testing import CliRunner
    from privrl_jax.cli.main import app

    def walk(cmd, path):
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    out = []
    for path in walk(typer.main.get_command(app), []):
        result = CliRunner().invoke(app, [*path, "--help"])
        out.append([path, result.exit_code, "Usage" in result.output])
    version = CliRunner().invoke(app, ["--version"])
    print(json.dumps({
        "helps": out,
        "version": [version.exit_code, version.output],
        "loaded": sorted(
            m for m in ("jax", "jaxlib", "flax", "optax") if m in sys.modules
        ),
    }))
    """
)


@pytest.fixture(scope="module")
def probe() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], check=True, capture_output=True, text=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_help_renders_without_importing_jax(probe):
    paths = [tuple(p) for p, _, _ in probe["helps"]]
    # The root, each group and each command (a new one joins the walk by itself).
    for expected in [(), ("privacy", "epsilon"), ("synth", "transitions"), ("pool",)]:
        assert expected in paths
    assert len(paths) >= 20
    for path, code, usage in probe["helps"]:
        assert code == 0 and usage, path
    assert probe["loaded"] == []


def test_version_is_the_package_version(probe):
    code, output = probe["version"]
    assert code == 0
    assert output.strip() == f"privrl_jax {privrl_jax.__version__}"


def test_the_cli_env_names_are_the_privacy_core_names():
    from privrl_jax import privacy
    from privrl_jax.cli import main

    for name in ("ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID", "ENV_AUTO"):
        assert getattr(main, name) == getattr(privacy, name), name
