"""The one-shot baselines resume like POOL's run: killed right after their first ledger
entry, a rerun restores the stored secret, replays the recorded entries (nothing spent
twice) and makes the release an uninterrupted run makes, bit for bit.

One case per baseline on its tiny config; the mbi-based ones (PGM, MST, AIM) skip
without the ``baselines`` extra. The secret is private (``DPSecret.fresh``, pinned to
one value so the uninterrupted run can be compared with), and the rerun is refused a
new one.
"""

import dataclasses

import numpy as np
import pytest

from privrl_jax import data, privacy
from privrl_jax.pipelines import marginal, pategan
from privrl_jax.pipelines._synth.baseline import ReleaseRecorder

TINY = ["data.public_envs=[maze2d-medium-dense-v1]", "data.public_size=200"]
# A private secret (fixed=False), the same for the killed and the uninterrupted run.
SECRET = dataclasses.replace(privacy.DPSecret.from_seed(11), fixed=False)

CASES = {
    "privsyn": (
        marginal,
        "marginal/test",
        ["model.name=privsyn", "model.update_iterations=10"],
    ),
    "pategan": (pategan, "pategan/test", []),
    "pategan_pretrained": (pategan, "pategan/test", ["model.name=pategan_pretrained"]),
    "mst": (marginal, "marginal/test", ["model.name=mst"]),
    "pgm": (marginal, "marginal/test", ["model.name=pgm"]),
    "aim": (
        marginal,
        "marginal/test",
        # 12 columns: AIM needs more than 12 rounds (the 1-way marginals take 12).
        ["model.name=aim", "model.aim_rounds=13", "model.aim_round_iters=50"],
    ),
}
NEEDS_MBI = {"mst", "pgm", "aim"}
# Without extras, and the two ways of recording: one entry per measurement (PrivSyn),
# one per chunk of training rounds (PATE-GAN); the others run with -m slow.
DEFAULT = {"privsyn", "pategan"}


def _fresh_is(monkeypatch, secret_or_error):
    def fresh(cls):
        if isinstance(secret_or_error, BaseException):
            raise secret_or_error
        return secret_or_error

    monkeypatch.setattr(privacy.DPSecret, "fresh", classmethod(fresh))


def _kill_after_first_record(monkeypatch):
    real = privacy.Ledger.record

    def record_then_die(self, *args, **kwargs):
        real(self, *args, **kwargs)  # on disk, as a SIGKILL right after would leave it
        raise KeyboardInterrupt

    monkeypatch.setattr(privacy.Ledger, "record", record_then_die)
    return real


def _entries(run_dir):
    return [(r.what, r.count, r.event) for r in privacy.Ledger.load(run_dir).releases]


@pytest.mark.parametrize(
    "name",
    [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in CASES],
)
def test_a_baseline_killed_after_its_first_entry_resumes_to_the_same_release(
    name, tmp_path, monkeypatch
):
    if name in NEEDS_MBI:
        pytest.importorskip("mbi", reason="needs the baselines extra (mbi)")
    module, config, overrides = CASES[name]
    cfg = module.load(config, [*TINY, *overrides])
    _fresh_is(monkeypatch, SECRET)
    full = module.run(cfg, tmp_path / "full")

    real = _kill_after_first_record(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        module.run(cfg, tmp_path / "killed")
    assert len(_entries(tmp_path / "killed")) == 1
    assert not (tmp_path / "killed" / "synthetic.hdf5").exists()
    monkeypatch.setattr(privacy.Ledger, "record", real)
    # The rerun must read its secret back: drawing a new one would make another
    # release than the recorded entry accounts for.
    _fresh_is(monkeypatch, AssertionError("a rerun drew a new secret"))
    resumed = module.run(cfg, tmp_path / "killed")

    # Nothing spent twice: the same entries as an uninterrupted run, the same epsilon.
    assert _entries(tmp_path / "killed") == _entries(tmp_path / "full")
    for acc in ("rdp", "pld"):  # PLD has no exponential mechanism (AIM): an error
        assert resumed["privacy"][acc] == full["privacy"][acc]
    assert resumed["privacy"]["rdp"]["epsilon"] <= cfg.privacy.epsilon * (1 + 1e-9)
    assert resumed["finetune"]["private"] and full["finetune"]["private"]
    # The same release, bit for bit.
    a = data.load_hdf5(tmp_path / "full" / "synthetic.hdf5")
    b = data.load_hdf5(tmp_path / "killed" / "synthetic.hdf5")
    for field in ("observations", "actions", "rewards", "next_observations"):
        np.testing.assert_array_equal(
            np.asarray(getattr(a, field)), np.asarray(getattr(b, field))
        )
    # A third run spends nothing and keeps the release.
    again = module.run(cfg, tmp_path / "killed")
    assert _entries(tmp_path / "killed") == _entries(tmp_path / "full")
    assert again["privacy"]["rdp"]["epsilon"] == full["privacy"]["rdp"]["epsilon"]


def _ledger(tmp_path):
    return privacy.Ledger.open(
        tmp_path,
        dataset_id="toy",
        dataset_size=100,
        target_epsilon=10.0,
        target_delta=1e-5,
    )


def test_the_recorder_replays_recorded_entries_and_refuses_another_release(tmp_path):
    mech = privacy.GaussianMechanism(l2_sensitivity=1.0, noise_multiplier=2.0)
    first = ReleaseRecorder(_ledger(tmp_path), "rdp")
    first("A", mech)
    first("B", mech, 3)
    first.finish()
    eps = _ledger(tmp_path).epsilon("rdp").epsilon

    replay = ReleaseRecorder(_ledger(tmp_path), "rdp")
    replay("A", mech)
    replay("B", mech, 3)
    replay("C", mech)  # past the ledger's end: recorded
    replay.finish()
    ledger = _ledger(tmp_path)
    assert [(r.what, r.count) for r in ledger.releases] == [
        ("A", 1),
        ("B", 3),
        ("C", 1),
    ]
    assert ledger.epsilon("rdp").epsilon > eps

    other = ReleaseRecorder(_ledger(tmp_path), "rdp")
    other("A", mech)
    with pytest.raises(privacy.LedgerError, match="entry 1 records 3 x 'B'"):
        other("B", mech, 2)
    short = ReleaseRecorder(_ledger(tmp_path), "rdp")
    short("A", mech)
    with pytest.raises(privacy.LedgerError, match="holds 3 entries"):
        short.finish()
    assert len(_ledger(tmp_path).releases) == 3  # nothing was recorded by the refusals
