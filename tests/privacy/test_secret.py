"""The secret store of a one-shot release: stored before use, never replaced, tied to
its ledger."""

import numpy as np
import pytest

from privrl_jax.privacy import (
    Checkpoints,
    DPSecret,
    Ledger,
    LedgerError,
    load_or_create_secret,
)


def _ledger(run_dir, dataset_id="inventory"):
    return Ledger.open(
        run_dir,
        dataset_id=dataset_id,
        dataset_size=100,
        target_epsilon=1.0,
        target_delta=1e-3,
    )


def test_secret_is_stored_once_and_tied_to_its_ledger(tmp_path):
    ledger = _ledger(tmp_path)
    store = tmp_path / "checkpoints" / "dp"
    seeded = load_or_create_secret(Checkpoints(store), ledger, noise_seed=7)
    assert seeded.fixed
    np.testing.assert_array_equal(seeded.words, DPSecret.from_seed(7).words)
    assert store.stat().st_mode & 0o777 == 0o700
    # A stored secret is never replaced, whatever the caller asks for.
    again = load_or_create_secret(Checkpoints(store), ledger, noise_seed=None)
    assert again.fixed and again.words.dtype == np.uint32
    np.testing.assert_array_equal(again.words, seeded.words)
    # A fresh secret comes back as stored (nobody can regenerate it).
    fresh_dir = tmp_path / "fresh"
    fresh = load_or_create_secret(Checkpoints(fresh_dir / "dp"), _ledger(fresh_dir))
    assert not fresh.fixed
    restored = load_or_create_secret(Checkpoints(fresh_dir / "dp"), _ledger(fresh_dir))
    np.testing.assert_array_equal(restored.words, fresh.words)
    assert not np.array_equal(fresh.words, seeded.words)
    # The store holds the head of the ledger it was created under: another ledger
    # (replaced, or another dataset's) does not hold it.
    other = _ledger(tmp_path / "other", dataset_id="another dataset")
    with pytest.raises(LedgerError, match="the secret in"):
        load_or_create_secret(Checkpoints(store), other)
