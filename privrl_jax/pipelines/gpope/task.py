"""GPOPE's task: what a run knows before it reads a sensitive trajectory.

:func:`build_task` builds it once from the config (the chain MDP or the continuous env,
the behaviour and target policies, the features and the public evaluation states) and
the run passes it down, so nothing is cached at module level and no device array
outlives its run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import envs, ope
from privrl_jax.pipelines._gpope_config import GPOPERunConfig


@dataclasses.dataclass(frozen=True, eq=False)
class GPOPETask:
    """The public side of one GPOPE configuration.

    Attributes:
      cfg: the run's config.
      behaviour: the behaviour policy that (notionally) collected the data.
      target: the policy whose value is estimated.
      features: ``[S, n]`` one-hot features (chain) or a feature map ``obs -> phi``
        (continuous).
      mdp: the chain MDP (chain only; the audit's exact values come from it).
      env, env_params: the continuous env and its parameters (Mountain Car, HIV).
      eval_obs, eval_states: the public evaluation states (continuous envs), drawn from
        the env's start distribution and the target policy with a public seed, never
        from the data, so the release plot may use them.
    """

    cfg: GPOPERunConfig
    behaviour: Any
    target: Any
    features: Any
    mdp: ope.ChainMDP | None = None
    env: Any = None
    env_params: Any = None
    eval_obs: jax.Array | None = None
    eval_states: Any = None

    @property
    def chain(self) -> bool:
        """Whether the env is the medical chain MDP (exact values from its model)."""
        return self.mdp is not None


def build_task(cfg: GPOPERunConfig) -> GPOPETask:
    """The task of ``cfg``: public inputs only.

    The model, policies, features, evaluation states.
    """
    e = cfg.env
    if e.name == "chain":
        mdp = ope.medical_chain(
            e.num_states, gamma=e.gamma, treatment_cost=e.treatment_cost
        )
        return GPOPETask(
            cfg,
            behaviour=ope.treatment_policy(cfg.treat_probs("behaviour_treat")),
            target=ope.treatment_policy(cfg.treat_probs("target_treat")),
            features=ope.one_hot_features(e.num_states),
            mdp=mdp,
        )
    if e.name == "mountain_car":
        env, params = envs.mountain_car(max_steps_in_episode=e.max_length)
        greedy, num_actions = envs.energy_pumping_action, envs.MOUNTAIN_CAR_NUM_ACTIONS
        features = ope.mountain_car_features(e.tiles_per_dim, e.num_tilings)
    else:
        env = envs.HIVTreatment()
        params = env.default_params.replace(
            init_log10_spread=e.hiv_init_log10_spread, max_steps_in_episode=e.max_length
        )
        greedy, num_actions = envs.ViralLoadRule(e.hiv_threshold_log10), env.num_actions
        features = ope.hiv_features(e.tiles_per_dim, e.num_tilings)
    target = ope.EpsilonSoft(greedy, e.target_epsilon, num_actions)
    t = cfg.truth
    # Public seed distinct from the data's (fold_in 0).
    obs, states = ope.evaluation_states(
        jax.random.fold_in(jax.random.key(cfg.seed), 1),
        env,
        params,
        num_states=t.eval_states,
        policy=target,
        max_steps=t.eval_max_steps,
    )
    return GPOPETask(
        cfg,
        behaviour=ope.EpsilonSoft(greedy, e.behaviour_epsilon, num_actions),
        target=target,
        features=features,
        env=env,
        env_params=params,
        eval_obs=obs,
        eval_states=states,
    )


def features_name(cfg: GPOPERunConfig) -> str:
    """The release's description of its feature map."""
    e = cfg.env
    if e.name == "chain":
        return f"one_hot({e.num_states})"
    layout = (
        "2-D (position, velocity)"
        if e.name == "mountain_car"
        else "1-D per log10 state"
    )
    return (
        f"tile coding {layout}: {e.num_tilings} tilings x {e.tiles_per_dim} tiles, "
        "plus a "
        "constant, unit norm (privrl_jax.ope._features)"
    )


def collect_data(task: GPOPETask) -> ope.TrajectoryData:
    """The simulated sensitive data: m trajectories of the behaviour policy.

    Drawn from a public seed (a real data holder loads its records instead).
    """
    cfg = task.cfg
    e = cfg.env
    key = jax.random.fold_in(jax.random.key(cfg.seed), 0)
    if task.chain:
        return ope.collect(
            key,
            task.mdp,
            task.behaviour,
            task.target,
            task.features,
            num_trajectories=e.num_trajectories,
            max_length=e.max_length,
        ).data
    return ope.collect_offpolicy(
        key,
        task.env,
        task.env_params,
        task.behaviour,
        task.target,
        task.features,
        gamma=e.gamma,
        reward_scale=e.reward_scale,
        num_trajectories=e.num_trajectories,
        max_length=e.max_length,
    ).data


def dataset_id(cfg: GPOPERunConfig) -> str:
    """Names the sensitive data by their source, never by a hash of their contents."""
    e = cfg.env
    if e.name == "chain":
        behaviour = list(cfg.treat_probs("behaviour_treat"))
        return (
            f"collected:medical_chain:S={e.num_states}:seed={cfg.seed}:"
            f"m={e.num_trajectories}:T={e.max_length}:behaviour={behaviour}"
        )
    return (
        f"collected:{e.name}:seed={cfg.seed}:m={e.num_trajectories}:T={e.max_length}:"
        f"behaviour_epsilon={e.behaviour_epsilon}"
    )


def true_values(task: GPOPETask) -> tuple[jax.Array, ope.MCValues]:
    """Features [K, n] of the public evaluation states and their Monte Carlo V^pi.

    For the continuous envs.
    """
    cfg = task.cfg
    e, t = cfg.env, cfg.truth
    mc = ope.mc_values(
        jax.random.fold_in(jax.random.key(cfg.seed), 2),
        task.env,
        task.env_params,
        task.target,
        task.eval_obs,
        task.eval_states,
        gamma=e.gamma,
        reward_scale=e.reward_scale,
        horizon=t.horizon,
        num_rollouts=t.rollouts,
    )
    return jax.vmap(task.features)(task.eval_obs), mc


def lstd_min_norm(data: ope.TrajectoryData, normalization: str) -> jax.Array:
    """Off-policy LSTD theta of the data: the minimum-norm solution of A theta = b.

    The minimum-norm least-squares solution: tiles the data never visit leave A
    singular; they get 0.
    """
    stats = ope.pooled_stats(data, normalization)
    return jnp.linalg.lstsq(stats.a, stats.b)[0]


def release_values(task: GPOPETask, theta: np.ndarray) -> np.ndarray:
    """The values ``values.png`` shows.

    theta . phi(s) at every chain state, or sorted ascending over the public evaluation
    states (Mountain Car, HIV). Public inputs only: the DP theta, the features and
    states from public seeds.
    """
    theta = jnp.asarray(theta)
    if task.chain:
        return np.asarray(task.features @ theta)
    return np.sort(np.asarray(jax.vmap(task.features)(task.eval_obs) @ theta))
