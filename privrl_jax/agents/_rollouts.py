"""Evaluation: vmapped, jitted rollouts of a deterministic policy in a gymnax-API env.

Runs in JAX. Every episode starts from `env.reset(key, params)` and runs for
`num_steps` steps in one `lax.scan`; rewards are summed until the first step
whose `done` is true (inclusive), later steps (gymnax auto-resets) are masked out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

PolicyFn = Callable[[Any, jax.Array], jax.Array]


def unpack_step(out: tuple) -> tuple[jax.Array, Any, jax.Array, jax.Array]:
    """Returns (obs, state, reward, done) from a gymnax step's output.

    The step returns a 5-tuple (done) or, in gymnax >= 1.0, a 6-tuple (terminated,
    truncated), whose done is their logical or.
    """
    if len(out) == 6:
        obs, state, reward, terminated, truncated, _ = out
        return obs, state, reward, jnp.logical_or(terminated, truncated)
    obs, state, reward, done, _ = out
    return obs, state, reward, done


def episode_length(env: Any, env_params: Any) -> int:
    """The env's time limit, `env_params.max_steps_in_episode` (gymnax convention)."""
    steps = getattr(env_params, "max_steps_in_episode", None)
    if steps is None:
        raise ValueError(
            "env_params has no max_steps_in_episode; pass num_steps explicitly"
        )
    return int(steps)


@functools.partial(jax.jit, static_argnames=("act", "env", "num_episodes", "num_steps"))
def rollout_returns(
    key: jax.Array,
    agent_state: Any,
    *,
    act: PolicyFn,
    env: Any,
    env_params: Any,
    num_episodes: int,
    num_steps: int,
) -> jax.Array:
    """Undiscounted returns of `num_episodes` independent episodes.

    Args:
      key: PRNG key; episode i uses `jax.random.split(key, num_episodes)[i]`,
        split into a reset key and one key per step.
      agent_state: the policy's parameters (e.g. an agent train state); traced,
        so evaluating a new state does not recompile.
      act: `act(agent_state, obs [obs_dim]) -> action [act_dim]`, deterministic.
      env: a gymnax-API environment (hashable, static).
      env_params: its parameters.
      num_episodes: number of episodes, vmapped.
      num_steps: steps per episode (the env's time limit).

    Returns:
      [num_episodes] float32 returns.
    """

    def episode(key):
        k_reset, k_steps = jax.random.split(key)
        obs, env_state = env.reset(k_reset, env_params)

        def body(carry, k):
            obs, env_state, ret, alive = carry
            action = act(agent_state, obs)
            obs, env_state, reward, done = unpack_step(
                env.step(k, env_state, action, env_params)
            )
            ret = ret + alive * jnp.asarray(reward, jnp.float32).reshape(())
            alive = alive * (1.0 - jnp.asarray(done, jnp.float32).reshape(()))
            return (obs, env_state, ret, alive), None

        init = (obs, env_state, jnp.zeros(()), jnp.ones(()))
        (_, _, ret, _), _ = jax.lax.scan(
            body, init, jax.random.split(k_steps, num_steps)
        )
        return ret

    return jax.vmap(episode)(jax.random.split(key, num_episodes))


def evaluate(
    key: jax.Array,
    agent_state: Any,
    *,
    act: PolicyFn,
    env: Any,
    env_params: Any,
    num_episodes: int = 100,
    num_steps: int | None = None,
    env_name: str | None = None,
) -> dict[str, Any]:
    """Evaluates a deterministic policy; raw and (for known tasks) normalised returns.

    Args:
      key: PRNG key.
      agent_state: the policy's parameters.
      act: `act(agent_state, obs) -> action`.
      env: gymnax-API environment.
      env_params: its parameters.
      num_episodes: episodes to average over.
      num_steps: steps per episode; the env's `max_steps_in_episode` when None.
      env_name: registry name; when it has reference returns
        (`privrl_jax.envs.normalized_score`), normalised scores are added.

    Returns:
      {"returns": [num_episodes] np.ndarray, "return_mean", "return_std"} and, for
      tasks with reference returns, {"scores", "score_mean", "score_std"}
      (100 * (R - R_random) / (R_expert - R_random)).
    """
    if not (isinstance(num_episodes, int) and num_episodes > 0):
        raise ValueError(f"num_episodes={num_episodes!r}: expected a positive int")
    if num_steps is None:
        num_steps = episode_length(env, env_params)
    returns = np.asarray(
        rollout_returns(
            key,
            agent_state,
            act=act,
            env=env,
            env_params=env_params,
            num_episodes=num_episodes,
            num_steps=int(num_steps),
        )
    )
    out: dict[str, Any] = {
        "returns": returns,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
    }
    scores = _normalized(env_name, returns)
    if scores is not None:
        out.update(
            scores=scores,
            score_mean=float(scores.mean()),
            score_std=float(scores.std()),
        )
    return out


def _normalized(env_name: str | None, returns: np.ndarray) -> np.ndarray | None:
    """Normalised scores, or None when the env has no reference returns."""
    if env_name is None:
        return None
    from privrl_jax import envs  # a lower layer; lazy to keep the import light

    score_fn = getattr(envs, "normalized_score", None)
    if score_fn is None:
        return None
    try:
        return np.asarray(score_fn(env_name, returns), dtype=np.float64)
    except ValueError:  # no reference returns for this env (e.g. gymnax's own)
        return None
