"""The secret store of a one-shot release: the DP loop's checkpoint of the secret.

A mechanism released once (POOL's statistics, a noisy table) has no training state to
checkpoint, but its secret must still outlive a crash: a release recorded in the ledger
and then recomputed with new noise would be a second, unaccounted release. The store is
the one :class:`RunRecorder` keeps (an orbax :class:`Checkpoints` of
``{"secret": DPSecret.to_tree(), "ledger_head": ...}``, owner-only, never published),
without the ``state``, so every run directory keeps its secret the same way and
``privrl privacy report`` checks its ledger head like any DP checkpoint's.
"""

from __future__ import annotations

import numpy as np

from privrl_jax.privacy._checkpoints import Checkpoints
from privrl_jax.privacy._fit import DPSecret, _head_from_tree, _head_to_tree
from privrl_jax.privacy._ledger import Ledger


def load_or_create_secret(
    checkpoints: Checkpoints, ledger: Ledger, *, noise_seed: int | None = None
) -> DPSecret:
    """The run's secret: restored from ``checkpoints``, else new and saved there first.

    Call it after the budget check and before the release is recorded: the secret is on
    disk before any noise is drawn, so a run killed after its ledger entry recomputes
    the same release from it, and a rerun spends nothing new.

    Args:
      checkpoints: the run's store (e.g. ``Checkpoints(run_dir / "checkpoints" /
        "dp")``).
      ledger: the run's ledger; its head is saved with a new secret and a stored
        secret's head must be in its chain.
      noise_seed: None for :meth:`DPSecret.fresh` (private); an int for
        :meth:`DPSecret.from_seed` (NOT PRIVATE: the secret is marked ``fixed``). Used
        only when nothing is stored: a stored secret is never replaced.

    Returns:
      The run's :class:`DPSecret` (the stored one on a rerun).

    Raises:
      LedgerError: the stored secret was saved under a ledger head that ``ledger`` does
        not hold (the ledger was truncated or replaced).
    """
    latest = checkpoints.latest()
    if latest is not None:
        like = {
            "secret": DPSecret.from_seed(0).to_tree(),
            "ledger_head": np.zeros(32, np.uint8),
        }
        tree = checkpoints.restore(latest, like)
        ledger.require_head(
            _head_from_tree(tree["ledger_head"]),
            f"the secret in {checkpoints.directory}",
        )
        return DPSecret.from_tree(tree["secret"])
    secret = DPSecret.fresh() if noise_seed is None else DPSecret.from_seed(noise_seed)
    checkpoints.save(
        0, {"secret": secret.to_tree(), "ledger_head": _head_to_tree(ledger.head)}
    )
    return secret
