"""AIM through the marginal pipeline on the tiny config: the release, a ledger whose
events include the exponential mechanism's ZCDpEvents, its RDP epsilon against
dp-accounting's for the events that ran, the budget spent exactly as rho. Needs the mbi
extra; one run (~13 rounds' pricing, two selection rounds: four mbi compiles)."""

import math

import dp_accounting
import pytest

from privrl_jax import data, privacy

pytest.importorskip(
    "mbi",
    reason="the marginal baselines need the optional extra: pip install mbi==2.0.0",
)

from privrl_jax.pipelines import marginal  # noqa: E402
from privrl_jax.privacy._ledger import event_from_dict

OVERRIDES = [
    "model.name=aim",
    "model.aim_rounds=13",  # 12 columns: the 1-way marginals take 12 * 0.9 / 13 of rho
    "model.aim_round_iters=200",
    "data.public_envs=[maze2d-medium-dense-v1]",
    "data.public_size=200",
    "privacy.epsilon=2.0",
    "privacy.noise_seed=7",
]


@pytest.fixture(scope="module")
def aim_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("aim") / "run"
    cfg = marginal.load("marginal/test", OVERRIDES)
    return run_dir, marginal.run(cfg, run_dir)


@pytest.mark.slow  # ~50 s on 2 CPUs: the pipeline's data and four mbi compiles
def test_aim_release_and_ledger(aim_run):
    run_dir, report = aim_run
    for f in ("synthetic.hdf5", "ledger.json", "report.json", "audit/audit.json"):
        assert (run_dir / f).is_file(), f
    syn = data.load_hdf5(run_dir / "synthetic.hdf5")
    assert len(syn) == 400 and syn.observations.shape == (400, 4)
    assert data.read_hdf5_metadata(run_dir / "synthetic.hdf5")["generator"] == (
        "AIM (mbi)"
    )
    ledger = privacy.Ledger.load(run_dir)
    types = [g["event"]["type"] for g in ledger.groups()]
    assert types[0] == "GaussianDpEvent"
    assert types[1::2] == ["ZCDpEvent"] * len(types[1::2])  # every selection
    assert types[2::2] == ["GaussianDpEvent"] * len(types[2::2])
    assert len(types) >= 3
    assert report["finetune"]["selected_cliques"]
    assert len(report["finetune"]["selected_cliques"]) == (len(types) - 1) // 2
    # The ledger's RDP epsilon is dp-accounting's for the events as recorded, within the
    # target, and at it: the composition is exactly rho = 1 / (2 sigma^2), the rho of
    # the one Gaussian calibrated at the target.
    events = dp_accounting.ComposedDpEvent(
        [event_from_dict(g["event"]) for g in ledger.groups()]
    )
    eps = privacy.compute_epsilon(events, 1e-4, accountant="rdp").epsilon
    assert ledger.epsilon("rdp").epsilon == pytest.approx(eps, rel=1e-12)
    assert report["privacy"]["rdp"]["epsilon"] == pytest.approx(eps, rel=1e-12)
    assert 2.0 * 0.99 <= eps <= 2.0 * (1 + 1e-9)
    sigma = report["finetune"]["noise_multiplier"]
    assert ledger.rho() == pytest.approx(0.5 / sigma**2, rel=1e-12)
    assert report["privacy"]["zcdp"]["rho"] == pytest.approx(ledger.rho(), rel=1e-12)
    # PLD cannot compose a ZCDpEvent: the report says so rather than a number.
    assert "use accountant='rdp'" in report["privacy"]["pld"]["error"]
    # The selections' descriptions rebuild their events (the ledger verifies it on
    # load); epsilon_t^2 / 8 is a tenth of each round's rho.
    for g, nxt in zip(ledger.groups()[1::2], ledger.groups()[2::2]):
        p = g["params"]
        assert p["mechanism"] == "exponential" and p["sensitivity"] == 22.0
        assert p["epsilon"] ** 2 / 8 == pytest.approx(
            (0.5 / nxt["params"]["noise_multiplier"] ** 2) / 9, rel=1e-12
        )
    assert not report["finetune"]["private"]  # privacy.noise_seed: labelled
    assert math.isfinite(eps)


def test_aim_with_too_few_rounds_is_refused_before_anything_is_written(tmp_path):
    cfg = marginal.load("marginal/test", [*OVERRIDES, "model.aim_rounds=12"])
    with pytest.raises(ValueError, match="aim_rounds must be > the 12 columns"):
        marginal.run(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "ledger.json").exists()
