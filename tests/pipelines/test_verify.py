"""verify_run: every release of every method is tied to the ledger it was
accounted in."""

import json
import shutil

import dp_accounting
import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import privacy
from privrl_jax.cli.main import app
from privrl_jax.pipelines._verify import verify_run

STEP = dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.0))


def _run_with(tmp_path, release: str, steps: int = 2):
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=10.0,
        target_delta=1e-5,
    )
    for _ in range(steps):
        led.record(STEP, what="step")
    (tmp_path / release).write_text(
        json.dumps({"theta": [0.0], "ledger_head": led.head})
    )
    return led


@pytest.mark.parametrize("release", ["weights.json", "policy.json"])
def test_a_truncated_ledger_is_refused_for_a_json_release(tmp_path, release):
    led = _run_with(tmp_path, release)
    assert verify_run(tmp_path).num_releases == 2
    data = json.loads((tmp_path / "ledger.json").read_text())
    data["releases"] = data["releases"][:1]  # a smaller epsilon on the face of it
    (tmp_path / "ledger.json").write_text(json.dumps(data))
    with pytest.raises(
        privacy.LedgerError,
        match=f"{release} was written after ledger entry {led.head[:12]}",
    ):
        verify_run(tmp_path)
    res = CliRunner().invoke(app, ["privacy", "report", str(tmp_path)])
    assert res.exit_code == 2 and "spent (RDP)" not in res.output


def test_a_json_release_without_a_head_is_refused(tmp_path):
    _run_with(tmp_path, "weights.json")
    (tmp_path / "weights.json").write_text(json.dumps({"theta": [0.0]}))
    with pytest.raises(privacy.LedgerError, match="records no ledger head"):
        verify_run(tmp_path)


def test_a_missing_ledger_is_refused_while_a_release_exists(tmp_path):
    _run_with(tmp_path, "weights.json")
    (tmp_path / "ledger.json").unlink()
    with pytest.raises(
        privacy.LedgerError, match="ledger.json is missing, but the run holds"
    ):
        verify_run(tmp_path)


def test_not_private_mark_is_in_the_hashed_header_and_the_report(tmp_path):
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=10.0,
        target_delta=1e-5,
        not_private="privacy.noise_seed is set",
    )
    led.record(STEP, what="step")
    res = CliRunner().invoke(app, ["privacy", "report", str(tmp_path)])
    assert res.exit_code == 0 and "NOT PRIVATE: privacy.noise_seed is set" in res.output
    data = json.loads((tmp_path / "ledger.json").read_text())
    del data["not_private"]  # removing the mark breaks the chain
    (tmp_path / "ledger.json").write_text(json.dumps(data))
    with pytest.raises(privacy.LedgerError, match="header"):
        privacy.Ledger.load(tmp_path)
    # A private run's ledger has no mark, and its genesis is what it always was.
    other = privacy.Ledger.open(
        tmp_path / "p",
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=10.0,
        target_delta=1e-5,
    )
    assert other.report()["not_private"] is None
    assert "not_private" not in json.loads((tmp_path / "p" / "ledger.json").read_text())
    with pytest.raises(privacy.LedgerError, match="privacy.noise_seed differs"):
        privacy.Ledger.open(
            tmp_path / "p",
            dataset_id="d",
            dataset_size=1000,
            target_epsilon=10.0,
            target_delta=1e-5,
            not_private="seeded",
        )


def _finished_run(run_dir):
    """A run directory as a DP pipeline leaves it: ledger, DP checkpoint, release,
    report.json / report.md naming the head, and an audit."""
    led = _run_with(run_dir, "weights.json", steps=3)
    ckpt = privacy.Checkpoints(run_dir / "checkpoints" / "dp")
    head = np.frombuffer(bytes.fromhex(led.head), np.uint8).copy()
    ckpt.save(3, {"ledger_head": head})
    (run_dir / "report.json").write_text(json.dumps({"privacy": led.report()}))
    (run_dir / "report.md").write_text("# report\n")
    (run_dir / "audit").mkdir()
    (run_dir / "audit" / "epsilon_lower_bound.json").write_text(
        json.dumps({"rows": [], "ledger_head": led.head})
    )
    return led


def _truncate(run_dir, keep):
    data = json.loads((run_dir / "ledger.json").read_text())
    data["releases"] = data["releases"][:keep]
    (run_dir / "ledger.json").write_text(json.dumps(data))


def _report(run_dir):
    return CliRunner().invoke(app, ["privacy", "report", str(run_dir)])


def test_release_moved_away_and_ledger_emptied_is_refused_by_the_report(tmp_path):
    led = _finished_run(tmp_path)
    assert verify_run(tmp_path).num_releases == 3
    (tmp_path / "weights.json").rename(tmp_path.parent / "weights-moved.json")
    _truncate(tmp_path, 0)
    shutil.rmtree(tmp_path / "checkpoints")
    with pytest.raises(
        privacy.LedgerError,
        match=rf"report.json \(privacy.chain_head\) was written after ledger entry "
        rf"{led.head[:12]}",
    ):
        verify_run(tmp_path)
    res = _report(tmp_path)
    assert res.exit_code == 2 and "verified" not in res.output


def test_release_renamed_ledger_truncated_checkpoints_removed_is_refused(tmp_path):
    _finished_run(tmp_path)
    (tmp_path / "weights.json").rename(tmp_path / "weights.json.bak")
    _truncate(tmp_path, 1)  # a smaller epsilon on the face of it
    shutil.rmtree(tmp_path / "checkpoints")
    with pytest.raises(privacy.LedgerError, match="report.json"):
        verify_run(tmp_path)
    # The report gone too: the audit still names the true head.
    (tmp_path / "report.json").unlink()
    with pytest.raises(privacy.LedgerError, match="epsilon_lower_bound.json"):
        verify_run(tmp_path)
    # Nothing left that names a head, but an empty ledger beside a report of a run.
    shutil.rmtree(tmp_path / "audit")
    _truncate(tmp_path, 0)
    with pytest.raises(privacy.LedgerError, match="records no release.*report.md"):
        verify_run(tmp_path)
    assert _report(tmp_path).exit_code == 2


def test_a_run_that_released_nothing_accountable_still_verifies(tmp_path):
    # POOL's non_private method records nothing: its report names the genesis.
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=10.0,
        target_delta=1e-5,
    )
    (tmp_path / "policy.json").write_text(json.dumps({"ledger_head": led.head}))
    (tmp_path / "policy.npz").write_bytes(b"")
    (tmp_path / "report.json").write_text(json.dumps({"privacy": led.report()}))
    assert verify_run(tmp_path).num_releases == 0
    # A fresh DP run killed before its first commit: only the step-0 secret.
    other = tmp_path / "fresh"
    fresh = privacy.Ledger.open(
        other,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=10.0,
        target_delta=1e-5,
    )
    privacy.Checkpoints(other / "checkpoints" / "dp").save(
        0, {"ledger_head": np.frombuffer(bytes.fromhex(fresh.head), np.uint8).copy()}
    )
    (other / "config.yaml").write_text("seed: 0\n")
    assert verify_run(other).num_releases == 0


def test_the_report_shows_each_groups_mechanism(tmp_path):
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="d",
        dataset_size=1000,
        target_epsilon=50.0,
        target_delta=1e-5,
    )
    for sigma, count in ((0.9893, 3), (0.8791, 2)):
        plan = privacy.DPPlan(
            sampler=privacy.PoissonSampler(
                dataset_size=1000, sampling_rate=0.05, microbatch_size=8
            ),
            l2_clip_norm=1.5,
            steps=5,
            noise_multiplier=sigma,
        )
        led.record(
            plan.step_event(), what="DP-SGD step", count=count, params=plan.describe()
        )
    lines = [ln for ln in _report(tmp_path).output.splitlines() if "DP-SGD step" in ln]
    assert lines == [
        "         3 x DP-SGD step  [PoissonSampledDpEvent]  sigma=0.9893 q=0.05 C=1.5 "
        "N=1000 add-or-remove-one",
        "         2 x DP-SGD step  [PoissonSampledDpEvent]  sigma=0.8791 q=0.05 C=1.5 "
        "N=1000 add-or-remove-one",
    ]
