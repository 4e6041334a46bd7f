"""Batch samplers whose law is exactly what the accountant assumes (host-side, NumPy).

Index selection runs on the host in NumPy, as in jax_privacy: the batch size of a
Poisson sample is random, and JAX needs static shapes, so a Poisson batch is returned as
a variable number of fixed-size microbatches of indices with a validity mask (padding
contributes exactly zero and never changes the shapes a step is compiled for).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from privrl_jax.privacy._accounting import Neighboring, Sampling, validate_sampling_rate


@dataclasses.dataclass(frozen=True)
class IndexBatch:
    """One step's sample of unit indices, split into fixed-size microbatches.

    Attributes:
      indices: [num_microbatches, microbatch_size] int64 unit indices (padding points at
        unit 0).
      mask: [num_microbatches, microbatch_size] bool, False on padding.
    """

    indices: np.ndarray
    mask: np.ndarray

    @property
    def size(self) -> int:
        """Number of sampled units.

        Secret: never use it to normalise or to choose noise.
        """
        return int(self.mask.sum())


def _to_microbatches(
    idx: np.ndarray, microbatch_size: int, min_microbatches: int
) -> IndexBatch:
    n_mb = max(min_microbatches, -(-idx.size // microbatch_size))
    padded = np.zeros(n_mb * microbatch_size, np.int64)
    padded[: idx.size] = idx
    mask = np.zeros(n_mb * microbatch_size, bool)
    mask[: idx.size] = True
    return IndexBatch(
        padded.reshape(n_mb, microbatch_size), mask.reshape(n_mb, microbatch_size)
    )


def _check_size(name: str, value) -> int:
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < 1
    ):
        raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
    return int(value)


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError(
            "a sampler needs an explicit seed (int or numpy Generator); got None."
        )
    return np.random.default_rng(seed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoissonSampler:
    """Exact Poisson sampling.

    Each of ``dataset_size`` units joins a step's batch with probability q.

    The batch is split into ``ceil(size / microbatch_size)`` masked microbatches (at
    least one, so an empty batch still yields a step that adds pure noise;
    docs/dp_pitfalls.md item 5). Accounted by ``PoissonSampledDpEvent(q,
    GaussianDpEvent(sigma))`` per step.

    With ``capacity`` set, a batch larger than the capacity is cut to a uniformly random
    subset of ``capacity`` units (truncated Poisson), and the accounting event must be
    ``TruncatedSubsampledGaussianDpEvent`` (``sampling`` reports which).
    """

    dataset_size: int
    sampling_rate: float
    microbatch_size: int
    capacity: int | None = None

    def __post_init__(self):
        object.__setattr__(
            self, "dataset_size", _check_size("dataset_size", self.dataset_size)
        )
        validate_sampling_rate(self.sampling_rate)
        object.__setattr__(self, "sampling_rate", float(self.sampling_rate))
        object.__setattr__(
            self,
            "microbatch_size",
            _check_size("microbatch_size", self.microbatch_size),
        )
        if self.capacity is not None:
            object.__setattr__(self, "capacity", _check_size("capacity", self.capacity))

    # Poisson subsampling is analysed (and accounted by dp-accounting) under
    # add/remove-one.
    neighboring = Neighboring.ADD_OR_REMOVE_ONE

    @property
    def sampling(self) -> Sampling:
        return Sampling.POISSON if self.capacity is None else Sampling.TRUNCATED_POISSON

    @property
    def expected_batch_size(self) -> float:
        """The public normaliser of the noisy sum, q N."""
        return self.sampling_rate * self.dataset_size

    def sample(self, seed: int | np.random.Generator) -> IndexBatch:
        """Draws one step's batch."""
        rng = _rng(seed)
        idx = np.flatnonzero(rng.random(self.dataset_size) < self.sampling_rate)
        if self.capacity is not None and idx.size > self.capacity:
            idx = np.sort(rng.choice(idx, self.capacity, replace=False))
        return _to_microbatches(idx, self.microbatch_size, 1)

    def batches(self, seed: int, steps: int, *, start: int = 0) -> Iterator[IndexBatch]:
        """Batches of steps ``start .. steps-1``; see :func:`step_batches`."""
        return step_batches(self, seed, steps, start=start)


def step_rng(seed: int, step: int) -> np.random.Generator:
    """The NumPy stream of step ``step`` of a sampler seeded with ``seed``.

    Any size of int is accepted as ``seed``.

    Addressing each step's randomness by its index lets a resumed run draw exactly the
    batches an uninterrupted run would have drawn; a 128-bit secret ``seed`` keeps the
    batches unguessable.
    """
    return np.random.default_rng([int(seed), int(step)])


def step_batches(
    sampler, seed: int, steps: int, *, start: int = 0
) -> Iterator[IndexBatch]:
    """``sampler.sample(step_rng(seed, t))`` for t in ``start .. steps-1``."""
    for t in range(start, steps):
        yield sampler.sample(step_rng(seed, t))


@dataclasses.dataclass(frozen=True, kw_only=True)
class UniformOneSampler:
    """One unit drawn uniformly at random per step (GPOPE's sampling).

    Accounted as ``SampledWithoutReplacementDpEvent(N, 1, .)`` under the replace-one
    relation: a fixed-size sample only makes sense when neighbouring datasets have the
    same size, so the clipped sum's sensitivity is 2C and the noise std 2 sigma C.
    """

    dataset_size: int

    def __post_init__(self):
        object.__setattr__(
            self, "dataset_size", _check_size("dataset_size", self.dataset_size)
        )

    sampling = Sampling.UNIFORM_ONE
    neighboring = Neighboring.REPLACE_ONE
    microbatch_size = 1

    @property
    def sampling_rate(self) -> float:
        return 1.0 / self.dataset_size

    @property
    def expected_batch_size(self) -> float:
        """Always one unit."""
        return 1.0

    def sample(self, seed: int | np.random.Generator) -> IndexBatch:
        """One step's batch: one microbatch holding one uniformly drawn unit."""
        idx = _rng(seed).integers(0, self.dataset_size, size=1)
        return IndexBatch(idx.reshape(1, 1).astype(np.int64), np.ones((1, 1), bool))

    def batches(self, seed: int, steps: int, *, start: int = 0) -> Iterator[IndexBatch]:
        """Batches of steps ``start .. steps-1``; see :func:`step_batches`."""
        return step_batches(self, seed, steps, start=start)

    def sample_many(self, seed: int | np.random.Generator, steps: int) -> np.ndarray:
        """[steps] int64 unit indices, independent and uniform over the dataset."""
        return _rng(seed).integers(0, self.dataset_size, size=steps)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FullBatchSampler:
    """Every unit in every step.

    For full-batch releases: exact gradient descent, statistics.

    No subsampling amplification: each step is one Gaussian mechanism,
    ``GaussianDpEvent(sigma)``. The normaliser is N, which is public here (declared; see
    :class:`~privrl_jax.privacy.DPPlan`). Under add/remove-one the clipped sum has
    sensitivity C; choose ``neighboring=REPLACE_ONE`` on the plan for 2C.
    """

    dataset_size: int
    microbatch_size: int

    def __post_init__(self):
        object.__setattr__(
            self, "dataset_size", _check_size("dataset_size", self.dataset_size)
        )
        object.__setattr__(
            self,
            "microbatch_size",
            _check_size("microbatch_size", self.microbatch_size),
        )

    sampling = Sampling.FULL_BATCH
    neighboring = Neighboring.ADD_OR_REMOVE_ONE
    sampling_rate = 1.0

    @property
    def expected_batch_size(self) -> float:
        return float(self.dataset_size)

    def sample(self, seed: int | np.random.Generator | None = None) -> IndexBatch:
        """All units, in order, as masked microbatches (the seed is not used)."""
        del seed
        return _to_microbatches(np.arange(self.dataset_size), self.microbatch_size, 1)

    def batches(self, seed: int, steps: int, *, start: int = 0) -> Iterator[IndexBatch]:
        """Batches of steps ``start .. steps-1`` (all identical)."""
        return step_batches(self, seed, steps, start=start)
