"""PrivSyn through the marginal pipeline on the tiny config, without the mbi extra: the
release layout, every release's sensitivity, and the ledger's epsilon against
dp-accounting's for the events that ran."""

import math
import re

import dp_accounting
import pytest

from privrl_jax import data, privacy
from privrl_jax.pipelines import marginal
from privrl_jax.synth._privsyn import INDIF_SENSITIVITY


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("privsyn") / "eps1"
    cfg = marginal.load(
        "marginal/test",
        [
            "model.name=privsyn",
            "model.update_iterations=10",
            "data.public_envs=[maze2d-medium-dense-v1]",
            "data.public_size=200",
            "privacy.epsilon=1.0",
            "privacy.noise_seed=7",
        ],
    )
    return run_dir, marginal.run(cfg, run_dir)


def test_privsyn_writes_the_release_and_is_labelled(run):
    run_dir, report = run
    syn = data.load_hdf5(run_dir / "synthetic.hdf5")
    assert len(syn) == 400 and syn.observations.shape == (400, 4)
    meta = data.read_hdf5_metadata(run_dir / "synthetic.hdf5")
    assert meta["generator"] == "PrivSyn (GUM)" and not meta["private"]
    assert not report["finetune"]["private"] and "noise_seed" in report["warning"]
    assert (run_dir / "audit" / "audit.json").is_file()


def test_privsyn_ledger_equals_dp_accounting_and_each_sensitivity_is_stated(run):
    run_dir, report = run
    releases = report["finetune"]["releases"]
    what = [r["what"] for r in releases]
    assert what[0] == "PrivSyn: InDif scores of 66 pairs (selection)"
    assert what[1] == "PrivSyn: 12 1-way marginals"
    assert releases[0]["l2_sensitivity"] == pytest.approx(
        INDIF_SENSITIVITY * math.sqrt(66)
    )
    assert releases[1]["l2_sensitivity"] == pytest.approx(math.sqrt(12))
    for r in releases[2:]:  # "PrivSyn: k 2-way marginals of c cells"
        k = int(re.search(r"(\d+) 2-way", r["what"]).group(1))
        assert r["l2_sensitivity"] == pytest.approx(math.sqrt(k))
    events = dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(r["noise_multiplier"]) for r in releases]
    )
    ledger = privacy.Ledger.load(run_dir)
    for acc in ("rdp", "pld"):
        expected = privacy.compute_epsilon(events, 1e-4, accountant=acc).epsilon
        assert ledger.epsilon(acc).epsilon == pytest.approx(expected, rel=1e-9)
    # The split composes to the one calibrated Gaussian: epsilon at the budget.
    assert 0.99 <= report["privacy"]["rdp"]["epsilon"] <= 1.0 + 1e-9
