"""Pipeline: collect a maze2d dataset with the noisy expert and write it as HDF5."""

from __future__ import annotations

import dataclasses
import os

import jax
from tqdm import tqdm

from privrl_jax import data as data_lib
from privrl_jax import envs


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """What `run_collect` collects; load it with `load_config(CollectConfig, ...)`.

    Attributes:
      env: maze2d task name.
      size: number of transitions (D4RL: 1M umaze, 2M medium, 4M large).
      seed: PRNG seed.
      action_noise: Gaussian action-noise std of the expert (D4RL: 0.5).
      num_envs: parallel env streams.
      chunk_steps: steps per env per jitted call (the progress bar advances per chunk).
    """

    env: str = "maze2d-umaze"
    size: int = 1_000_000
    seed: int = 0
    action_noise: float = 0.5
    num_envs: int = 1000
    chunk_steps: int = 100

    def __post_init__(self):
        if (
            self.env not in envs.MAZE_ENVS
            and envs.canonical_name(self.env) not in envs.MAZE_ENVS
        ):
            raise ValueError(
                f"env={self.env!r} is not a maze2d task; choose one of {list(envs.MAZE_ENVS)}"
            )
        for name in ("size", "num_envs", "chunk_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        if not (isinstance(self.action_noise, (int, float)) and self.action_noise >= 0):
            raise ValueError(
                f"action_noise must be a number >= 0, got {self.action_noise!r}"
            )


def run_collect(
    config: CollectConfig, out: str | os.PathLike, *, progress: bool = True
) -> str:
    """Collects `config.size` transitions and writes them to `out` (atomic HDF5).

    The resolved config is stored as file attributes (`privrl_jax.data.read_hdf5_metadata`).

    Returns:
      The path written.
    """
    bar = tqdm(
        total=config.size, desc=f"collect {config.env}", unit="tr", disable=not progress
    )

    def advance(n: int) -> None:
        bar.update(min(n, config.size - bar.n))

    transitions = envs.collect_dataset(
        jax.random.key(config.seed),
        config.env,
        config.size,
        action_noise=config.action_noise,
        num_envs=config.num_envs,
        chunk_steps=config.chunk_steps,
        on_chunk=advance,
    )
    bar.close()
    out = os.fspath(out)
    data_lib.save_hdf5(out, transitions, metadata=dataclasses.asdict(config))
    return out
