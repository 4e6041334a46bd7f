"""GTD2 as a saddle-point problem (Liu et al. 2015), written one transition at a time.

Linear values V(s) = theta^T phi(s). GPOPE's paper (Section 2, eqs. 2.1-2.3) writes GTD2
as ``min_theta max_w L(theta, w) = w^T (b - A theta) - 0.5 ||w||_C^2`` with

    A = E[rho_t phi_t (phi_t - gamma phi_{t+1})^T],  b = E[rho_t r_t phi_t],
    C = E[phi_t phi_t^T],

rho_t = pi(a_t|s_t) / pi_b(a_t|s_t), expectations over data of the behaviour policy
pi_b. The estimates from trajectory i (eq. 2.2) average over its tau_i transitions:

    A_i = 1/tau_i sum_t A_t,  b_i = 1/tau_i sum_t b_t,  C_i = 1/tau_i sum_t C_t.

Normalisation (``normalization=``). The paper averages over the trajectory (eq. 2.2,
``"mean"``: weight 1/tau_i; Section 6 writes the trajectory's error as ``tau_i^-1 sum_t
Delta_t``) and calls the result unbiased. It is not when lengths are random and depend
on what happens (an episode ends because the patient died): a transition that ends its
trajectory early gets weight 1/tau_i with a small tau_i, so outcomes that shorten a
trajectory are over-weighted and the fixed point moves away from the TD(0) solution,
even on-policy with tabular features (on the medical chain with 20,000 trajectories:
V(level 0) = -0.64, "mean" LSTD -0.87, "horizon" LSTD -0.64). The default,
``"horizon"``, divides the trajectory's *sum* by the public padded length T (a declared
bound on the number of transitions per trajectory): every transition has the same weight
1/T, so E_i[A_i] is proportional to the pooled per-transition A and the fixed point is
off-policy LSTD(0). With equal lengths the two agree up to the constant tau/T. Either
weight is a function of the unit's own data (or public), applied before clipping, never
a cross-unit normaliser.

The primal-dual direction (eq. 4.1) stacks the primal gradient and the negative dual
gradient of ``L_i(theta, w) = w^T (b_i - A_i theta) - 0.5 ||w||^2_{C_i}``:

    B_i(theta, w) = ( -A_i^T w ,  A_i theta - b_i + C_i w ),

and GTD2 (eq. 2.3) is ``(theta, w) <- (theta, w) - beta_j B_i(theta_j, w_j)``.

Conventions (rlax): a transition is ``(phi_tm1, r_t, discount_t, phi_t, rho_tm1)``:
features of s_{t-1}, the reward after a_{t-1}, gamma (0 at termination, gamma at a
time-limit cut, which still bootstraps), features of s_t and the importance ratio of
a_{t-1}. Everything is pure JAX.
"""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp


class Transitions(NamedTuple):
    """GTD2 transitions.

    Leaves are ``[...]`` for one transition, ``[m, T, ...]`` for data.

    Attributes:
      phi_tm1: [..., n] features of the state acted in.
      r_t: [...] reward.
      discount_t: [...] gamma * (1 - terminal).
      phi_t: [..., n] features of the next state (any value when discount_t = 0).
      rho_tm1: [...] importance ratio pi(a|s) / pi_b(a|s) of the action taken.
    """

    phi_tm1: jax.Array
    r_t: jax.Array
    discount_t: jax.Array
    phi_t: jax.Array
    rho_tm1: jax.Array


class TrajectoryData(NamedTuple):
    """m trajectories padded to T transitions.

    Attributes:
      transitions: :class:`Transitions` with leaves ``[m, T, ...]``.
      mask: [m, T] bool, True on a trajectory's real transitions.
    """

    transitions: Transitions
    mask: jax.Array

    @property
    def num_trajectories(self) -> int:
        return self.mask.shape[0]


class GTD2Stats(NamedTuple):
    """A, b, C (one transition, one trajectory or their mean over trajectories).

    Attributes:
      a: [..., n, n]; b: [..., n]; c: [..., n, n].
    """

    a: jax.Array
    b: jax.Array
    c: jax.Array


def transition_stats(
    phi_tm1: jax.Array,
    r_t: jax.Array,
    discount_t: jax.Array,
    phi_t: jax.Array,
    rho_tm1: jax.Array,
) -> GTD2Stats:
    """One transition's A_t, b_t, C_t (eq. 2.1 inside the expectations); unbatched.

    Args:
      phi_tm1: [n] features of the state acted in.
      r_t: [] reward.
      discount_t: [] gamma * (1 - terminal).
      phi_t: [n] features of the next state.
      rho_tm1: [] importance ratio of the action taken.

    Returns:
      ``GTD2Stats(a=[n, n], b=[n], c=[n, n])``: ``rho phi_tm1 (phi_tm1 - discount
      phi_t)^T``, ``rho r phi_tm1``, ``phi_tm1 phi_tm1^T``.
    """
    chex.assert_rank([phi_tm1, r_t, discount_t, phi_t, rho_tm1], [1, 0, 0, 1, 0])
    td_features = phi_tm1 - discount_t * phi_t
    return GTD2Stats(
        a=rho_tm1 * jnp.outer(phi_tm1, td_features),
        b=rho_tm1 * r_t * phi_tm1,
        # C is not importance weighted: w is regressed under the behaviour distribution.
        c=jnp.outer(phi_tm1, phi_tm1),
    )


NORMALIZATIONS = ("horizon", "mean")


def item_weights(mask: jax.Array, normalization: str = "horizon") -> jax.Array:
    """[..., T] per-transition weights: 1/T (``"horizon"``) or 1/tau (``"mean"``).

    Padding gets 0. T = ``mask.shape[-1]``, the public padded length; tau = the
    trajectory's own length (an empty trajectory gets 0 everywhere).

    Args:
      mask: [..., T] bool, True on real steps.
      normalization: ``"horizon"`` or ``"mean"``.

    Returns:
      The weights, shaped like ``mask`` (float32).

    Raises:
      ValueError: an unknown ``normalization``.
    """
    mask = mask.astype(jnp.float32)
    if normalization == "horizon":
        return mask / mask.shape[-1]
    if normalization == "mean":
        return mask / jnp.maximum(jnp.sum(mask, axis=-1, keepdims=True), 1.0)
    raise ValueError(
        f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}."
    )


def trajectory_stats(
    transitions: Transitions, mask: jax.Array, normalization: str = "horizon"
) -> GTD2Stats:
    """A_i, b_i, C_i of one trajectory (eq. 2.2).

    The weighted sum over its real transitions.

    Args:
      transitions: leaves ``[T, ...]``.
      mask: [T] bool, True on real transitions.
      normalization: ``"horizon"`` (sum / T) or ``"mean"`` (sum / tau_i, the paper's).

    Returns:
      ``GTD2Stats`` with ``a, c: [n, n]``, ``b: [n]`` (zeros for an empty trajectory).
    """
    per_t = jax.vmap(transition_stats)(*transitions)
    weights = item_weights(mask, normalization)
    # ``where`` first so that a NaN in a padded transition cannot reach the sum.
    return jax.tree_util.tree_map(
        lambda x: jnp.tensordot(
            weights,
            jnp.where(mask.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0.0),
            axes=1,
        ),
        per_t,
    )


def dataset_stats(data: TrajectoryData, normalization: str = "horizon") -> GTD2Stats:
    """A, b, C of the data set: the mean over trajectories of A_i, b_i, C_i.

    This is E_i[.] under GPOPE's uniform choice of a trajectory, so its saddle point is
    the point GPOPE and stochastic GTD2 converge to (with trajectories of unequal length
    it differs from pooling all transitions under ``"mean"``; under ``"horizon"`` it is
    the pooled sum / (m T)). Non-private.

    Args:
      data: m trajectories, leaves ``[m, T, ...]``.
      normalization: ``"horizon"`` (sum / T) or ``"mean"`` (sum / tau_i, the paper's).

    Returns:
      ``GTD2Stats`` with ``a, c: [n, n]``, ``b: [n]``.

    Raises:
      ValueError: if ``normalization`` is not one of the two.
    """
    per_traj = jax.vmap(trajectory_stats, in_axes=(0, 0, None))(
        data.transitions, data.mask, normalization
    )
    return jax.tree_util.tree_map(lambda x: jnp.mean(x, axis=0), per_traj)


def direction_from_stats(
    theta: jax.Array, w: jax.Array, stats: GTD2Stats
) -> tuple[jax.Array, jax.Array]:
    """B(theta, w) = (-A^T w, A theta - b + C w) (eq. 4.1) from the matrices.

    Returns ``([n], [n])``.
    """
    return -stats.a.T @ w, stats.a @ theta - stats.b + stats.c @ w


def transition_direction(
    params: tuple[jax.Array, jax.Array], transition: Transitions
) -> tuple[jax.Array, jax.Array]:
    """One transition's B_t(theta, w), matrix free (O(n), never forms A_t); unbatched.

    With ``delta = r + discount phi_t.theta - phi_tm1.theta`` (the TD error):
    ``-A_t^T w = -rho (phi_tm1.w) (phi_tm1 - discount phi_t)`` and
    ``A_t theta - b_t + C_t w = (phi_tm1.w - rho delta) phi_tm1``.

    Args:
      params: ``(theta [n], w [n])``.
      transition: :class:`Transitions` of one transition.

    Returns:
      ``(theta block [n], w block [n])``.
    """
    theta, w = params
    phi_tm1, r_t, discount_t, phi_t, rho_tm1 = transition
    td_error = r_t + discount_t * jnp.dot(phi_t, theta) - jnp.dot(phi_tm1, theta)
    phi_w = jnp.dot(phi_tm1, w)
    g_theta = -rho_tm1 * phi_w * (phi_tm1 - discount_t * phi_t)
    g_w = (phi_w - rho_tm1 * td_error) * phi_tm1
    return g_theta, g_w


def weighted_transition_direction(
    params: tuple[jax.Array, jax.Array], item: tuple[Transitions, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """``weight * B_t``: the per-item function whose sum over a trajectory is B_i.

    ``item = (transition, weight)`` with the weights of :func:`with_weights`, so that a
    per-unit clipped sum (``DPPlan.clipped_sum``) of it is the trajectory's B_i.
    """
    transition, weight = item
    return jax.tree_util.tree_map(
        lambda g: weight * g, transition_direction(params, transition)
    )


def with_weights(
    transitions: Transitions, mask: jax.Array, normalization: str = "horizon"
) -> tuple[Transitions, jax.Array]:
    """Items ``(transitions, [units, T] weights)`` for the weighted direction.

    The items :func:`weighted_transition_direction` takes.
    """
    return transitions, item_weights(mask, normalization)


def trajectory_direction(
    params: tuple[jax.Array, jax.Array],
    transitions: Transitions,
    mask: jax.Array,
    normalization: str = "horizon",
) -> tuple[jax.Array, jax.Array]:
    """B_i(theta, w) of one trajectory (leaves ``[T, ...]``, mask [T]).

    Returns ``([n], [n])``.
    """
    weights = item_weights(mask, normalization)
    per_t = jax.vmap(transition_direction, in_axes=(None, 0))(params, transitions)
    return jax.tree_util.tree_map(
        lambda g: jnp.tensordot(weights, jnp.where(mask[:, None], g, 0.0), axes=1),
        per_t,
    )


def lstd_solution(stats: GTD2Stats) -> tuple[jax.Array, jax.Array]:
    """The saddle point of L: ``theta* = A^-1 b`` and ``w* = C^-1 (b - A theta*) = 0``.

    Off-policy LSTD(0) (the paper's eq. 6.2 optimum). Requires A invertible (e.g.
    one-hot features with every state visited); use it on :func:`dataset_stats` (same
    normalization) for the point GPOPE and GTD2 converge to.

    Args:
      stats: A, b, C (``a, c: [n, n]``, ``b: [n]``).

    Returns:
      ``(theta* [n], w* [n])``, w* being zeros.
    """
    theta = jnp.linalg.solve(stats.a, stats.b)
    return theta, jnp.zeros_like(theta)
