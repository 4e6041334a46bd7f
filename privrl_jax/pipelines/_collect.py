"""Pipeline: collect a maze2d dataset with the noisy expert and write it as HDF5."""

from __future__ import annotations

import dataclasses
import os
import sys

import jax
from tqdm import tqdm

from privrl_jax import data as data_lib
from privrl_jax import envs
from privrl_jax.pipelines._outputs import check_output_file

MAX_COLLECT_SIZE = 100_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """What `run_collect` collects; load it with `load_config(CollectConfig, ...)`.

    Attributes:
      env: maze2d task name.
      size: number of transitions (D4RL: 1M umaze, 2M medium, 4M large).
      seed: PRNG seed.
      action_noise: Gaussian action-noise std of the expert (D4RL: 0.5).
      num_envs: parallel env streams; lowered so that each stream covers at least
        one episode length (`resolved_num_envs`).
      chunk_steps: steps per env per jitted call (the progress bar advances per chunk).
    """

    env: str = "maze2d-umaze-v1"
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
                f"env={self.env!r} is not a maze2d task; choose one of "
                f"{list(envs.MAZE_ENVS)}"
            )
        for name in ("size", "num_envs", "chunk_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        # A D4RL file is written from memory (~100 bytes a maze transition): refuse
        # sizes that could never be written before hours of collection, not after.
        if self.size > MAX_COLLECT_SIZE:
            raise ValueError(
                f"size={self.size:.3g} transitions is more than {MAX_COLLECT_SIZE:,} "
                "(D4RL's largest "
                "maze2d set is 4M); lower --size."
            )
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {self.seed!r}")
        if not (isinstance(self.action_noise, (int, float)) and self.action_noise >= 0):
            raise ValueError(
                f"action_noise must be a number >= 0, got {self.action_noise!r}"
            )

    def episode_length(self) -> int:
        """The env's time limit (D4RL's: umaze 300, medium 600, large 800)."""
        return int(envs.make(self.env)[1].max_steps_in_episode)

    def resolved_num_envs(self) -> int:
        """The number of streams collected: ``num_envs``, or fewer for a short run.

        `num_envs`, lowered to size // episode length (at least 1) so that no stream is
        cut before one episode length.

        Each stream holds size / num_envs steps; with more streams than that allows
        every episode would be chopped to a few steps (e.g. --size 5000 with 1000
        envs: five steps each).
        """
        return max(1, min(self.num_envs, self.size // self.episode_length()))

    def num_envs_note(self) -> str | None:
        """What `resolved_num_envs` changed, in words; None if nothing."""
        used = self.resolved_num_envs()
        if used == self.num_envs:
            return None
        return (
            f"num_envs lowered from {self.num_envs} to {used} so that each stream "
            f"covers at least one episode ({self.episode_length()} steps of "
            f"{self.env}) of the {self.size} transitions; raise --size to collect "
            "with more envs."
        )


def run_collect(
    config: CollectConfig,
    out: str | os.PathLike,
    *,
    progress: bool = True,
    overwrite: bool = False,
) -> str:
    """Collects `config.size` transitions and writes them to `out` (atomic HDF5).

    Validates first, writes last: the output path is checked (not a directory, not an
    existing file unless `overwrite`, in a writable directory) before any work; a
    lowered number of streams (`num_envs_note`) is said on stderr; the temporary
    files of killed earlier writes of `out` are removed. The resolved config (with
    the number of streams actually used) is stored as file attributes
    (`privrl_jax.data.read_hdf5_metadata`).

    Args:
      config: what to collect (env, size, seed, action noise, streams).
      out: the HDF5 file to write.
      progress: show a progress bar.
      overwrite: replace an existing file at ``out``.

    Returns:
      The path written.

    Raises:
      ValueError: an unusable output path (the message names the fix).
      FileExistsError: `out` appeared during the collection and `overwrite` is False.
    """
    out = os.fspath(out)
    check_output_file(out, overwrite=overwrite)
    note = config.num_envs_note()
    if note:  # said after the checks, next to the progress bar, and in the metadata
        tqdm.write(f"note: {note}", file=sys.stderr)
    config = dataclasses.replace(config, num_envs=config.resolved_num_envs())
    data_lib.remove_stale_hdf5_temps(out)
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
    data_lib.save_hdf5(
        out, transitions, metadata=dataclasses.asdict(config), overwrite=overwrite
    )
    return out
