"""The documentation site builds with warnings as errors, its tutorials executed, and
its API reference documents every public name (needs the docs extra)."""

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason='the docs need: pip install -e ".[docs]"')
pytest.importorskip("myst_nb", reason='the docs need: pip install -e ".[docs]"')

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md"))
API = {
    "privacy": "privrl_jax.privacy",
    "privacy_audit": "privrl_jax.privacy.audit",
    "data": "privrl_jax.data",
    "envs": "privrl_jax.envs",
    "diffusion": "privrl_jax.diffusion",
    "synth": "privrl_jax.synth",
    "agents": "privrl_jax.agents",
    "eval": "privrl_jax.eval",
    "ope": "privrl_jax.ope",
    "planning": "privrl_jax.planning",
    "pipelines": "privrl_jax.pipelines",
    "experiments": "privrl_jax.experiments",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"]
    cmd += ["docs", str(out / "html"), "-d", str(out / "doctrees")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out / "html"


# Five tutorials, each executed in a fresh kernel: minutes on 2 busy cores.
@pytest.mark.slow
def test_docs_build_and_execute_every_tutorial(site):
    assert len(TUTORIALS) >= 5
    for name in TUTORIALS:
        page = (site / "tutorials" / f"{name}.html").read_text()
        # Executed: every tutorial prints its own run time as its last output.
        assert "tutorial time:" in page, name
        assert "Traceback" not in page, name


@pytest.mark.slow
def test_api_reference_documents_every_public_name(site):
    import importlib
    import inspect

    for page, module_name in API.items():
        text = html.unescape((site / "api" / f"{page}.html").read_text())
        anchors = set(re.findall(r'id="([\w.]+)"', text))
        module = importlib.import_module(module_name)
        # A submodule (privacy.audit) has its own page.
        names = [n for n in module.__all__ if not inspect.ismodule(getattr(module, n))]
        missing = [n for n in names if f"{module_name}.{n}" not in anchors]
        assert not missing, f"{module_name}: {missing}"
