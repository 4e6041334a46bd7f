"""Vmapped, jitted episode returns of a policy in any privrl_jax environment."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from privrl_jax.envs._base import Environment

# policy(key, obs) -> action, for one (unbatched) observation.
Policy = Callable[[jax.Array, jax.Array], jax.Array]


@partial(jax.jit, static_argnames=("env", "policy", "num_episodes", "num_steps"))
def episode_returns(
    key: jax.Array,
    env: Environment,
    params: Any,
    policy: Policy,
    num_episodes: int,
    num_steps: int,
) -> jax.Array:
    """Undiscounted returns of `num_episodes` independent episodes, run in parallel.

    Each episode runs `num_steps` steps (`lax.scan`); rewards count until its first
    `done` (the env auto-resets after it, and later rewards are ignored). For the mazes
    use `num_steps = params.max_steps_in_episode`, which is where `done` fires.

    Args:
      key: PRNG key.
      env: environment with the 5-tuple `step`.
      params: its constants.
      policy: `policy(key, obs) -> action` for one observation (static: pass the same
        function object to avoid recompiles).
      num_episodes: episodes (static).
      num_steps: steps per episode (static).

    Returns:
      [num_episodes] float32 returns.
    """

    def one_episode(k: jax.Array) -> jax.Array:
        key_reset, key_steps = jax.random.split(k)
        obs, state = env.reset(key_reset, params)

        def body(carry, k_t):
            obs, state, ret, alive = carry
            key_act, key_step = jax.random.split(k_t)
            action = policy(key_act, obs)
            obs, state, reward, done, _ = env.step(key_step, state, action, params)
            ret = ret + jnp.where(alive, reward, 0.0)
            return (obs, state, ret, alive & ~done), None

        init = (obs, state, jnp.float32(0.0), jnp.bool_(True))
        (_, _, ret, _), _ = jax.lax.scan(
            body, init, jax.random.split(key_steps, num_steps)
        )
        return ret

    return jax.vmap(one_episode)(jax.random.split(key, num_episodes))
