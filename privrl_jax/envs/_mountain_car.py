"""Mountain Car for off-policy evaluation: gymnax's MountainCar-v0 plus a hand-coded
policy.

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
    """gymnax's MountainCar-v0 and its parameters (the time limit is configurable)."""
    env = MountainCar()
    return env, env.default_params.replace(max_steps_in_episode=max_steps_in_episode)


def energy_pumping_action(obs: jax.Array) -> jax.Array:
    """Push in the direction of motion (right when at rest): the classic energy-pumping
    controller, which reaches the goal from every start state in about 100-125 steps."""
    return jnp.where(obs[1] >= 0.0, 2, 0).astype(jnp.int32)
