"""The OPE comparison's data and truth: the medical chain or on-policy Mountain Car.

A :class:`Setting` is what one cell's methods share: the baselines' state features
(one row per discrete state), the evaluation states' features and true values (the
metric), the trajectories (GPOPE's data and the score's), the first visits (DP-LSW /
DP-LSL's data), the state weighting rho and the data's LSTD theta (the audit's floor).

Mountain Car (GPOPE Sec. 6's second on-policy task; the paper gives no more of it, so
every choice is ours): ``configs/gpope/mountain_car.yaml``'s task made on-policy (the
data from the target policy) with trajectories of T = ``max_length`` (200, gym's own
time limit: first-visit Monte Carlo needs whole episodes); the baselines' finite states
are the cells of ``ope.GridDiscretiser.of_tiles`` (6 x 6 over gym's declared box, public
bounds only), on which the tile features are constant, so all methods estimate the same
linear value class; the metric is the MSE against the Monte Carlo V^pi at the config's
64 public evaluation states. rho is uniform over the cells, or "occupancy": half
uniform, half the cell histogram of 4096 public simulated states (another public seed).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from privrl_jax import ope
from privrl_jax.pipelines import gpope
from privrl_jax.pipelines._ope_tuning_config import OPETuningConfig

NUM_STATES, GAMMA = 5, 0.9
TARGET_TREAT = (0.9, 0.8, 0.6, 0.4, 0.2)
MOUNTAIN_CAR = "gpope/mountain_car"
OCCUPANCY_STATES = 4096
# The data key of trial `seed` (fold_in(key(DATA_ROOT), seed)): the legacy comparison's.
DATA_ROOT = 1000


class Setting(NamedTuple):
    """One cell's shared inputs (module doc)."""

    cell_phi: jax.Array  # [S, n] features of the baselines' discrete states
    eval_phi: jax.Array  # [K, n] features of the evaluation states
    values: jax.Array  # [K] true V^pi there (exact on the chain, Monte Carlo else)
    data: ope.TrajectoryData
    visits: Any  # the first visits (DP-LSW / DP-LSL's data)
    rho: jax.Array  # [S] the baselines' state weighting
    lstd: jax.Array  # [n] the data's LSTD theta (NOT DP; the audit's floor)


def setting(cfg: OPETuningConfig) -> Setting:
    """The shared inputs of ``cfg``'s cell (its env, data seed and rho).

    Args:
      cfg: the cell's config.

    Returns:
      The :class:`Setting`.
    """
    if cfg.env == "mountain_car":
        rhos, *shared = _mountain_car_data(
            cfg.seed, cfg.num_trajectories, cfg.max_length
        )
        cell_phi, eval_phi, values, data, visits, lstd = shared
        return Setting(cell_phi, eval_phi, values, data, visits, rhos[cfg.rho], lstd)
    return _chain(cfg)


def _chain(cfg: OPETuningConfig) -> Setting:
    mdp = ope.medical_chain(NUM_STATES, gamma=GAMMA)
    pi = ope.treatment_policy(TARGET_TREAT)
    phi = ope.one_hot_features(NUM_STATES)
    col = ope.collect(
        jax.random.key(cfg.seed),
        mdp,
        pi,
        pi,
        phi,
        num_trajectories=cfg.num_trajectories,
        max_length=cfg.max_length,
    )
    visits = ope.first_visits(
        col.states, col.data.transitions.r_t, col.data.mask, GAMMA, NUM_STATES
    )
    lstd = ope.lstd_solution(ope.dataset_stats(col.data))[0]
    rho = jnp.full(NUM_STATES, 1.0 / NUM_STATES)
    return Setting(phi, phi, ope.exact_values(mdp, pi), col.data, visits, rho, lstd)


def mountain_car_config(m: int, max_length: int) -> gpope.GPOPERunConfig:
    """The GPOPE pipeline's Mountain Car config, made on-policy with T = ``max_length``.

    Args:
      m: the number of trajectories.
      max_length: T, the steps kept of each episode.

    Returns:
      The config (its task gives the policies, features and evaluation states).
    """
    target = gpope.load(MOUNTAIN_CAR).env.target_epsilon
    return gpope.load(
        MOUNTAIN_CAR,
        [
            f"env.max_length={max_length}",
            f"env.behaviour_epsilon={target}",
            f"env.num_trajectories={m}",
            # Only the task is read (GPOPE's plan is ope_tuning's): a sampler that
            # accepts any m.
            "gpope.sampler=uniform_one",
        ],
    )


# Cached per process: the cells of a few data seeds (every method and epsilon) share
# their collections (about 60 MB each at m = 1000, T = 200), and every cell shares the
# truth (the experiment runner's lanes run cells
# one after another in a process).
@functools.lru_cache(maxsize=2)
def _mountain_car_public(m: int, max_length: int):
    cfg = mountain_car_config(m, max_length)
    task = gpope.build_task(cfg)
    grid = ope.GridDiscretiser.of_tiles(task.features.coders[0])
    cell_phi = jax.vmap(task.features)(grid.centres())
    eval_phi, mc = gpope.true_values(task)
    occ_obs, _ = ope.evaluation_states(
        jax.random.fold_in(jax.random.key(cfg.seed), 3),
        task.env,
        task.env_params,
        num_states=OCCUPANCY_STATES,
        policy=task.target,
        max_steps=cfg.truth.eval_max_steps,
    )
    counts = jnp.bincount(jax.vmap(grid)(occ_obs), length=grid.num_cells)
    uniform = jnp.full(grid.num_cells, 1.0 / grid.num_cells)
    rhos = {
        "uniform": uniform,
        "occupancy": 0.5 * uniform + 0.5 * counts / counts.sum(),
    }
    return cfg, task, grid, cell_phi, eval_phi, mc.values, rhos


@functools.lru_cache(maxsize=4)
def _mountain_car_data(seed: int, m: int, max_length: int) -> tuple:
    cfg, task, grid, cell_phi, eval_phi, values, rhos = _mountain_car_public(
        m, max_length
    )
    e = cfg.env
    col = ope.collect_offpolicy(
        jax.random.fold_in(jax.random.key(DATA_ROOT), seed),
        task.env,
        task.env_params,
        task.target,  # on-policy: the data come from the evaluated policy
        task.target,
        task.features,
        gamma=e.gamma,
        reward_scale=e.reward_scale,
        num_trajectories=m,
        max_length=max_length,
    )
    cells = jax.vmap(jax.vmap(grid))(col.observations)
    visits = ope.first_visits(
        cells, col.rewards, col.data.mask, e.gamma, grid.num_cells
    )
    lstd = gpope.lstd_min_norm(col.data, cfg.gpope.normalization)
    return rhos, cell_phi, eval_phi, values, col.data, visits, lstd
