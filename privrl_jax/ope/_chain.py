"""A small chain MDP that mimics a medical application.

The GPOPE paper's Section 7 setting. Construction. A patient's health is one of S
levels, 0 (critical) .. S-1 (nearly well). Each step the clinician either waits (action
0) or treats (action 1). Health then moves one level up, stays, or moves one level down
with probabilities that depend on the action (treatment makes improvement likelier).
Moving below level 0 is death, moving above level S-1 is discharge; both are absorbing
and end the trajectory (reward -1 and +1 on entering them). Treatment costs
``treatment_cost`` per step (side effects, money). A patient enters at a uniformly
random level; records are cut at ``max_length`` visits (a time-limit cut bootstraps:
discount gamma, not 0). So trajectories have random, unequal lengths, and one trajectory
is one patient: the privacy unit.

Outcomes are indexed 0..S-1 (levels), S (death), S+1 (discharge). Exact values of a
policy come from one linear solve on the S transient levels: V = (I - gamma P_pi)^-1
r_pi. Everything here is pure JAX; :func:`collect` is jitted.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from privrl_jax.ope._gtd2 import TrajectoryData, Transitions


class ChainMDP(NamedTuple):
    """A finite episodic MDP with two absorbing outcomes.

    Attributes:
      transition: [S, A, S + 2] P(outcome | level, action); outcomes S and S+1 are
        terminal.
      reward: [S, A, S + 2] reward of the transition.
      initial: [S] distribution of the first level.
      gamma: [] discount.
    """

    transition: jax.Array
    reward: jax.Array
    initial: jax.Array
    gamma: jax.Array

    @property
    def num_states(self) -> int:
        return self.transition.shape[0]

    @property
    def num_actions(self) -> int:
        return self.transition.shape[1]


def medical_chain(
    num_states: int = 5,
    *,
    gamma: float = 0.9,
    wait_probs: tuple[float, float, float] = (0.25, 0.35, 0.40),
    treat_probs: tuple[float, float, float] = (0.55, 0.25, 0.20),
    treatment_cost: float = 0.1,
    death_reward: float = -1.0,
    discharge_reward: float = 1.0,
) -> ChainMDP:
    """The medical chain described in the module docstring.

    Args:
      num_states: S health levels.
      gamma: discount.
      wait_probs: (up, stay, down) probabilities when waiting (action 0).
      treat_probs: (up, stay, down) probabilities when treating (action 1).
      treatment_cost: reward -cost for every treated step.
      death_reward: reward on entering death (outcome S).
      discharge_reward: reward on entering discharge (outcome S+1).

    Returns:
      The :class:`ChainMDP`, with a uniform initial level.
    """
    s = num_states
    death, discharge = s, s + 1
    transition = jnp.zeros((s, 2, s + 2))
    for a, (up, stay, down) in enumerate((wait_probs, treat_probs)):
        for level in range(s):
            transition = transition.at[
                level, a, discharge if level == s - 1 else level + 1
            ].add(up)
            transition = transition.at[level, a, level].add(stay)
            transition = transition.at[
                level, a, death if level == 0 else level - 1
            ].add(down)
    reward = jnp.zeros((s, 2, s + 2))
    reward = reward.at[:, :, death].set(death_reward)
    reward = reward.at[:, :, discharge].set(discharge_reward)
    reward = reward.at[:, 1, :].add(-treatment_cost)
    return ChainMDP(transition, reward, jnp.full((s,), 1.0 / s), jnp.asarray(gamma))


def exact_values(mdp: ChainMDP, policy: jax.Array) -> jax.Array:
    """V^pi on the S levels by a linear solve: (I - gamma P_pi) V = r_pi.

    Args:
      mdp: the chain.
      policy: [S, A] action probabilities.

    Returns:
      [S] values (terminal outcomes have value 0).
    """
    s = mdp.num_states
    p_pi = jnp.einsum("sa,sat->st", policy, mdp.transition)
    r_pi = jnp.einsum("sa,sat,sat->s", policy, mdp.transition, mdp.reward)
    return jnp.linalg.solve(jnp.eye(s) - mdp.gamma * p_pi[:, :s], r_pi)


def one_hot_features(num_states: int) -> jax.Array:
    """Tabular (one-hot) features of the S levels.

    With them V = theta exactly, and GTD2's A is invertible when every level is visited.

    Args:
      num_states: S, the number of levels.

    Returns:
      [S, S] identity matrix (row s is phi_s).
    """
    return jnp.eye(num_states)


def treatment_policy(treat_probs) -> jax.Array:
    """A policy that treats level s with probability ``treat_probs[s]``.

    Args:
      treat_probs: [S] treatment probabilities.

    Returns:
      [S, 2] action probabilities (wait, treat).
    """
    p = jnp.asarray(treat_probs, jnp.float32)
    return jnp.stack([1.0 - p, p], axis=-1)


class Collected(NamedTuple):
    """Collected trajectories: GTD2 data plus the raw states and actions (for checks).

    Attributes:
      data: :class:`TrajectoryData`, leaves [m, T, ...].
      states: [m, T] int32 level acted in.
      actions: [m, T] int32 action taken.
      next_outcomes: [m, T] int32 outcome reached.
    """

    data: TrajectoryData
    states: jax.Array
    actions: jax.Array
    next_outcomes: jax.Array


@functools.partial(jax.jit, static_argnames=("num_trajectories", "max_length"))
def collect(
    key: jax.Array,
    mdp: ChainMDP,
    behaviour: jax.Array,
    target: jax.Array,
    features: jax.Array,
    *,
    num_trajectories: int,
    max_length: int,
) -> Collected:
    """Collect m trajectories of ``behaviour`` with importance ratios for ``target``.

    Args:
      key: PRNG key.
      mdp: the chain.
      behaviour: [S, A] policy that acts (> 0 wherever ``target`` > 0).
      target: [S, A] policy being evaluated.
      features: [S, n] state features; terminal outcomes get phi = 0 (and discount 0).
      num_trajectories: m, the number of trajectories (patients).
      max_length: T, the padded length (a time-limit cut).

    Returns:
      :class:`Collected` with masks True on each trajectory's real transitions.
    """
    s = mdp.num_states
    phi_all = jnp.concatenate(
        [features, jnp.zeros((2, features.shape[1]), features.dtype)]
    )

    def one(key):
        k0, key = jax.random.split(key)
        state0 = jax.random.choice(k0, s, p=mdp.initial)

        def step(carry, key):
            state, alive = carry
            ka, ks = jax.random.split(key)
            action = jax.random.choice(ka, mdp.num_actions, p=behaviour[state])
            outcome = jax.random.choice(ks, s + 2, p=mdp.transition[state, action])
            terminal = outcome >= s
            out = (
                Transitions(
                    phi_tm1=phi_all[state],
                    r_t=mdp.reward[state, action, outcome],
                    discount_t=mdp.gamma * (1.0 - terminal),
                    phi_t=phi_all[outcome],
                    rho_tm1=target[state, action] / behaviour[state, action],
                ),
                alive,
                state,
                action,
                outcome,
            )
            # After termination the state is frozen and every later row is masked out.
            return (jnp.where(terminal, state, outcome), alive & ~terminal), out

        _, (tr, mask, states, actions, outcomes) = jax.lax.scan(
            step, (state0, jnp.asarray(True)), jax.random.split(key, max_length)
        )
        return tr, mask, states, actions, outcomes

    tr, mask, states, actions, outcomes = jax.vmap(one)(
        jax.random.split(key, num_trajectories)
    )
    return Collected(TrajectoryData(tr, mask), states, actions, outcomes)
