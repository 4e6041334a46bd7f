"""Multi-process DP training on ``jax.distributed``.

The same release from P processes as from one.

This module imports nothing heavy, so a program can call :func:`initialize` before
anything else touches JAX's backend (``jax.distributed.initialize`` must come first).

How :func:`~privrl_jax.pipelines._dp_loop.run_dp_loop` runs on P processes
(docs/multihost.md):

- **The split.** The N sensitive units are split by index into P contiguous blocks:
  process p holds units ``[p N // P, (p + 1) N // P)``. The split depends only on (N,
  P), never on the data, so it reveals nothing and needs no accounting.
- **One global sample.** Every process draws the same global Poisson batch from the
  run's secret sampling stream. The secret is drawn once, on process 0, and broadcast; a
  resumed run reads it from its checkpoint. No process ever derives it from a public
  seed.
- **Local gather, one collective.** Each process gathers only the sampled units of its
  own block, in microbatches of the plan's size, and adds their clipped contributions.
  One all-gather over the global device mesh (``multihost_utils.process_allgather``)
  then sums the P partial sums in a fixed order, so every process holds the identical
  clipped sum (and an empty batch still takes its noisy step).
- **Noise once.** The noise is drawn from the replicated key: the same draw on every
  process, never one per process or per device. The update runs on replicated
  parameters.
- **One writer.** Only process 0 writes the ledger, before the checkpoint; the
  checkpoints are orbax's multi-process ones (every process takes part, so the run
  directory must be on a filesystem all processes see).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from privrl_jax.privacy._sampling import IndexBatch

PyTree = Any

ENV_COORDINATOR = "PRIVRL_COORDINATOR"
ENV_NUM_PROCESSES = "PRIVRL_NUM_PROCESSES"
ENV_PROCESS_ID = "PRIVRL_PROCESS_ID"
ENV_AUTO = "PRIVRL_DISTRIBUTED"


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
    """How to join a multi-process run (``jax.distributed.initialize``'s arguments).

    Attributes:
      coordinator_address: ``host:port`` of process 0's coordination service.
      num_processes: how many processes take part.
      process_id: this process's index in ``[0, num_processes)``.
      auto: let JAX detect the cluster (TPU pods, SLURM, Open MPI) instead of the three
        above.
      cpu_collectives: the CPU collectives backend (``gloo``) for runs on CPU devices.
      heartbeat_timeout_s: how long the others wait before a silent process counts as
        dead.
    """

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    auto: bool = False
    cpu_collectives: str = "gloo"
    heartbeat_timeout_s: int = 30

    def __post_init__(self):
        explicit = (self.coordinator_address, self.num_processes, self.process_id)
        if self.auto and any(v is not None for v in explicit):
            raise ValueError(
                "give either auto detection or the coordinator address, process count "
                "and process id, not both."
            )
        if not self.auto:
            if any(v is None for v in explicit):
                raise ValueError(
                    "a multi-process run needs the coordinator address (host:port), "
                    "the process "
                    f"count and this process's id (flags, or {ENV_COORDINATOR}, "
                    f"{ENV_NUM_PROCESSES}, "
                    f"{ENV_PROCESS_ID}); or auto detection ({ENV_AUTO}=auto on TPU, "
                    "SLURM, Open MPI)."
                )
            if self.num_processes < 1 or not 0 <= self.process_id < self.num_processes:
                raise ValueError(
                    f"process id must be in [0, {self.num_processes}); got "
                    f"{self.process_id}."
                )
            if ":" not in self.coordinator_address:
                raise ValueError(
                    "the coordinator address must be host:port; got "
                    f"{self.coordinator_address!r}."
                )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None
    ) -> DistributedConfig | None:
        """The settings in the environment (``PRIVRL_*``).

        None for a one-process run.
        """
        env = os.environ if environ is None else environ
        if env.get(ENV_AUTO, "").lower() == "auto":
            return cls(auto=True)
        if not any(
            k in env for k in (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID)
        ):
            return None
        try:
            count = int(env[ENV_NUM_PROCESSES]) if ENV_NUM_PROCESSES in env else None
            pid = int(env[ENV_PROCESS_ID]) if ENV_PROCESS_ID in env else None
        except ValueError as e:
            raise ValueError(
                f"{ENV_NUM_PROCESSES} and {ENV_PROCESS_ID} must be integers ({e})."
            ) from None
        return cls(env.get(ENV_COORDINATOR), count, pid)


@dataclasses.dataclass(frozen=True)
class Topology:
    """Which process this is, of how many (a one-process run is ``Topology()``)."""

    process_id: int = 0
    num_processes: int = 1

    @classmethod
    def current(cls) -> Topology:
        """The topology of the running JAX runtime.

        After :func:`initialize`, or of one process.
        """
        return cls(jax.process_index(), jax.process_count())

    @property
    def is_primary(self) -> bool:
        """Process 0: the one that writes the ledger, the reports and the release."""
        return self.process_id == 0

    @property
    def distributed(self) -> bool:
        return self.num_processes > 1

    def unit_range(self, num_units: int) -> tuple[int, int]:
        """This process's block ``[lo, hi)`` of the units.

        Contiguous and data-independent.
        """
        p, n = self.process_id, self.num_processes
        return p * num_units // n, (p + 1) * num_units // n

    def local_block(self, data: PyTree, num_units: int | None = None) -> PyTree:
        """This process's block of ``data``.

        Leaves are ``[N, ...]``, sliced along axis 0.
        """
        leaves = jax.tree_util.tree_leaves(data)
        lo, hi = self.unit_range(leaves[0].shape[0] if num_units is None else num_units)
        return jax.tree_util.tree_map(lambda x: x[lo:hi], data)


def initialize(config: DistributedConfig | None) -> Topology:
    """Joins the multi-process run described by ``config`` (None: stays one process).

    Must run before any other JAX call of the process. On CPU devices the collectives
    run on gloo. Joining twice is harmless: a process already joined stays as it is.

    Args:
      config: the run's :class:`DistributedConfig`, or None for one process.

    Returns:
      The :class:`Topology` of the running JAX runtime (this process's id, of how
      many).
    """
    if config is None:
        return Topology.current()
    if jax.distributed.is_initialized():
        return Topology.current()
    jax.config.update("jax_cpu_collectives_implementation", config.cpu_collectives)
    if config.auto:
        jax.distributed.initialize(heartbeat_timeout_seconds=config.heartbeat_timeout_s)
    else:
        jax.distributed.initialize(
            config.coordinator_address,
            config.num_processes,
            config.process_id,
            heartbeat_timeout_seconds=config.heartbeat_timeout_s,
        )
    return Topology.current()


def local_microbatches(batch: IndexBatch, lo: int, hi: int) -> IndexBatch:
    """The units of the global ``batch`` inside ``[lo, hi)``, re-indexed from ``lo``.

    Packed into microbatches of the global batch's size (as many as needed, possibly
    none), so each process compiles one accumulate function whatever its share of the
    batch. How many of the sampled units fall in each block depends on the secret sample
    only; it is never released.
    """
    idx, mask = batch.indices.ravel(), batch.mask.ravel()
    mine = idx[mask & (idx >= lo) & (idx < hi)] - lo
    size = batch.indices.shape[1]
    n_mb = -(-mine.size // size)
    padded = np.zeros(n_mb * size, np.int64)
    padded[: mine.size] = mine
    valid = np.zeros(n_mb * size, bool)
    valid[: mine.size] = True
    return IndexBatch(padded.reshape(n_mb, size), valid.reshape(n_mb, size))


def sum_over_processes(tree: PyTree) -> PyTree:
    """The sum over processes of each process's ``tree``, identical on every process.

    One all-gather over the global device mesh, then a sum in process order: every
    process adds the same numbers in the same order, so the replicated results agree bit
    for bit.
    """
    from jax.experimental import multihost_utils  # noqa: PLC0415

    local = jax.tree_util.tree_map(np.asarray, tree)
    gathered = multihost_utils.process_allgather(local, tiled=False)
    return jax.tree_util.tree_map(
        lambda g: np.sum(np.asarray(g), axis=0, dtype=g.dtype), gathered
    )


def broadcast_from_primary(tree: PyTree) -> PyTree:
    """Process 0's ``tree`` on every process (same structure and shapes everywhere)."""
    from jax.experimental import multihost_utils  # noqa: PLC0415

    out = multihost_utils.broadcast_one_to_all(jax.tree_util.tree_map(np.asarray, tree))
    return jax.tree_util.tree_map(np.asarray, out)


def barrier(name: str) -> None:
    """Waits until every process reaches the barrier ``name``."""
    from jax.experimental import multihost_utils  # noqa: PLC0415

    multihost_utils.sync_global_devices(name)
