"""POOL's private baselines (pool.txt, Sec. 5.1): input and output perturbation.

Both spend the same rho as POOL through the library's ``GaussianMechanism``
(``from_zcdp``), and both feed the non-private planner (``pool_plan`` with
``mechanism=None``), so they differ from POOL only in where the noise goes.

Input perturbation (IP). Every episode's record is released with Gaussian noise,
then the planner runs on the noisy data. The record of stage h is
(s_h, a_h, r_h, s'_h, f_h) in [0, 1]^(2w + d + 2), f_h the feedback flag (0/1;
reward and next state are 0 where f_h = 0). One episode is H such rows; replacing
it by any other moves every coordinate by at most 1, so the L2 sensitivity of the
whole released data under REPLACE-ONE neighbours is

    Delta_IP = sqrt(H (2w + d + 2)).

(Adding or removing a record changes the number of released rows, which no noise
hides: IP is DP only for replace-one neighbours, the relation we record.) After
the release coordinates are clipped to [0, 1] and a pair counts as having
feedback iff its noisy flag exceeds 1/2 and its noisy (s, a) < lambda_h
(Definition 2 applied to what was released).

Output perturbation (OP). The non-private planner's tables Q_h at all K cells and
H stages are released with Gaussian noise, then clipped to [0, v_max_h]. Every
entry of stage h lies in [0, v_max_h] = [0, H - h] whatever the data (Algorithm
1 line 10), and one episode can move every entry of every stage (its targets
enter V_{h+1}, hence every later target), so the only data-free bound is the
range:

    Delta_OP = sqrt(K sum_{h=1}^{H} (H - h + 1)^2),

valid under add/remove-one and replace-one alike. A tighter bound would need a
stability analysis of pessimistic backward induction that neither pool.txt nor
Qiao & Wang give; the range bound is the standard OP of a bounded output (Dwork &
Roth 2014, Sec. 3.5 / the Gaussian mechanism on a bounded vector).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from privrl_jax.envs import InventoryData, observable
from privrl_jax.privacy import GaussianMechanism, Neighboring


def input_sensitivity(horizon: int, state_dim: int, action_dim: int) -> float:
    """Delta_IP = sqrt(H (2w + d + 2)) (replace-one)."""
    return math.sqrt(horizon * (2 * state_dim + action_dim + 2))


def output_sensitivity(horizon: int, num_cells: int) -> float:
    """Delta_OP = sqrt(K sum_h (H - h + 1)^2)."""
    return math.sqrt(num_cells * sum((horizon - h) ** 2 for h in range(horizon)))


def input_mechanism(
    rho: float, horizon: int, state_dim: int, action_dim: int
) -> GaussianMechanism:
    """IP's rho-zCDP mechanism (replace-one neighbours).

    Args:
      rho: the zCDP budget (> 0); the privacy unit is one episode.
      horizon: The horizon H.
      state_dim: The state dimension w.
      action_dim: The action dimension d.

    Returns:
      A ``GaussianMechanism`` with sensitivity Delta_IP = sqrt(H (2w + d + 2)),
      sigma = 1 / sqrt(2 rho) and ``Neighboring.REPLACE_ONE``.

    Raises:
      ValueError: `rho` not positive.
    """
    return GaussianMechanism.from_zcdp(
        rho,
        l2_sensitivity=input_sensitivity(horizon, state_dim, action_dim),
        neighboring=Neighboring.REPLACE_ONE,
    )


def output_mechanism(rho: float, horizon: int, num_cells: int) -> GaussianMechanism:
    """OP's rho-zCDP mechanism (the range bound holds for add/remove-one).

    Args:
      rho: the zCDP budget (> 0); the privacy unit is one episode.
      horizon: The horizon H.
      num_cells: K, the cells of each stage's Q table.

    Returns:
      A ``GaussianMechanism`` with sensitivity
      Delta_OP = sqrt(K sum_h (H - h + 1)^2) and sigma = 1 / sqrt(2 rho).

    Raises:
      ValueError: `rho` not positive.
    """
    return GaussianMechanism.from_zcdp(
        rho, l2_sensitivity=output_sensitivity(horizon, num_cells)
    )


def _records(data: InventoryData) -> jax.Array:
    # [N, H, 2w + d + 2]: every coordinate in [0, 1].
    fb = data.feedback.astype(jnp.float32)[..., None]
    return jnp.concatenate(
        [
            data.observations,
            data.actions,
            data.rewards[..., None],
            data.next_observations,
            fb,
        ],
        -1,
    )


def record_vector(data: InventoryData) -> jax.Array:
    """The released vector of IP, [N, H, 2w + d + 2] (before noise)."""
    return _records(data)


@partial(jax.jit, static_argnames="mechanism")
def input_perturbation(
    key: jax.Array,
    data: InventoryData,
    boundary: jax.Array,
    mechanism: GaussianMechanism,
) -> InventoryData:
    """The noisy dataset IP releases (``mechanism`` from :func:`input_mechanism`).

    Jitted, with `mechanism` static. Each record is released with noise, clipped
    to [0, 1], and a pair keeps feedback iff its noisy flag exceeds 1/2 and its
    noisy (s, a) < lambda_h.

    Args:
      key: secret noise key.
      data: offline episodes [N, H, ...] (the privacy unit is one row).
      boundary: [H, w + d] observable boundaries lambda_h.
      mechanism: IP's mechanism.

    Returns:
      The noisy `InventoryData` [N, H, ...]; reward and next state are 0 where
      the released pair has no feedback, and ``sales`` (not released) is 0.
    """
    w, d = data.observations.shape[-1], data.actions.shape[-1]
    noisy = jnp.clip(mechanism.release(key, _records(data)), 0.0, 1.0)
    s, a = noisy[..., :w], noisy[..., w : w + d]
    r, s2, flag = (
        noisy[..., w + d],
        noisy[..., w + d + 1 : 2 * w + d + 1],
        noisy[..., -1],
    )
    fb = (flag > 0.5) & observable(s, a, boundary[None, :, :])
    return InventoryData(
        observations=s,
        actions=a,
        rewards=jnp.where(fb, r, 0.0),
        next_observations=jnp.where(fb[..., None], s2, 0.0),
        sales=jnp.zeros_like(data.sales),
        feedback=fb,
    )


@partial(jax.jit, static_argnames="mechanism")
def output_perturbation(
    key: jax.Array, q_tables: jax.Array, mechanism: GaussianMechanism
) -> jax.Array:
    """Noisy Q tables, clipped to each stage's range [0, H - h].

    Jitted, with `mechanism` static.

    Args:
      key: secret noise key.
      q_tables: [H, K] the non-private planner's tables.
      mechanism: OP's mechanism, from :func:`output_mechanism`.

    Returns:
      [H, K] the released tables; row h clipped to [0, H - h].
    """
    horizon = q_tables.shape[0]
    v_max = (horizon - jnp.arange(horizon, dtype=jnp.float32))[:, None]
    return jnp.clip(mechanism.release(key, q_tables), 0.0, v_max)
