"""Helpers the PrivORL-n and PrivORL-j pipeline tests share: the run's secret, the
resume check."""

import numpy as np
import pytest

from privrl_jax import data, privacy
from privrl_jax.pipelines._checkpoints import Checkpoints
from privrl_jax.pipelines._dp_loop import DPSecret

PUBLIC_FILES = ("config.yaml", "report.json", "report.md", "ledger.json")


def read_secret(run_dir) -> DPSecret:
    """The DP secret of a run, from its latest DP checkpoint
    (the one place it may be)."""
    ckpt = Checkpoints(run_dir / "checkpoints" / "dp")
    return DPSecret.from_tree(ckpt.mgr.restore(ckpt.latest())["secret"])


def assert_secret_not_published(run_dir) -> None:
    """No word of the noise key and not the sampling seed appear in what may be
    published."""
    secret = read_secret(run_dir)
    public = "".join((run_dir / f).read_text() for f in PUBLIC_FILES)
    for word in [*map(str, secret.words), str(secret.sampling_seed)]:
        assert word not in public


def assert_rerun_refused(run, cfg, tmp_path) -> None:
    """A directory holding another run's config.yaml is refused."""
    (tmp_path / "config.yaml").write_text("seed: 123\n")
    with pytest.raises(ValueError, match="different config"):
        run(cfg, tmp_path)


def assert_resume_is_exact(run, make_cfg, tmp_path, monkeypatch, crash_after: int):
    """Runs ``make_cfg()`` whole into ``full``; into ``resumed`` it crashes after the
    ``crash_after``-th checkpoint save, then reruns. The release must be identical to
    the bit, the ledgers hold the same releases (no step spent twice). Returns (full,
    resumed) reports."""
    full = run(make_cfg(), tmp_path / "full")
    real_save, calls = Checkpoints.save, {"n": 0}

    def crashing_save(self, step, tree):
        real_save(self, step, tree)
        calls["n"] += 1
        if calls["n"] == crash_after:
            raise KeyboardInterrupt

    monkeypatch.setattr(Checkpoints, "save", crashing_save)
    with pytest.raises(KeyboardInterrupt):
        run(make_cfg(), tmp_path / "resumed")
    monkeypatch.setattr(Checkpoints, "save", real_save)
    resumed = run(make_cfg(), tmp_path / "resumed")
    a = data.load_hdf5(tmp_path / "full" / "synthetic.hdf5")
    b = data.load_hdf5(tmp_path / "resumed" / "synthetic.hdf5")
    np.testing.assert_array_equal(
        np.asarray(a.observations), np.asarray(b.observations)
    )
    la, lb = (
        privacy.Ledger.load(tmp_path / "full"),
        privacy.Ledger.load(tmp_path / "resumed"),
    )
    assert lb.num_releases == la.num_releases == full["finetune"]["steps"]
    assert lb.report()["releases"] == la.report()["releases"]
    assert resumed["privacy"]["rdp"]["epsilon"] == pytest.approx(
        full["privacy"]["rdp"]["epsilon"]
    )
    return full, resumed
