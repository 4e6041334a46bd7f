"""DP scoring of candidate policies on sensitive trajectories.

GPOPE on state-action features.

A deployed offline-RL policy is usually deterministic, so importance ratios
pi(a|s) / pi_b(a|s) do not exist. Evaluating Q^pi instead needs none: with features
phi(s, a) of the action *taken* and phi(s', pi(s')) of the action the candidate would
take next, GTD2's fixed point is LSTDQ's (off-policy, ratio 1), and the candidate's
value at a public start distribution is the mean of ``theta . phi(s0, pi(s0))``. GPOPE
makes theta a per-trajectory DP release (:func:`~._gpope.gpope` on a
:class:`~privrl_jax.privacy.DPPlan` over trajectories); the value is post-processing
with public start states, so it is as private as theta.

Features for the mazes (:class:`RBFFeatures`): Gaussian radial basis functions of the
observation (position and velocity), their centres k-means of *public* observations
(e.g. a DP synthetic release, or a random policy's), never of the sensitive ones.
:class:`StateActionFeatures` crosses them with the action, so Q is linear in the action
within each basis function: ``phi(s, a) = [psi(s), psi(s) (x) a] / sqrt(1 +
||a||^2)``, unit norm like :class:`~._features.FeatureMap`'s.

Measure before trusting. With tabular features the fixed point is the candidate's exact
value (tests/ope/test_policy_value.py). On maze2d-umaze it is not, at the sizes tried
(the retired benchmarks/private_selection.py --task maze, in git history; 2000
trajectories of 40 steps): the noiseless LSTDQ, which GPOPE converges to, missed eight
deterministic controllers' true discounted values (1.8 to 5.1) by an RMSE of 2.8 (8
centres, 3 action bins), 11.9 (16 centres, 3 bins), 622 (32 centres, 3 bins) and 179 (16
centres, linear cross): off-policy linear TD on ill-conditioned statistics. With near
one-hot features of the 7 free cells (3 action bins, width 0.3) the four controllers of
gain 1 and 10 came within 0.18 to 0.26 of the truth (2.7 to 5.1), while the gain-0.3
controllers and the fixed pushes, whose states the behaviour never visits with those
actions, were off by 250 to 10^6 or NaN: a coverage failure no clip or noise setting
fixes. Check the noiseless :func:`lstd_policy_value` against rollouts on a public
stand-in before trusting a feature set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import privacy
from privrl_jax.ope._gpope import StepSize, gpope, sample_schedule
from privrl_jax.ope._gtd2 import (
    GTD2Stats,
    TrajectoryData,
    Transitions,
    item_weights,
    lstd_solution,
)

# policy(obs) -> action for one observation: a deterministic candidate.
DeterministicPolicy = Callable[[jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True, eq=False)
class RBFFeatures:
    """Unit-norm Gaussian RBFs of an observation, plus a constant.

    Attributes:
      centers: [c, d] centres, in the observation's units.
      scales: [d] per-dimension length scales (distance is measured in them).
      bandwidth: the RBF width in scaled units.
    """

    centers: np.ndarray
    scales: np.ndarray
    bandwidth: float

    @classmethod
    def from_public(
        cls, observations: np.ndarray, num_centers: int, *, seed: int = 0
    ) -> RBFFeatures:
        """Centres by k-means (Lloyd, 25 rounds) of public observations.

        Args:
          observations: [n, d] *public* observations (never the sensitive data: the
            features would then leak it).
          num_centers: c, the number of centres.
          seed: the initial centres' draw.

        Returns:
          Features with per-dimension scales the public standard deviations and the
          bandwidth the median distance from a centre to its nearest other centre.

        Raises:
          ValueError: fewer observations than centres.
        """
        x = np.asarray(observations, np.float64)
        if x.ndim != 2 or len(x) < num_centers:
            raise ValueError(
                f"need [n >= {num_centers}, d] public observations; got {x.shape}."
            )
        scales = np.maximum(x.std(axis=0), 1e-6)
        z = x / scales
        rng = np.random.default_rng(seed)
        centers = z[rng.choice(len(z), num_centers, replace=False)]
        for _ in range(25):
            nearest = np.argmin(((z[:, None] - centers[None]) ** 2).sum(-1), axis=1)
            for j in range(num_centers):
                members = z[nearest == j]
                if len(members):
                    centers[j] = members.mean(axis=0)
        dist = np.sqrt(((centers[:, None] - centers[None]) ** 2).sum(-1))
        np.fill_diagonal(dist, np.inf)
        bandwidth = float(np.median(dist.min(axis=1))) if num_centers > 1 else 1.0
        return cls(centers * scales, scales, bandwidth)

    @property
    def num_features(self) -> int:
        return len(self.centers) + 1

    def __call__(self, obs: jax.Array) -> jax.Array:
        """[c + 1] features of one observation, ``||psi||_2 = 1``."""
        z = (obs - jnp.asarray(self.centers, jnp.float32)) / jnp.asarray(
            self.scales, jnp.float32
        )
        rbf = jnp.exp(-0.5 * jnp.sum(z**2, axis=-1) / self.bandwidth**2)
        psi = jnp.concatenate([jnp.ones(1), rbf])
        return psi / jnp.linalg.norm(psi)


@dataclasses.dataclass(frozen=True, eq=False)
class StateActionFeatures:
    """State-action features: observation features crossed with the action.

    ``phi(s, a) = [psi(s), psi(s) (x) a] / sqrt(1 + ||a||^2)``, unit norm; or, with
    ``action_bins``, ``psi(s) (x) onehot(bin(a))`` (Q piecewise constant in the
    action, which does not extrapolate to actions the data never took).

    Attributes:
      state: the observation features psi.
      action_dim: the action's dimension (actions in [-1, 1]).
      action_bins: equal bins per action dimension, or None for the linear cross.
    """

    state: RBFFeatures
    action_dim: int
    action_bins: int | None = None

    @property
    def num_features(self) -> int:
        if self.action_bins is not None:
            return self.state.num_features * self.action_bins**self.action_dim
        return self.state.num_features * (1 + self.action_dim)

    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        psi = self.state(obs)
        if self.action_bins is not None:
            n = self.action_bins
            # Equal bins of [-1, 1] per dimension, one cell of the product grid.
            idx = jnp.clip(jnp.floor((action + 1.0) / 2.0 * n), 0, n - 1)
            flat = jnp.dot(idx.astype(jnp.int32), n ** jnp.arange(self.action_dim))
            onehot = jax.nn.one_hot(flat, n**self.action_dim)
            return jnp.outer(psi, onehot).reshape(-1)
        cross = jnp.outer(psi, action).reshape(-1)
        return jnp.concatenate([psi, cross]) / jnp.sqrt(1.0 + jnp.sum(action**2))


def policy_evaluation_data(
    observations: jax.Array,
    actions: jax.Array,
    rewards: jax.Array,
    next_observations: jax.Array,
    mask: jax.Array,
    policy: DeterministicPolicy,
    features: StateActionFeatures,
    discount: float,
) -> TrajectoryData:
    """GTD2 transitions that evaluate ``policy``'s Q from logged trajectories.

    Args:
      observations: ``[m, T, obs_dim]`` logged observations; m trajectories (one
        privacy unit each), padded to T.
      actions: ``[m, T, action_dim]`` logged actions.
      rewards: ``[m, T]`` logged rewards.
      next_observations: ``[m, T, obs_dim]`` the observations that followed.
      mask: [m, T] bool, True on real transitions.
      policy: the deterministic candidate.
      features: phi(s, a).
      discount: gamma; every transition bootstraps (the mazes have no terminal state,
        only time limits).

    Returns:
      :class:`~._gtd2.TrajectoryData` with ``phi_tm1 = phi(s, a)``, ``phi_t = phi(s',
      pi(s'))`` and importance ratio 1.
    """
    phi = jax.vmap(jax.vmap(features))
    next_actions = jax.vmap(jax.vmap(policy))(next_observations)
    shape = rewards.shape
    return TrajectoryData(
        Transitions(
            phi_tm1=phi(observations, actions),
            r_t=rewards.astype(jnp.float32),
            discount_t=jnp.full(shape, discount, jnp.float32),
            phi_t=phi(next_observations, next_actions),
            rho_tm1=jnp.ones(shape, jnp.float32),
        ),
        jnp.asarray(mask, bool),
    )


def start_features(
    start_observations: jax.Array,
    policy: DeterministicPolicy,
    features: StateActionFeatures,
) -> jax.Array:
    """The mean of ``phi(s0, pi(s0))`` over public start observations.

    Args:
      start_observations: [n, obs_dim] public draws of the start distribution.
      policy: the deterministic candidate.
      features: phi(s, a).

    Returns:
      [num_features] the start features (the value is their dot with theta).
    """
    actions = jax.vmap(policy)(start_observations)
    return jnp.mean(jax.vmap(features)(start_observations, actions), axis=0)


def gpope_policy_value(
    plan: privacy.DPPlan,
    data: TrajectoryData,
    start_phi: jax.Array,
    *,
    seed: int,
    key: jax.Array,
    step_size: StepSize,
) -> jax.Array:
    """A candidate's DP value at the start distribution: ``start_phi . theta``.

    Args:
      plan: the DP plan over the m trajectories (its event is the score's cost).
      data: :func:`policy_evaluation_data` for this candidate.
      start_phi: :func:`start_features` for this candidate (public).
      seed: the sampling seed (secret in a real release).
      key: the noise key (secret in a real release).
      step_size: GPOPE's step size.

    Returns:
      [] the value estimate (DP with ``plan.event()``).
    """
    schedule = sample_schedule(plan, seed)
    theta = gpope(plan, data, schedule, key, step_size=step_size).theta
    return jnp.dot(start_phi, theta)


def lstd_policy_value(data: TrajectoryData, start_phi: jax.Array) -> jax.Array:
    """The same value with LSTDQ on all the data, no noise; not DP.

    The point GPOPE converges to, under the default ``"horizon"`` weights.
    :func:`~._gtd2.dataset_stats` of ``data``, as two contractions instead of the
    per-transition [m, T, n, n] matrices (which do not fit in memory for n in the
    hundreds).

    Args:
      data: :func:`policy_evaluation_data` for the candidate.
      start_phi: :func:`start_features` for the candidate.

    Returns:
      [] the value ``start_phi . theta`` at LSTDQ's solution theta.
    """
    tr = data.transitions
    weight = item_weights(data.mask) * tr.rho_tm1 / data.num_trajectories
    td = tr.phi_tm1 - tr.discount_t[..., None] * tr.phi_t
    a = jnp.einsum("mt,mti,mtj->ij", weight, tr.phi_tm1, td)
    b = jnp.einsum("mt,mti->i", weight * tr.r_t, tr.phi_tm1)
    theta, _ = lstd_solution(GTD2Stats(a=a, b=b, c=jnp.eye(a.shape[0])))
    return jnp.dot(start_phi, theta)
