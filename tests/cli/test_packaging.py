"""The package stands alone: configs ship in the wheel; the sdist runs its tests."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "privrl_jax" / "configs"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the source tree (the checkout itself is untouched:
    building in place would rewrite its egg-info and build/ under a running suite)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "privrl_jax", src / "privrl_jax", ignore=skip)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", "."]
    subprocess.run(cmd, cwd=src, check=True, capture_output=True)
    (path,) = (src / "dist").glob("privrl_jax-*.whl")
    return path


def test_wheel_ships_every_yaml_config(wheel):
    shipped = {
        f"privrl_jax/configs/{p.relative_to(CONFIGS).as_posix()}"
        for p in CONFIGS.rglob("*.yaml")
    }
    assert "privrl_jax/configs/privorl_n/quickstart.yaml" in shipped
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert shipped <= names
        quickstart = z.read("privrl_jax/configs/privorl_n/quickstart.yaml")
        # The experiment files too: `pip install` users rerun them.
        experiments = CONFIGS.parent / "experiments"
        assert {
            f"privrl_jax/experiments/{p.name}" for p in experiments.glob("*.yaml")
        } <= names
    assert quickstart == (CONFIGS / "privorl_n" / "quickstart.yaml").read_bytes()


def test_wheel_metadata_license_version_and_typing(wheel):
    import privrl_jax

    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta).decode()
        (license_file,) = [n for n in names if n.endswith("/licenses/LICENSE")]
        license_text = z.read(license_file).decode()
    assert "privrl_jax/py.typed" in names  # PEP 561: the package is typed
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    # One source for the version: __init__.py, read by setuptools (dynamic).
    assert f"Version: {privrl_jax.__version__}" in metadata.splitlines()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text


# Runs in the fresh venv: `privrl quickstart` up to the pipeline call, which is stubbed
# (the real run takes minutes); prints where the package and its config came from.
_QUICKSTART_PROBE = textwrap.dedent(
    """
    import json
    from typer.testing import CliRunner
    import privrl_jax
    from privrl_jax.cli import synth
    from privrl_jax.cli.main import app
    from privrl_jax.pipelines import privorl_n
    from privrl_jax.pipelines._config import to_dict

    seen = {}
    def fake_run(cfg, out):
        seen["cfg"] = cfg
        return {}
    privorl_n.run = fake_run
    privorl_n.render_markdown = lambda report: ""
    result = CliRunner().invoke(app, ["quickstart", "--out", "run"])
    print(json.dumps({
        "exit_code": result.exit_code, "output": result.output,
        "package": privrl_jax.__file__,
        "config_file": str(synth.quickstart_config()),
        "config": to_dict(seen["cfg"]) if "cfg" in seen else None,
    }))
    """
)


def _assert_has_values(resolved: dict, expected: dict, where: str = "") -> None:
    for key, value in expected.items():
        if isinstance(value, dict):
            _assert_has_values(resolved[key], value, f"{where}{key}.")
        else:
            assert resolved[key] == value, f"{where}{key}"


# A venv, a wheel, pip and a jax import: about 30 s on 2 cores, in the default run
# (issue 28: the one check of the non-editable install a fresh machine gets).
def test_non_editable_install_runs_the_shipped_quickstart_config(wheel, tmp_path):
    import site

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # jax & co. come from this environment, privrl_jax from the wheel: a .pth appends
    # this environment's site-packages after the venv's own (which holds the wheel).
    # Plain path entries run no .pth of their own, so this environment's editable finder
    # stays out. (--system-site-packages would expose the base interpreter's packages
    # instead, which in a fresh CI venv are not the ones the tests run with.)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "_tested_env.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    help_text = subprocess.run(
        [venv / "bin" / "privrl", "--help"],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "quickstart" in help_text
    proc = subprocess.run(
        [python, "-c", _QUICKSTART_PROBE],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["exit_code"] == 0, probe["output"]
    assert probe["package"].startswith(str(venv)), probe["package"]
    assert probe["config_file"].startswith(str(venv)), probe["config_file"]
    expected = yaml.safe_load((CONFIGS / "privorl_n" / "quickstart.yaml").read_text())
    _assert_has_values(probe["config"], expected)
    assert probe["config"]["data"]["sensitive_size"] == 100_000


def _git_tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False
    )
    if out.returncode != 0 or not out.stdout:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [p for p in out.stdout.decode().split("\0") if p]


@pytest.fixture(scope="module")
def sdist_tree(tmp_path_factory) -> Path:
    """The sdist built from a copy of the tracked files, unpacked."""
    pytest.importorskip("build", reason='an sdist needs: pip install -e ".[dev]"')
    tracked = _git_tracked()
    tmp = tmp_path_factory.mktemp("sdist")
    src = tmp / "src"
    for rel in tracked:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel, follow_symlinks=False)
    cmd = [sys.executable, "-m", "build", "--sdist", "-o", str(tmp / "dist"), str(src)]
    subprocess.run(cmd, check=True, capture_output=True)
    (archive,) = (tmp / "dist").glob("privrl_jax-*.tar.gz")
    shutil.unpack_archive(archive, tmp / "unpacked")
    (tree,) = (tmp / "unpacked").iterdir()
    return tree


@pytest.mark.slow
def test_sdist_holds_every_tracked_file_and_its_tests_run(sdist_tree):
    tracked = _git_tracked()
    missing = [p for p in tracked if not (sdist_tree / p).exists()]
    assert not missing, missing
    # Tests that read the repository (README, CI script, citation, configs) pass in
    # the unpacked sdist, importing the package from there, not from this checkout.
    env = {**os.environ, "PYTHONPATH": str(sdist_tree)}
    files = ["tests/test_readme.py", "tests/test_citation.py", "tests/test_import.py"]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts="]
    proc = subprocess.run(
        [*cmd, "-q", "-m", "not slow", *files],
        cwd=sdist_tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]
