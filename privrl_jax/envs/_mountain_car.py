"""Mountain Car for off-policy evaluation: gymnax's MountainCar-v0, a hand-coded policy.

The environment itself is gymnax's ``MountainCar-v0`` (Moore 1990; Sutton & Barto 2018,
Example 10.1, with gym's constants: force 0.001, gravity 0.0025, position in [-1.2,
0.6], speed at most 0.07, start at position U(-0.6, -0.4) with zero speed, reward -1 per
step, termination at position >= 0.5), reused unchanged; this module adds only what
off-policy
evaluation needs: the observation box for tile coding and the energy-pumping controller
that the behaviour and target policies are built from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control.mountain_car import EnvParams, MountainCar

# gym's bounds on (position, velocity): the box the tile coders cover.
OBS_LOW = (-1.2, -0.07)
OBS_HIGH = (0.6, 0.07)
NUM_ACTIONS = 3  # push left, no push, push right


def mountain_car(max_steps_in_episode: int = 200) -> tuple[MountainCar, EnvParams]:
    """Returns gymnax's MountainCar-v0 and its parameters with a chosen time limit.

    Args:
      max_steps_in_episode: the time limit (steps) of an episode.

    Returns:
      `(env, params)`: gymnax's `MountainCar` (its 6-tuple `step`, not wrapped) and
      its default `EnvParams` with `max_steps_in_episode` replaced.
    """
    env = MountainCar()
    return env, env.default_params.replace(max_steps_in_episode=max_steps_in_episode)


def energy_pumping_action(obs: jax.Array) -> jax.Array:
    """The classic energy-pumping controller: push in the direction of motion.

    Pushes right when at rest; reaches the goal from every start state in about
    100-125 steps.

    Args:
      obs: one observation [2], (position, velocity).

    Returns:
      The action, an int32 scalar: 2 (push right) when the velocity is >= 0, else 0
      (push left).
    """
    return jnp.where(obs[1] >= 0.0, 2, 0).astype(jnp.int32)
