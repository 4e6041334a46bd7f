"""Off-policy data and Monte Carlo true values for continuous environments.

Data. :func:`collect_offpolicy` runs m episodes of a stochastic behaviour policy in any
environment with the gymnax ``reset_env(key, params)`` / ``step_env(key, state, action,
params) -> (obs, state, reward, done, info)`` methods (gymnax's own envs and
privrl_jax's; auto-reset is bypassed: one row per real step), and writes the same padded
layout as the chain MDP's :func:`~._chain.collect`: :class:`~._gtd2.TrajectoryData` with
leaves ``[m, T, ...]``, a mask True on each trajectory's real transitions, ``discount_t
= gamma`` except 0 on termination (a cut at the padded length T bootstraps), ``phi_t =
0`` after termination, and the importance ratio ``rho = pi(a|s) / pi_b(a|s)`` of the
action taken, from the two policies' probability vectors (per step, as GTD2 uses it;
never a product over steps).

True values. There is no model to solve on a continuous state space, so V^pi comes from
Monte Carlo: :func:`mc_values` rolls the target policy out ``num_rollouts`` times from
each of K fixed evaluation states for ``horizon`` steps (no time limit: the
infinite-horizon discounted value that TD's fixed point targets, truncated where
gamma^horizon is negligible) and averages the discounted returns, vmapped over states
and rollouts in one jit. It returns the standard error of each mean too, so the MC noise
can be compared with the errors it is used to measure.

The metric (:func:`value_mse` of :mod:`._gpope`, which the experiments report): the mean
over the K evaluation states of ``(theta . phi(s_k) - V_MC(s_k))^2``, the evaluation
states drawn from the environment's initial-state distribution with a public seed that
is not the data's (:func:`evaluation_states`). It includes the features' approximation
error, so the best reachable value is the MSE of the off-policy LSTD solution of a large
data set (reported next to it as the floor); the MC standard errors add about mean(se^2)
to it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from privrl_jax.ope._gtd2 import GTD2Stats, TrajectoryData, Transitions, item_weights

Policy = Callable[[jax.Array], jax.Array]  # obs -> [A] action probabilities
Features = Callable[[jax.Array], jax.Array]  # obs -> [n]


class ContinuousCollected(NamedTuple):
    """Collected trajectories: GTD2 data plus raw observations, actions and rewards.

    Attributes:
      data: :class:`TrajectoryData`, leaves [m, T, ...].
      observations: [m, T, obs_dim] the observation acted on.
      actions: [m, T] int32.
      rewards: [m, T] scaled rewards.
    """

    data: TrajectoryData
    observations: jax.Array
    actions: jax.Array
    rewards: jax.Array


def importance_ratio(
    target_probs: jax.Array, behaviour_probs: jax.Array, action: jax.Array
) -> jax.Array:
    """The importance ratio pi(a|s) / pi_b(a|s) from two [A] probability vectors."""
    return target_probs[action] / behaviour_probs[action]


@functools.partial(
    jax.jit,
    static_argnames=(
        "env",
        "behaviour",
        "target",
        "features",
        "num_trajectories",
        "max_length",
    ),
)
def collect_offpolicy(
    key: jax.Array,
    env: Any,
    params: Any,
    behaviour: Policy,
    target: Policy,
    features: Features,
    *,
    gamma: float | jax.Array,
    reward_scale: float | jax.Array = 1.0,
    num_trajectories: int,
    max_length: int,
) -> ContinuousCollected:
    """Collect m episodes of ``behaviour`` with importance ratios for ``target``.

    Args:
      key: PRNG key (public in simulation; a data holder loads its records instead).
      env: a gymnax-style environment (static).
      params: the environment's parameters.
      behaviour: ``obs -> [A]`` probabilities of the policy that acts (static; > 0
        wherever ``target`` is).
      target: ``obs -> [A]`` probabilities of the policy being evaluated (static).
      features: ``obs -> [n]`` (static).
      gamma: discount.
      reward_scale: multiplies every reward (a public unit change).
      num_trajectories: m, the number of episodes (one episode is one privacy unit).
      max_length: T, the padded length (a time-limit cut).

    Returns:
      :class:`ContinuousCollected`, masks True on each episode's real transitions.
    """

    def one(key):
        k0, key = jax.random.split(key)
        obs0, state0 = env.reset_env(k0, params)

        def step(carry, key):
            obs, state, alive = carry
            ka, ks = jax.random.split(key)
            probs_b = behaviour(obs)
            action = jax.random.choice(ka, probs_b.shape[-1], p=probs_b)
            next_obs, next_state, reward, done, _ = env.step_env(
                ks, state, action, params
            )
            done = jnp.asarray(done, bool)
            phi_t = jnp.where(done, 0.0, features(next_obs))
            reward = reward_scale * jnp.asarray(reward, jnp.float32)
            row = Transitions(
                phi_tm1=features(obs),
                r_t=reward,
                discount_t=gamma * (1.0 - done.astype(jnp.float32)),
                phi_t=phi_t,
                rho_tm1=importance_ratio(target(obs), probs_b, action),
            )
            # After termination the rows are masked out; the env keeps stepping
            # harmlessly.
            return (next_obs, next_state, alive & ~done), (
                row,
                alive,
                obs,
                action,
                reward,
            )

        _, (rows, mask, obs, actions, rewards) = jax.lax.scan(
            step, (obs0, state0, jnp.asarray(True)), jax.random.split(key, max_length)
        )
        return rows, mask, obs, actions, rewards

    rows, mask, obs, actions, rewards = jax.vmap(one)(
        jax.random.split(key, num_trajectories)
    )
    return ContinuousCollected(TrajectoryData(rows, mask), obs, actions, rewards)


@functools.partial(
    jax.jit, static_argnames=("env", "num_states", "policy", "max_steps")
)
def evaluation_states(
    key: jax.Array,
    env: Any,
    params: Any,
    *,
    num_states: int,
    policy: Policy | None = None,
    max_steps: int = 0,
):
    """Draw K evaluation states from the env's initial-state distribution.

    Each starts from the env's initial-state distribution; with a ``policy`` and
    ``max_steps`` > 0 it is then rolled forward under that policy for a uniformly random
    number of steps in [0, max_steps) (frozen at the last state before a termination):
    a sample of the states the policy visits, not only of its start states (on Mountain
    Car the start states all have nearly the same value, so an MSE over them would
    measure little but the mean level).

    Args:
      key: PRNG key (a public seed, not the data's).
      env: a gymnax-style environment (static).
      params: the environment's parameters.
      num_states: K, the number of states.
      policy: ``obs -> [A]`` probabilities to roll forward with (static), or None.
      max_steps: roll each state forward for a uniform number of steps in
        [0, max_steps); 0 keeps the start states.

    Returns:
      ``(obs [K, obs_dim], states)``: the observations and the env states (leaves with
      a leading K axis).
    """
    k_reset, k_len, k_roll = jax.random.split(key, 3)
    obs, states = jax.vmap(env.reset_env, in_axes=(0, None))(
        jax.random.split(k_reset, num_states), params
    )
    if policy is None or max_steps == 0:
        return obs, states
    lengths = jax.random.randint(k_len, (num_states,), 0, max_steps)

    def advance(key, obs, state, length):
        def step(carry, xs):
            obs, state = carry
            t, key = xs
            ka, ks = jax.random.split(key)
            probs = policy(obs)
            action = jax.random.choice(ka, probs.shape[-1], p=probs)
            new_obs, new_state, _, done, _ = env.step_env(ks, state, action, params)
            keep = (t < length) & ~jnp.asarray(done, bool)
            carry = jax.tree_util.tree_map(
                lambda n, o: jnp.where(keep, n, o), (new_obs, new_state), (obs, state)
            )
            return carry, None

        xs = (jnp.arange(max_steps), jax.random.split(key, max_steps))
        (obs, state), _ = jax.lax.scan(step, (obs, state), xs)
        return obs, state

    return jax.vmap(advance)(jax.random.split(k_roll, num_states), obs, states, lengths)


def pooled_stats(data: TrajectoryData, normalization: str = "horizon") -> GTD2Stats:
    """:func:`~._gtd2.dataset_stats` without per-transition n x n matrices.

    The same A, b, C (mean over trajectories of the weighted per-trajectory sums), as
    three contractions over all transitions: memory O(m T n + n^2) instead of
    O(m T n^2), which tile-coded features (n ~ 10^3) need. Non-private.

    Args:
      data: m trajectories, leaves ``[m, T, ...]``.
      normalization: ``"horizon"`` (sum / T) or ``"mean"`` (sum / tau_i).

    Returns:
      ``GTD2Stats`` with ``a, c: [n, n]``, ``b: [n]``.

    Raises:
      ValueError: if ``normalization`` is not one of the two.
    """
    tr = data.transitions
    weights = item_weights(data.mask, normalization) / data.mask.shape[0]
    weights = jnp.where(data.mask, weights, 0.0)
    phi = jnp.where(data.mask[..., None], tr.phi_tm1, 0.0)
    td_features = phi - tr.discount_t[..., None] * jnp.where(
        data.mask[..., None], tr.phi_t, 0.0
    )
    w_rho = weights * jnp.where(data.mask, tr.rho_tm1, 0.0)
    return GTD2Stats(
        a=jnp.einsum("mt,mti,mtj->ij", w_rho, phi, td_features),
        b=jnp.einsum("mt,mti->i", w_rho * jnp.where(data.mask, tr.r_t, 0.0), phi),
        c=jnp.einsum("mt,mti,mtj->ij", weights, phi, phi),
    )


class MCValues(NamedTuple):
    """Monte Carlo values at K states.

    Attributes:
      values: [K] mean discounted return of the target policy from each state.
      stderr: [K] standard error of each mean (std / sqrt(rollouts)).
    """

    values: jax.Array
    stderr: jax.Array


@functools.partial(
    jax.jit, static_argnames=("env", "policy", "horizon", "num_rollouts")
)
def mc_values(
    key: jax.Array,
    env: Any,
    params: Any,
    policy: Policy,
    obs: jax.Array,
    states: Any,
    *,
    gamma: float | jax.Array,
    reward_scale: float | jax.Array = 1.0,
    horizon: int,
    num_rollouts: int,
) -> MCValues:
    """V^pi at K states by ``num_rollouts`` rollouts of ``horizon`` steps each.

    Args:
      key: PRNG key.
      env: a gymnax-style environment (static); the rollouts ignore
        ``max_steps_in_episode`` (no time limit) and stop only at termination.
      params: the environment's parameters.
      policy: ``obs -> [A]`` probabilities (static).
      obs: [K, obs_dim] start observations (e.g. from :func:`evaluation_states`).
      states: the K matching env states (leaves with a leading K axis).
      gamma: discount.
      reward_scale: multiplies every reward, as in :func:`collect_offpolicy`.
      horizon: steps per rollout; choose gamma^horizon * max|r| / (1 - gamma)
        negligible.
      num_rollouts: rollouts per state.

    Returns:
      :class:`MCValues`.
    """

    def rollout(key, obs, state):
        def step(carry, key):
            obs, state, alive, ret, disc = carry
            ka, ks = jax.random.split(key)
            probs = policy(obs)
            action = jax.random.choice(ka, probs.shape[-1], p=probs)
            obs, state, reward, done, _ = env.step_env(ks, state, action, params)
            ret = ret + jnp.where(alive, disc * reward_scale * reward, 0.0)
            alive = alive & ~jnp.asarray(done, bool)
            return (obs, state, alive, ret, disc * gamma), None

        init = (obs, state, jnp.asarray(True), jnp.zeros(()), jnp.ones(()))
        (_, _, _, ret, _), _ = jax.lax.scan(step, init, jax.random.split(key, horizon))
        return ret

    num_states = obs.shape[0]
    keys = jax.random.split(key, (num_states, num_rollouts))
    returns = jax.vmap(
        lambda ks, o, s: jax.vmap(rollout, in_axes=(0, None, None))(ks, o, s)
    )(keys, obs, states)
    std = (
        jnp.std(returns, axis=1, ddof=1) if num_rollouts > 1 else jnp.zeros(num_states)
    )
    return MCValues(jnp.mean(returns, axis=1), std / jnp.sqrt(num_rollouts))
