"""The PGM / MST pipeline end to end on the tiny config: the release layout, the
ledger's epsilon
against dp-accounting's for the events that ran, the not-private labels. Three runs
shared by the tests (module fixture; one public env of 200 rows, which only the audit's
normaliser reads); they need the mbi extra. Fidelity against epsilon is tested on the
synthesizer itself (tests/synth/test_marginal.py): at this size the audit's scores are
dominated by decoding s' - s from independent bins, not by the noise."""

import json
import math
import re

import dp_accounting
import numpy as np
import pytest

from privrl_jax import data, privacy

pytest.importorskip(
    "mbi",
    reason="the marginal baselines need the optional extra: pip install mbi==2.0.0",
)

from privrl_jax.pipelines import marginal  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("marginal")
    out = {}
    for name, overrides in {
        "pgm_eps1": ["privacy.epsilon=1.0", "privacy.noise_seed=7"],
        "pgm_inf": ["privacy.epsilon=inf"],
        # Fresh secret from the OS: a private run; with the epsilon audit beside it.
        "mst_eps10": ["model.name=mst", "audit.canaries=100"],
    }.items():
        cfg = marginal.load(
            "marginal/test",
            [
                "data.public_envs=[maze2d-medium-dense-v1]",
                "data.public_size=200",
                *overrides,
            ],
        )
        out[name] = (root / name, marginal.run(cfg, root / name))
    return out


def test_release_has_privorl_n_layout(runs):
    run_dir, report = runs["pgm_eps1"]
    for f in (
        "synthetic.hdf5",
        "ledger.json",
        "report.json",
        "config.yaml",
        "report.md",
        "audit/audit.json",
        "audit/NOT_DP_README.txt",
    ):
        assert (run_dir / f).is_file(), f
    syn = data.load_hdf5(run_dir / "synthetic.hdf5")
    assert (
        len(syn) == 400
        and syn.observations.shape == (400, 4)
        and syn.actions.shape == (400, 2)
    )
    assert (
        np.abs(np.asarray(syn.actions)).max() <= 1.0
    )  # inside the public action bounds
    meta = data.read_hdf5_metadata(run_dir / "synthetic.hdf5")
    assert meta["generator"] == "PGM (mbi)" and not meta["private"]
    assert "fidelity" not in report and "fidelity" in json.loads(
        (run_dir / "audit" / "audit.json").read_text()
    )


@pytest.mark.parametrize("name", ["pgm_eps1", "mst_eps10"])
def test_ledger_epsilon_equals_dp_accounting_for_the_events_that_ran(runs, name):
    run_dir, report = runs[name]
    ledger = privacy.Ledger.load(run_dir)
    sigmas = [r["noise_multiplier"] for r in report["finetune"]["releases"]]
    assert len(sigmas) == (1 if name.startswith("pgm") else 3)
    events = dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(s) for s in sigmas]
    )
    target = report["config"]["privacy"]["epsilon"]
    for acc in ("rdp", "pld"):
        expected = privacy.compute_epsilon(events, 1e-4, accountant=acc).epsilon
        assert ledger.epsilon(acc).epsilon == pytest.approx(expected, rel=1e-9)
        assert report["privacy"][acc]["epsilon"] == pytest.approx(expected, rel=1e-9)
    # Calibrated to the budget under RDP (not above it, and not far below).
    assert target * 0.99 <= report["privacy"]["rdp"]["epsilon"] <= target * (1 + 1e-9)
    # Every release's sensitivity is sqrt(its number of marginals or scores).
    for r in report["finetune"]["releases"]:
        k = int(
            re.search(r"\d+", r["what"].split(":")[1]).group()
        )  # "MST: scores of 66 pairs" -> 66
        assert r["l2_sensitivity"] == pytest.approx(math.sqrt(k))


def test_runs_are_labelled_private_or_not(runs):
    _, seeded = runs["pgm_eps1"]
    inf_dir, inf = runs["pgm_inf"]
    _, private = runs["mst_eps10"]
    assert not seeded["finetune"]["private"] and "noise_seed" in seeded["warning"]
    assert not inf["finetune"]["private"] and inf["finetune"]["noise_multiplier"] == 0.0
    assert (
        "epsilon = inf" in inf["warning"]
        and "NOT PRIVATE" in (inf_dir / "report.md").read_text()
    )
    assert [g["event"]["type"] for g in inf["privacy"]["releases"]] == [
        "NonPrivateDpEvent"
    ]
    assert math.isinf(inf["privacy"]["rdp"]["epsilon"])
    assert private["finetune"]["private"] and "warning" not in private
    assert private["finetune"]["noise_secret"].startswith("drawn from os.urandom")


def test_the_epsilon_audit_runs_beside_a_baselines_release(runs):
    """``audit.canaries`` is honoured by the baselines' shared run (it was accepted and
    ignored before): one audited row per ledger group, none above its accounted
    epsilon, and a line per row in report.md."""
    run_dir, report = runs["mst_eps10"]
    out = json.loads((run_dir / "audit" / "epsilon_lower_bound.json").read_text())
    groups = privacy.Ledger.load(run_dir).groups()
    assert [r["what"] for r in out["rows"]] == [g["what"] for g in groups]
    assert all(r["audited"] and not r["violation"] for r in out["rows"])
    assert all(r["epsilon_demonstrated"] <= r["epsilon_accounted"] for r in out["rows"])
    assert len(report["epsilon_audit"]["lines"]) == len(groups)
    assert (run_dir / "report.md").read_text().count("| epsilon audit (") == len(groups)
    assert "epsilon_audit" not in runs["pgm_eps1"][1]  # canaries = 0: no audit
