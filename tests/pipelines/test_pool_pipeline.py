"""POOL pipeline: ledger and epsilon vs dp-accounting, budget guard, NOT PRIVATE,
secrets."""

import json
import math
import shutil

import dp_accounting
import numpy as np
import pytest

from privrl_jax import planning, privacy
from privrl_jax.pipelines import pool
from privrl_jax.privacy._accounting import zcdp_to_epsilon

PUBLIC = ("config.yaml", "report.json", "report.md", "ledger.json", "policy.json")


def _cfg(*overrides):
    return pool.load("pool/test", list(overrides))


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pool") / "run"
    cfg = _cfg("privacy.noise_seed=3", "audit.canaries=1000")
    return cfg, run_dir, pool.run(cfg, run_dir)


def test_ledger_event_and_epsilon_equal_dp_accountings(seeded_run):
    cfg, run_dir, report = seeded_run
    ledger = privacy.Ledger.load(run_dir)
    assert ledger.num_releases == 1
    (rel,) = ledger.releases
    # One Gaussian mechanism of sensitivity sqrt(3H), sigma = 1/sqrt(2 rho).
    mech = planning.pool_mechanism(cfg.privacy.rho, cfg.env.horizon)
    assert rel.params["l2_sensitivity"] == pytest.approx(math.sqrt(3 * cfg.env.horizon))
    assert rel.event == privacy.event_to_dict(
        dp_accounting.GaussianDpEvent(pytest.approx(1 / math.sqrt(2 * cfg.privacy.rho)))
    )
    assert mech.rho == pytest.approx(cfg.privacy.rho)
    # epsilon of the ledger == dp-accounting's RDP conversion of ZCDpEvent(rho).
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(cfg.privacy.rho))
    eps = acc.get_epsilon(cfg.privacy.delta)
    assert report["privacy"]["epsilon"] == pytest.approx(eps, rel=1e-9)
    assert report["privacy"]["epsilon_of_rho_zcdp"] == pytest.approx(eps, rel=1e-9)
    assert report["privacy"]["rho"] == pytest.approx(cfg.privacy.rho)
    # and below Bun & Steinke's rho + 2 sqrt(rho log 1/delta).
    assert eps <= zcdp_to_epsilon(cfg.privacy.rho, cfg.privacy.delta)
    # The canary audit of the same Gaussian mechanism stays below the accounted epsilon.
    (row,) = report["epsilon_audit"]["rows"]
    assert row["audited"] and row["epsilon_accounted"] == pytest.approx(eps, rel=1e-9)
    assert 0 <= row["epsilon_demonstrated"] <= eps
    assert "epsilon demonstrated >=" in (run_dir / "report.md").read_text()


def test_seeded_noise_says_not_private_everywhere(seeded_run):
    _, run_dir, report = seeded_run
    assert report["privacy"]["private"] is False
    assert report["warning"].startswith("NOT PRIVATE")
    assert "NOT PRIVATE" in (run_dir / "report.md").read_text()
    assert json.loads((run_dir / "policy.json").read_text())["private"] is False


def test_q_tables_in_range_and_gap_is_consistent(seeded_run):
    cfg, run_dir, report = seeded_run
    with np.load(run_dir / "policy.npz") as z:
        q = z["q_tables"]
    for h in range(cfg.env.horizon):
        assert q[h].min() >= 0 and q[h].max() <= cfg.env.horizon - h
    ev = report["evaluation"]
    assert ev["gap"] == pytest.approx(
        (ev["policy_cost"] - ev["benchmark_cost"]) / ev["benchmark_cost"]
    )
    assert (run_dir / "plots" / "gaps.png").stat().st_size > 1000


def test_rerun_spends_nothing_and_budget_guard_refuses_before_noise(
    seeded_run, monkeypatch
):
    cfg, run_dir, report = seeded_run
    before = (run_dir / "ledger.json").read_text()
    again = pool.run(cfg, run_dir)
    assert privacy.Ledger.load(run_dir).num_releases == 1
    assert again["evaluation"]["policy_cost"] == report["evaluation"]["policy_cost"]
    assert (
        json.loads(before)["releases"]
        == json.loads((run_dir / "ledger.json").read_text())["releases"]
    )


def test_budget_guard_refuses_before_any_noise(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("noise drawn")

    monkeypatch.setattr(pool.runner, "plan", boom)
    monkeypatch.setattr(privacy, "load_or_create_secret", boom)
    cfg = _cfg("privacy.rho=2.0", "privacy.rho_budget=1.0")
    with pytest.raises(privacy.BudgetExceededError, match="Nothing was released"):
        pool.run(cfg, tmp_path / "r")
    ledger = privacy.Ledger.load(tmp_path / "r")
    assert ledger.num_releases == 0
    assert not (tmp_path / "r" / "policy.npz").exists()
    assert not (tmp_path / "r" / "checkpoints").exists()


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pool") / "run"
    return run_dir, pool.run(_cfg(), run_dir)


def _stored_secret(run_dir):
    return privacy.load_or_create_secret(
        privacy.Checkpoints(run_dir / pool.SECRET_DIR), privacy.Ledger.load(run_dir)
    )


def test_fresh_secret_stays_out_of_public_files(fresh_run):
    run_dir, report = fresh_run
    assert report["privacy"]["private"] is True and "warning" not in report
    secret = _stored_secret(run_dir)
    assert not secret.fixed
    words = secret.words
    needles = {str(int(x)) for x in words} | {words.tobytes().hex()}
    for name in PUBLIC:
        text = (run_dir / name).read_text()
        assert not any(n in text for n in needles), name
    blob = (run_dir / "policy.npz").read_bytes()
    assert words.tobytes() not in blob
    # The secret store (the DP loop's checkpoints) is readable by its owner only.
    assert (run_dir / pool.SECRET_DIR).stat().st_mode & 0o777 == 0o700


def test_killed_after_its_ledger_entry_reruns_to_the_same_release(fresh_run, tmp_path):
    # The noise is fresh (os.urandom): only the stored secret can redraw the same one.
    run_dir, report = fresh_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    with np.load(run_dir / "policy.npz") as z:
        q = z["q_tables"]
    for name in ("policy.npz", "policy.json", "report.json", "report.md"):
        (copy / name).unlink()  # as if killed after the ledger entry
    again = pool.run(_cfg(), copy)
    with np.load(copy / "policy.npz") as z:
        np.testing.assert_array_equal(z["q_tables"], q)
    assert privacy.Ledger.load(copy).num_releases == 1
    assert again["evaluation"] == report["evaluation"]
    # A run directory of the older secret format is refused, never given a new secret.
    shutil.rmtree(copy / pool.SECRET_DIR)
    (copy / "checkpoints" / "secret.npz").write_bytes(b"old")
    (copy / "policy.npz").unlink()
    with pytest.raises(privacy.LedgerError, match="older privrl_jax"):
        pool.run(_cfg(), copy)
    assert not (copy / pool.SECRET_DIR).exists()


def test_report_refuses_the_release_once_its_only_ledger_entry_is_deleted(
    seeded_run, tmp_path
):
    """The release carries the head of the ledger it was accounted in; a ledger that
    lost the
    entry (head back to the genesis: epsilon 0 on the face of it) no longer holds that
    head."""
    from privrl_jax.pipelines._verify import verify_run

    _, run_dir, _ = seeded_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    assert verify_run(copy).num_releases == 1
    led = json.loads((copy / "ledger.json").read_text())
    led["releases"] = []
    (copy / "ledger.json").write_text(json.dumps(led))
    with pytest.raises(
        privacy.LedgerError, match="policy.json was written after ledger entry"
    ):
        verify_run(copy)
    (copy / "policy.json").unlink()  # and without the file that holds the head
    with pytest.raises(
        privacy.LedgerError, match="policy.npz is here without its policy.json"
    ):
        verify_run(copy)


def test_seeded_ledger_is_marked_not_private(seeded_run):
    _, run_dir, _ = seeded_run
    rep = privacy.Ledger.load(run_dir).report()
    assert rep["not_private"].startswith("privacy.noise_seed is set")


def test_zones_mode_is_validated_and_output_perturbation_refuses_additive_tables():
    with pytest.raises(
        ValueError, match="pool.zones must be .paper. or .additive.; got"
    ):
        _cfg("pool.zones=shells")
    with pytest.raises(ValueError, match="Use pool.zones=paper"):
        _cfg(
            "pool.zones=additive",
            "pool.method=output_perturbation",
            "env.num_products=2",
        )
    # One product: the additive zones are the paper's, so OP's range bound holds.
    assert (
        _cfg("pool.zones=additive", "pool.method=output_perturbation").pool.zones
        == "additive"
    )


@pytest.mark.slow
def test_additive_zones_run_spends_the_same_ledger_event(tmp_path):
    # Two products, additive zones: the same single GaussianDpEvent(1 / sqrt(2 rho)) and
    # epsilon as dp-accounting's ZCDpEvent(rho); the weighted cells change no
    # accounting.
    cfg = _cfg("privacy.noise_seed=3", "pool.zones=additive", "env.num_products=2")
    report = pool.run(cfg, tmp_path / "run")
    (rel,) = privacy.Ledger.load(tmp_path / "run").releases
    assert rel.params["l2_sensitivity"] == pytest.approx(math.sqrt(3 * cfg.env.horizon))
    assert rel.event == privacy.event_to_dict(
        dp_accounting.GaussianDpEvent(pytest.approx(1 / math.sqrt(2 * cfg.privacy.rho)))
    )
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(cfg.privacy.rho))
    assert report["privacy"]["epsilon"] == pytest.approx(
        acc.get_epsilon(cfg.privacy.delta), rel=1e-9
    )
    meta = json.loads((tmp_path / "run" / "policy.json").read_text())
    assert meta["geometry"].startswith("additive")
    with np.load(tmp_path / "run" / "policy.npz") as z:
        assert z["q_tables"].shape == (cfg.env.horizon, 2 * cfg.pool.num_zones * 3)
    assert math.isfinite(report["evaluation"]["gap"])


def test_report_refuses_an_emptied_ledger_once_the_release_is_moved_away(
    seeded_run, tmp_path
):
    """Issue 47: with the release (policy.npz, policy.json) moved out and the ledger's
    entries removed, report.json and the audit still name the true head."""
    from privrl_jax.pipelines._verify import verify_run

    _, run_dir, report = seeded_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    for name in ("policy.npz", "policy.json"):
        (copy / name).rename(tmp_path / name)
    led = json.loads((copy / "ledger.json").read_text())
    led["releases"] = []
    (copy / "ledger.json").write_text(json.dumps(led))
    head = report["privacy"]["ledger"]["chain_head"]
    with pytest.raises(
        privacy.LedgerError,
        match=rf"report.json \(privacy.ledger.chain_head\) was written after ledger "
        rf"entry {head[:12]}",
    ):
        verify_run(copy)
    shutil.rmtree(copy / "checkpoints")
    (copy / "report.json").unlink()
    with pytest.raises(privacy.LedgerError, match="epsilon_lower_bound.json"):
        verify_run(copy)
