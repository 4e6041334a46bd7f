"""The DP checkpoints (privacy.Checkpoints): owner-only files, and the half-deleted step
a kill during orbax's clean-up leaves behind is removed on open (issue 47)."""

import logging
import os
import stat

import numpy as np

from privrl_jax import privacy


def _modes(directory):
    out = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = stat.S_IMODE(os.stat(path).st_mode)
    return out


def test_the_noise_key_files_are_owner_only(tmp_path):
    ckpt = privacy.Checkpoints(tmp_path / "dp")
    secret = privacy.DPSecret.from_seed(0)
    ckpt.save(0, {"secret": secret.to_tree(), "ledger_head": np.zeros(32, np.uint8)})
    modes = _modes(tmp_path / "dp")
    files = {p: m for p, m in modes.items() if (tmp_path / "dp" / p).is_file()}
    dirs = {p: m for p, m in modes.items() if (tmp_path / "dp" / p).is_dir()}
    assert files and dirs
    assert set(files.values()) == {0o600}, files
    assert set(dirs.values()) == {0o700}, dirs
    assert stat.S_IMODE(os.stat(tmp_path / "dp").st_mode) == 0o700


def test_a_half_deleted_step_is_removed_on_open_without_a_warning(tmp_path, caplog):
    ckpt = privacy.Checkpoints(tmp_path / "dp")
    for step in range(3):
        ckpt.save(step, {"x": np.full(3, step)})
    # A SIGKILL while orbax deleted step 1 (max_to_keep=2) after saving step 2: the
    # step's metadata went first, the rest stayed.
    ckpt.save(3, {"x": np.full(3, 3)})
    (tmp_path / "dp" / "4").mkdir()
    (tmp_path / "dp" / "4" / "default").mkdir()  # half of an older step, under any name
    os.remove(tmp_path / "dp" / "2" / "_CHECKPOINT_METADATA")
    # and the temporary directory of a save a kill interrupted
    (tmp_path / "dp" / "5.orbax-checkpoint-tmp-17" / "default").mkdir(parents=True)
    assert [p.name for p in privacy.Checkpoints.incomplete_steps(tmp_path / "dp")] == [
        "2",
        "4",
    ]
    with caplog.at_level(logging.WARNING):
        again = privacy.Checkpoints(tmp_path / "dp")
        assert again.latest() == 3
    assert not any("Metadata file does not exist" in r.message for r in caplog.records)
    assert sorted(p.name for p in (tmp_path / "dp").iterdir()) == ["3"]
    np.testing.assert_array_equal(again.restore(3, {"x": np.zeros(3, int)})["x"], 3)
