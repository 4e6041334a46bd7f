"""Orbax checkpoints of a DP run.

One manager per phase directory; PRNG keys are stored as raw data.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

PyTree = Any


def _is_key(x) -> bool:
    dtype = getattr(x, "dtype", None)  # None (no array): not a key
    return jnp.issubdtype(dtype, jax.dtypes.prng_key)  # type: ignore[arg-type]


def _keys_to_data(tree: PyTree) -> PyTree:
    return jax.tree_util.tree_map(
        lambda x: jax.random.key_data(x) if _is_key(x) else x, tree
    )


def _to_host(tree: PyTree) -> PyTree:
    """NumPy copies of the leaves, which process 0 writes.

    Orbax's multi-process checkpoints refuse process-local jax.Arrays, and our states
    are replicated (every process holds the same values).
    """
    return jax.tree_util.tree_map(lambda x: np.asarray(jax.device_get(x)), tree)


# What a committed orbax step directory always holds (orbax commits a step by renaming
# its temporary directory, so a numbered directory without them was being deleted).
_STEP_FILES = ("_CHECKPOINT_METADATA", "default/_METADATA")


def incomplete_steps(directory: str | Path) -> list[Path]:
    """Numbered step directories of ``directory`` that lack a committed step's files.

    What a kill while orbax deleted an old step (``max_to_keep``) leaves behind.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_dir()
        and p.name.isdigit()
        and not all((p / f).exists() for f in _STEP_FILES)
    )


def _owner_only(path: Path) -> None:
    """Sets mode 0700 on directories and 0600 on files under ``path`` (itself too).

    A checkpoint holds the run's noise key.
    """
    for root, dirs, files in os.walk(path):
        for name, mode in [(d, 0o700) for d in dirs] + [(f, 0o600) for f in files]:
            try:
                os.chmod(os.path.join(root, name), mode)
            except FileNotFoundError:  # removed meanwhile (orbax's own clean-up)
                pass
    os.chmod(path, 0o700)


def _data_to_keys(tree: PyTree, like: PyTree) -> PyTree:
    return jax.tree_util.tree_map(
        lambda x, ref: jax.random.wrap_key_data(x) if _is_key(ref) else x, tree, like
    )


class Checkpoints:
    """An orbax manager over ``directory``.

    One checkpoint per step; the latest two are kept.

    On several processes (``jax.distributed``) every process takes part in each save and
    restore (orbax synchronises them); the trees must be replicated, and are saved as
    NumPy arrays.

    Saves are synchronous (``wait_until_finished``) and atomic (orbax commits by
    rename), so a kill leaves either the previous or the new checkpoint, never half of
    one; a kill while orbax deleted an older step can leave half of *that* one, which
    opening removes (process 0), so a resume neither warns about it nor reads it.

    The directory is 0700 and every file of a step 0600 (they hold the noise key).
    """

    incomplete_steps = staticmethod(incomplete_steps)

    def __init__(self, directory: str | Path, *, max_to_keep: int = 2):
        # The DP checkpoints hold the noise secret: owner-only, like every secret we
        # write.
        self.directory = Path(directory).absolute()
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        if jax.process_index() == 0:
            # Also the uncommitted temporary directory of a save a kill interrupted
            # (orbax leaves it; nothing reads it).
            tmp = [
                p for p in self.directory.glob("*.orbax-checkpoint-tmp*") if p.is_dir()
            ]
            for leftover in incomplete_steps(self.directory) + tmp:
                shutil.rmtree(leftover, ignore_errors=True)
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
        """Saves ``tree`` (keys included) as ``step``; waits until it is on disk."""
        tree = _keys_to_data(tree)
        if jax.process_count() > 1:
            tree = _to_host(tree)
        self.mgr.save(step, args=ocp.args.StandardSave(tree), force=True)
        self.mgr.wait_until_finished()
        step_dir = self.directory / str(step)
        if step_dir.is_dir():
            _owner_only(step_dir)

    def restore(self, step: int, like: PyTree) -> PyTree:
        """Restores ``step`` into the structure (and key types) of ``like``."""
        target = _keys_to_data(like)
        if jax.process_count() > 1:
            target = _to_host(target)
        raw = self.mgr.restore(step, args=ocp.args.StandardRestore(target))
        return _data_to_keys(raw, like)
