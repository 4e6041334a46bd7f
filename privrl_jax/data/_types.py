"""Offline-RL dataset pytrees."""

from __future__ import annotations

import jax
from flax import struct


@struct.dataclass
class Transitions:
    """A flat batch of transitions, D4RL's layout, leading axis N.

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
