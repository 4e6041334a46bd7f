"""Helpers for the agent tests: a tiny one-step bandit with a known best action."""

import jax
import jax.numpy as jnp

from privrl_jax.data import Transitions

BEST_ACTION = jnp.array([0.5, -0.3])
TINY = {"hidden_dims": (32, 32)}


def bandit_dataset(key: jax.Array, n: int = 2048) -> Transitions:
    """One-step bandit: reward -||a - a*||^2, every transition terminal.

    Observations are N(0, I_2) noise (irrelevant to the reward), so the optimal
    policy is the constant a* = (0.5, -0.3). Actions are half uniform on [-1, 1]^2 and
    half N(a*, 0.3^2) clipped, so the data covers the action box and the
    behaviour-cloning target (the data mean) is biased towards 0.
    """
    k_obs, k_uni, k_near, k_mix = jax.random.split(key, 4)
    obs = jax.random.normal(k_obs, (n, 2))
    uniform = jax.random.uniform(k_uni, (n, 2), minval=-1.0, maxval=1.0)
    near = jnp.clip(BEST_ACTION + 0.3 * jax.random.normal(k_near, (n, 2)), -1.0, 1.0)
    actions = jnp.where(jax.random.bernoulli(k_mix, 0.5, (n, 1)), uniform, near)
    rewards = -jnp.sum((actions - BEST_ACTION) ** 2, axis=-1)
    return Transitions(
        observations=obs,
        actions=actions,
        rewards=rewards,
        next_observations=obs,
        terminals=jnp.ones((n,)),
        timeouts=jnp.zeros((n,)),
    )
