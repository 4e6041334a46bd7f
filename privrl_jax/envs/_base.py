"""The environment API: gymnax's `reset` / `step`, with the classic 5-tuple `step`.

Every env has `reset(key, params)` and `step(key, state, action, params)`. The
installed gymnax (>= 1.0) returns a 6-tuple from `step` (terminated and truncated
separately). privrl_jax keeps the classic 5-tuple `(obs, state, reward, done, info)`
with `done = terminated | truncated` and both flags in `info`, which is what D4RL-style
data needs (`terminals` vs `timeouts`). `GymnaxAdapter` gives gymnax's own environments
the same API, so every env returned by `privrl_jax.envs.make` is stepped the same way.

Everything here runs in JAX: `step` and `reset` are pure, jittable and vmappable.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

TEnvState = TypeVar("TEnvState")
TEnvParams = TypeVar("TEnvParams")

StepResult = tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, jax.Array]]


@struct.dataclass
class EnvState:
    """Base environment state: `time` counts steps since the last reset."""

    time: jax.Array


@struct.dataclass
class EnvParams:
    """Base environment constants; subclasses add their own fields."""

    max_steps_in_episode: int = 1


class Environment(Generic[TEnvState, TEnvParams]):
    """Abstract base class of privrl_jax environments (gymnax's design, 5-tuple step).

    Subclasses implement `reset_env`, `step_env`, `observation_space` and
    `action_space`. `step` adds time-limit truncation and gymnax-style auto-reset.
    """

    @property
    def default_params(self) -> TEnvParams:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return type(self).__name__

    @partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: TEnvParams) -> tuple[jax.Array, TEnvState]:
        """Samples an initial state.

        Args:
          key: PRNG key.
          params: environment constants.

        Returns:
          `(obs, state)`.
        """
        return self.reset_env(key, params)

    @partial(jax.jit, static_argnames=("self",))
    def step(
        self,
        key: jax.Array,
        state: TEnvState,
        action: jax.Array,
        params: TEnvParams,
    ) -> StepResult:
        """One transition, with auto-reset when the episode ends.

        Args:
          key: PRNG key (split into a step key and a reset key).
          state: current state.
          action: the action.
          params: environment constants.

        Returns:
          `(obs, state, reward, done, info)`. When `done`, `obs` and `state` are those
          of a fresh episode (as in gymnax) and `info["final_observation"]` holds the
          last observation of the finished one. `info` also has boolean `terminated` (a
          terminal state: D4RL's `terminals`) and `truncated` (the time limit: D4RL's
          `timeouts`).
        """
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, info = self.step_env(
            key_step, state, action, params
        )
        truncated = jnp.logical_and(
            jnp.logical_not(terminated), state_st.time >= params.max_steps_in_episode
        )
        done = jnp.logical_or(terminated, truncated)
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(
            lambda r, s: jax.lax.select(done, r, s), state_re, state_st
        )
        obs = jax.lax.select(done, obs_re, obs_st)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return obs, state, reward, done, info

    def reset_env(
        self, key: jax.Array, params: TEnvParams
    ) -> tuple[jax.Array, TEnvState]:
        """Environment-specific reset."""
        raise NotImplementedError

    def step_env(
        self, key: jax.Array, state: TEnvState, action: jax.Array, params: TEnvParams
    ) -> tuple[jax.Array, TEnvState, jax.Array, jax.Array, dict[str, jax.Array]]:
        """Environment-specific transition without time limit or reset.

        Returns:
          `(obs, state, reward, terminated, info)`; `state.time` must be incremented.
        """
        raise NotImplementedError

    def observation_space(self, params: TEnvParams) -> spaces.Box:
        raise NotImplementedError

    def action_space(self, params: TEnvParams) -> spaces.Space:
        raise NotImplementedError


class GymnaxAdapter(Environment[Any, Any]):
    """Gives a gymnax environment privrl_jax's 5-tuple `step`.

    Args:
      env: a `gymnax.environments.environment.Environment`.
    """

    def __init__(self, env: Any):
        self._env = env

    @property
    def unwrapped(self) -> Any:
        return self._env

    @property
    def name(self) -> str:
        return self._env.name

    @property
    def default_params(self) -> Any:
        return self._env.default_params

    @partial(jax.jit, static_argnames=("self",))
    def reset(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        return self._env.reset(key, params)

    @partial(jax.jit, static_argnames=("self",))
    def step(
        self, key: jax.Array, state: Any, action: jax.Array, params: Any
    ) -> StepResult:
        obs, state, reward, terminated, truncated, info = self._env.step(
            key, state, action, params
        )
        terminated = jnp.asarray(terminated, bool)
        truncated = jnp.logical_and(jnp.asarray(truncated, bool), ~terminated)
        info = {**info, "terminated": terminated, "truncated": truncated}
        return obs, state, reward, jnp.logical_or(terminated, truncated), info

    def observation_space(self, params: Any) -> Any:
        return self._env.observation_space(params)

    def action_space(self, params: Any) -> Any:
        return self._env.action_space(params)
