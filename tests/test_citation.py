"""CITATION.cff and CHANGELOG.md agree with the package (one version, one license)."""

from pathlib import Path

import yaml

import privrl_jax

ROOT = Path(__file__).resolve().parents[1]


def test_citation_file_names_this_version_and_the_three_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == privrl_jax.__version__
    assert cff["license"] == "Apache-2.0"
    titles = [ref["title"] for ref in cff["references"]]
    assert titles == [
        "PrivORL: Differentially Private Synthetic Dataset for Offline Reinforcement "
        "Learning",
        "Privacy Preserving Off-Policy Evaluation",
        "Privacy-Preserving Reinforcement Learning with One-Sided Feedback",
    ]
    assert all(ref["authors"] for ref in cff["references"])


def test_changelog_has_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{privrl_jax.__version__}]" in text
