"""Helpers for the agent tests: a tiny one-step bandit with a known best action."""

import jax
import jax.numpy as jnp

from privrl_jax.data import Transitions

BEST_ACTION = jnp.array([0.5, -0.3])
TINY = {"hidden_dims": (32, 32)}


def bandit_dataset(key: jax.Array, n: int = 2048) -> Transitions:
    """One-step bandit: reward -||a - a*||^2, every transition terminal.

    Observations are N(0, I_2) noise (irrelevant to the reward), so the optimal
    policy is the constant a* = (0.5, -0.3). Actions are uniform on [-1, 1]^2: the
    data cover the action box, and behaviour cloning alone would output the data
    mean, 0, at distance |a*| = 0.58 from a*.
    """
    k_obs, k_act = jax.random.split(key)
    obs = jax.random.normal(k_obs, (n, 2))
    actions = jax.random.uniform(k_act, (n, 2), minval=-1.0, maxval=1.0)
    rewards = -jnp.sum((actions - BEST_ACTION) ** 2, axis=-1)
    return Transitions(
        observations=obs,
        actions=actions,
        rewards=rewards,
        next_observations=obs,
        terminals=jnp.ones((n,)),
        timeouts=jnp.zeros((n,)),
    )
