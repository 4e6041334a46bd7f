"""Orbax checkpoints of a DP run: one manager per phase directory, PRNG keys as raw
data."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

PyTree = Any


def _is_key(x) -> bool:
    return jnp.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def _keys_to_data(tree: PyTree) -> PyTree:
    return jax.tree_util.tree_map(
        lambda x: jax.random.key_data(x) if _is_key(x) else x, tree
    )


def _to_host(tree: PyTree) -> PyTree:
    """NumPy copies of the leaves: orbax's multi-process checkpoints refuse
    process-local jax.Arrays,
    and our states are replicated (every process holds the same values), so process 0
    writes them."""
    return jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x)), tree)


def _data_to_keys(tree: PyTree, like: PyTree) -> PyTree:
    return jax.tree_util.tree_map(
        lambda x, ref: jax.random.wrap_key_data(x) if _is_key(ref) else x, tree, like
    )


class Checkpoints:
    """An orbax manager over ``directory``; one checkpoint per step, the latest two
    kept.

    On several processes (``jax.distributed``) every process takes part in each save and
    restore (orbax synchronises them); the trees must be replicated, and are saved as
    NumPy arrays.

    Saves are synchronous (``wait_until_finished``) and atomic (orbax commits by
    rename), so a kill leaves either the previous or the new checkpoint, never half of
    one.
    """

    def __init__(self, directory: str | Path, *, max_to_keep: int = 2):
        # The DP checkpoints hold the noise secret: owner-only, like every secret we
        # write.
        self.directory = Path(directory).absolute()
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.mgr = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=max_to_keep, enable_async_checkpointing=False
            ),
        )

    def latest(self) -> int | None:
        """The newest saved step, or None."""
        return self.mgr.latest_step()

    def save(self, step: int, tree: PyTree) -> None:
        """Saves ``tree`` (PRNG keys included) as ``step`` and waits until it is on
        disk."""
        tree = _keys_to_data(tree)
        if jax.process_count() > 1:
            tree = _to_host(tree)
        self.mgr.save(step, args=ocp.args.StandardSave(tree), force=True)
        self.mgr.wait_until_finished()

    def restore(self, step: int, like: PyTree) -> PyTree:
        """Restores ``step`` into the structure (and key types) of ``like``."""
        target = _keys_to_data(like)
        if jax.process_count() > 1:
            target = _to_host(target)
        raw = self.mgr.restore(step, args=ocp.args.StandardRestore(target))
        return _data_to_keys(raw, like)
