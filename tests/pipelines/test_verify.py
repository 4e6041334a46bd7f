"""verify_run: every release of every method is tied to the ledger it was
accounted in."""

import json

import dp_accounting
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
