"""pipelines.mechanism_audit: the audit of one mechanism on a public toy problem."""

from __future__ import annotations

import json
import math

import dp_accounting
import pytest

from privrl_jax.pipelines import mechanism_audit as ma


def _run(tmp_path, overrides, canaries=1000):
    cfg = ma.load("mechanism_audit/default", [f"audit.canaries={canaries}", *overrides])
    return ma.run(cfg, tmp_path / "run")


def test_the_halved_noise_is_caught_and_written_not_raised(tmp_path):
    """sigma = 2 accounts epsilon 2.17 (dp-accounting's RDP of one Gaussian); sigma = 1
    runs, and 10,000 canaries (ceiling 3.91) show more than 2.17 (the fault is marked,
    not raised)."""
    faulty = ["mechanism.noise_multiplier=2.0", "mechanism.noise_factor=0.5"]
    r = _run(tmp_path, faulty, canaries=10_000)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(2.0))
    assert r["epsilon_accounted"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert r["fault"] and r["violation"]
    assert r["epsilon_demonstrated"] > r["epsilon_accounted"]
    stored = json.loads((tmp_path / "run" / "report.json").read_text())
    assert stored["epsilon_demonstrated"] == r["epsilon_demonstrated"]


@pytest.mark.parametrize("kind", ["fit", "gaussian"])
def test_a_correct_mechanism_is_calibrated_and_not_flagged(tmp_path, kind):
    r = _run(tmp_path, [f"mechanism.kind={kind}", "privacy.epsilon=2.0"])
    assert r["epsilon_accounted"] == pytest.approx(2.0, rel=1e-3)
    assert not r["fault"] and not r["violation"]
    assert 0.0 <= r["epsilon_demonstrated"] <= r["epsilon_accounted"]
    assert r["audit"]["guesses"] == 20  # 1% of 1,000 each way


def test_config_refusals(tmp_path):
    with pytest.raises(ValueError, match="privacy.epsilon"):
        ma.load("mechanism_audit/default", ["privacy.epsilon=0"])
    with pytest.raises(ValueError, match="noise_factor"):
        ma.load("mechanism_audit/default", ["mechanism.noise_factor=1.5"])
    assert math.isinf(
        ma.load("mechanism_audit/default", ["privacy.epsilon=.inf"]).privacy.epsilon
    )
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        ma.run(ma.load("mechanism_audit/default", []), tmp_path / "run")


def test_the_selection_fault_is_caught_and_the_correct_one_is_not(tmp_path):
    """The exponential mechanism at eps = 1 on 100 candidates: the pair's exact epsilon
    is 0.99 (correct) and 1.98 with the factor 1/2 missing; 2 x 10^5 draws a side
    bound the faulty one above 1."""
    base = ["mechanism.kind=exponential", "mechanism.trials=200000", "audit.seed=0"]
    ok = ma.run(ma.load("mechanism_audit/default", base), tmp_path / "ok")
    bad = ma.run(
        ma.load("mechanism_audit/default", [*base, "mechanism.noise_factor=0.5"]),
        tmp_path / "bad",
    )
    assert ok["epsilon_accounted"] == bad["epsilon_accounted"] == 1.0
    assert ok["audit"]["epsilon_of_pair"] == pytest.approx(0.9896, abs=1e-4)
    assert bad["audit"]["epsilon_of_pair"] == pytest.approx(1.977, abs=1e-3)
    assert not ok["violation"] and ok["epsilon_demonstrated"] <= 0.9896
    assert bad["violation"] and bad["fault"]


def test_the_simulated_white_box_view_accounts_the_plan_and_the_fault(tmp_path):
    """kind=simulated, full batch, sigma 2 accounted and 1 run, m = 10,000: at q = 1
    both scores rank alike; the accounted and ran epsilons are dp-accounting's."""
    base = [
        "mechanism.kind=simulated",
        "mechanism.noise_multiplier=2.0",
        "mechanism.noise_factor=0.5",
        "audit.seed=1000",
    ]
    got = {
        score: ma.run(
            ma.load(
                "mechanism_audit/default",
                [*base, f"mechanism.score={score}", "audit.canaries=10000"],
            ),
            tmp_path / score,
        )
        for score in ("sum", "likelihood")
    }
    assert (
        got["sum"]["epsilon_demonstrated"] == got["likelihood"]["epsilon_demonstrated"]
    )
    r = got["likelihood"]
    eps = {}
    for sigma in (2.0, 1.0):
        acc = dp_accounting.rdp.RdpAccountant()
        acc.compose(dp_accounting.GaussianDpEvent(sigma))
        eps[sigma] = acc.get_epsilon(1e-5)
    assert r["epsilon_accounted"] == pytest.approx(eps[2.0], rel=1e-9)
    assert r["audit"]["epsilon_ran"] == pytest.approx(eps[1.0], rel=1e-9)
    assert r["fault"] and r["violation"] == (r["epsilon_demonstrated"] > eps[2.0])
    assert r["audit"]["guesses"] == 200


def test_the_simulated_calibrated_fault_matches_the_stored_bound(tmp_path):
    # sigma calibrated to epsilon 1 (full batch), half of it runs: the legacy script's
    # first detection run at m = 10,000 stored 1.345161526433603.
    cfg = ma.load(
        "mechanism_audit/default",
        [
            "mechanism.kind=simulated",
            "mechanism.noise_factor=0.5",
            "audit.seed=1000",
            "audit.canaries=10000",
        ],
    )
    r = ma.run(cfg, tmp_path / "run")
    assert r["epsilon_demonstrated"] == pytest.approx(1.345161526433603, rel=1e-12)
    assert r["violation"] and r["audit"]["epsilon_ceiling"] == pytest.approx(
        3.9091123490971937, rel=1e-12
    )
