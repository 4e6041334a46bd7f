"""Offline-RL dataset pytrees: flat `Transitions` and padded `Trajectories`."""

from __future__ import annotations

import jax
from flax import struct

# The per-step fields shared by both containers, in D4RL's order.
TRANSITION_FIELDS: tuple[str, ...] = (
    "observations",
    "actions",
    "rewards",
    "next_observations",
    "terminals",
    "timeouts",
)


@struct.dataclass
class Transitions:
    """A flat batch of transitions, D4RL's layout, leading axis N.

    Rows are in collection order: consecutive rows belong to one trajectory until a
    row with `terminals` or `timeouts` set.

    Attributes:
      observations: [N, obs_dim] float32.
      actions: [N, act_dim] float32.
      rewards: [N] float32.
      next_observations: [N, obs_dim] float32.
      terminals: [N] float32 in {0, 1}: the episode ended in a terminal state.
      timeouts: [N] float32 in {0, 1}: the episode was cut by the time limit.
    """

    observations: jax.Array
    actions: jax.Array
    rewards: jax.Array
    next_observations: jax.Array
    terminals: jax.Array
    timeouts: jax.Array

    def __len__(self) -> int:
        return int(self.rewards.shape[0])


@struct.dataclass
class Trajectories:
    """Trajectories padded to a common length T, leading axes [B, T].

    Padding steps (`mask == 0`) hold zeros. A trajectory is a maximal run of rows of a
    `Transitions` ending at a row with `terminals` or `timeouts` set (or at the end of
    the data).

    Attributes:
      observations: [B, T, obs_dim] float32.
      actions: [B, T, act_dim] float32.
      rewards: [B, T] float32.
      next_observations: [B, T, obs_dim] float32.
      terminals: [B, T] float32 in {0, 1}.
      timeouts: [B, T] float32 in {0, 1}.
      mask: [B, T] float32, 1 on real steps, 0 on padding (a prefix of ones).
      lengths: [B] int32 number of real steps.
    """

    observations: jax.Array
    actions: jax.Array
    rewards: jax.Array
    next_observations: jax.Array
    terminals: jax.Array
    timeouts: jax.Array
    mask: jax.Array
    lengths: jax.Array

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def max_length(self) -> int:
        return int(self.mask.shape[1])
