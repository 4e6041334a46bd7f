"""Batch samplers whose law is exactly what the accountant assumes (host-side, NumPy).

Index selection runs on the host in NumPy, as in jax_privacy: the batch size of a Poisson sample is
random, and JAX needs static shapes, so a Poisson batch is returned as a variable number of
fixed-size microbatches of indices with a validity mask (padding contributes exactly zero and never
changes the shapes a step is compiled for).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np

from privrl_jax.privacy._accounting import Sampling, validate_sampling_rate


@dataclasses.dataclass(frozen=True)
class IndexBatch:
    """One step's sample of unit indices, split into fixed-size microbatches.

    Attributes:
      indices: [num_microbatches, microbatch_size] int64 unit indices (padding points at unit 0).
      mask: [num_microbatches, microbatch_size] bool, False on padding.
    """

    indices: np.ndarray
    mask: np.ndarray

    @property
    def size(self) -> int:
        """Number of sampled units (private: never use it to normalise or to choose noise)."""
        return int(self.mask.sum())


def _to_microbatches(idx: np.ndarray, microbatch_size: int, min_microbatches: int) -> IndexBatch:
    n_mb = max(min_microbatches, -(-idx.size // microbatch_size))
    padded = np.zeros(n_mb * microbatch_size, np.int64)
    padded[: idx.size] = idx
    mask = np.zeros(n_mb * microbatch_size, bool)
    mask[: idx.size] = True
    return IndexBatch(padded.reshape(n_mb, microbatch_size), mask.reshape(n_mb, microbatch_size))


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError("a sampler needs an explicit seed (int or numpy Generator); got None.")
    return np.random.default_rng(seed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoissonSampler:
    """Exact Poisson sampling: each of ``dataset_size`` units joins a step's batch with probability q.

    The batch is split into ``ceil(size / microbatch_size)`` masked microbatches (at least one, so an
    empty batch still yields a step that adds pure noise; DP_PITFALLS.md item 5). Accounted by
    ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma))`` per step.

    With ``capacity`` set, a batch larger than the capacity is cut to a uniformly random subset of
    ``capacity`` units (truncated Poisson), and the accounting event must be
    ``TruncatedSubsampledGaussianDpEvent`` (``sampling`` reports which).
    """

    dataset_size: int
    sampling_rate: float
    microbatch_size: int
    capacity: int | None = None

    def __post_init__(self):
        if not isinstance(self.dataset_size, (int, np.integer)) or self.dataset_size < 1:
            raise ValueError(f"dataset_size must be an int >= 1; got {self.dataset_size!r}.")
        validate_sampling_rate(self.sampling_rate)
        if self.microbatch_size < 1:
            raise ValueError(f"microbatch_size must be >= 1; got {self.microbatch_size!r}.")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError(f"capacity must be >= 1 or None; got {self.capacity!r}.")

    @property
    def sampling(self) -> Sampling:
        return Sampling.POISSON if self.capacity is None else Sampling.TRUNCATED_POISSON

    @property
    def expected_batch_size(self) -> float:
        """q N: the public normaliser of the noisy sum."""
        return self.sampling_rate * self.dataset_size

    def sample(self, seed: int | np.random.Generator) -> IndexBatch:
        """Draws one step's batch."""
        rng = _rng(seed)
        idx = np.flatnonzero(rng.random(self.dataset_size) < self.sampling_rate)
        if self.capacity is not None and idx.size > self.capacity:
            idx = np.sort(rng.choice(idx, self.capacity, replace=False))
        return _to_microbatches(idx, self.microbatch_size, 1)

    def batches(self, seed: int, steps: int, *, start: int = 0) -> Iterator[IndexBatch]:
        """Batches of steps ``start .. steps-1``; step t uses the stream ``(seed, t)``.

        Addressing each step's randomness by its index lets a resumed run draw exactly the batches an
        uninterrupted run would have drawn.
        """
        for t in range(start, steps):
            yield self.sample(np.random.default_rng([seed, t]))


@dataclasses.dataclass(frozen=True, kw_only=True)
class UniformOneSampler:
    """One unit drawn uniformly at random per step (GPOPE's sampling).

    Accounted as ``SampledWithoutReplacementDpEvent(N, 1, .)`` under the replace-one relation.
    """

    dataset_size: int

    def __post_init__(self):
        if self.dataset_size < 1:
            raise ValueError(f"dataset_size must be >= 1; got {self.dataset_size!r}.")

    sampling = Sampling.UNIFORM_ONE

    def sample_many(self, seed: int | np.random.Generator, steps: int) -> np.ndarray:
        """[steps] int64 unit indices, independent and uniform over the dataset."""
        return _rng(seed).integers(0, self.dataset_size, size=steps)
