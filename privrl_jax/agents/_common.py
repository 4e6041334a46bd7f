"""Non-network pieces shared by the offline-RL agents.

The state normaliser, Polyak averaging, config checks, and the `Agent` triple
(init, update, act) that every algorithm factory returns. The networks and policy
distributions live in `_networks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeAlias

import chex
import jax

from privrl_jax.data import DEFAULT_MIN_SCALE, Normalizer, Transitions, fit_normalizer

PyTree: TypeAlias = Any
Metrics: TypeAlias = dict[str, jax.Array]


def fit_state_normalizer(observations: jax.Array, enabled: bool) -> Normalizer:
    """The agent's state normaliser: fitted on the training data, or the identity.

    Fitted on `observations` [N, obs_dim] when `enabled` (CORL's `normalize=True`).
    The scale is the std floored at 1e-3 (`data.fit_normalizer`), not CORL's
    `std + 1e-3`: one normaliser rule for the package; scales differ from CORL's by at
    most 1e-3 per feature.

    Stored in the agent state and applied in every update and at evaluation time, so
    the policy sees the same input scale in the environment as in training.

    Privacy: the statistics are those of the training data, used in the clear. That
    is fine for public or DP-synthetic data (PrivORL's use), not for sensitive data
    (docs/design.md, contract 5): pass `enabled=False` there or normalise with a DP
    release.
    """
    chex.assert_rank(observations, 2)
    if enabled:
        return fit_normalizer(observations, min_scale=DEFAULT_MIN_SCALE)
    return identity_normalizer(observations.shape[1])


def identity_normalizer(obs_dim: int) -> Normalizer:
    """A normaliser that leaves observations unchanged."""
    return Normalizer.identity(obs_dim)


def polyak_update(target: PyTree, online: PyTree, tau: jax.typing.ArrayLike) -> PyTree:
    """Soft target update `target <- tau * online + (1 - tau) * target`."""
    return jax.tree.map(lambda t, o: (1.0 - tau) * t + tau * o, target, online)


def normalized_batch(batch: Transitions, normalizer: Normalizer) -> Transitions:
    """Applies the normaliser to a batch's observations and next observations."""
    return batch.replace(
        observations=normalizer.normalize(batch.observations),
        next_observations=normalizer.normalize(batch.next_observations),
    )


class UpdateFn(Protocol):
    """`update(state, batch, key) -> (state, metrics)`: one gradient step, pure."""

    def __call__(
        self, state: PyTree, batch: Transitions, key: jax.Array
    ) -> tuple[PyTree, Metrics]: ...


class Agent(NamedTuple):
    """An offline-RL algorithm as three pure functions (optax's factory style).

    Attributes:
      name: short name, e.g. "td3bc".
      config: the frozen config it was built from.
      init: `init(key, dataset) -> state`; fits the state normaliser on `dataset`
        (when the config asks for it) and initialises networks and optimisers.
      update: `update(state, batch, key) -> (state, metrics)`; batch is raw
        (unnormalised) `Transitions` with leading axis B.
      act: `act(state, observations) -> actions`, the deterministic evaluation
        policy on raw [..., obs_dim] observations; actions [..., act_dim].
    """

    name: str
    config: Any
    init: Callable[[jax.Array, Transitions], PyTree]
    update: UpdateFn
    act: Callable[[PyTree, jax.Array], jax.Array]


def dims_of(dataset: Transitions) -> tuple[int, int]:
    """(obs_dim, act_dim) of a dataset, with a clear error on bad ranks."""
    if dataset.observations.ndim != 2 or dataset.actions.ndim != 2:
        raise ValueError(
            "dataset: expected observations [N, obs_dim] and actions [N, act_dim], got "
            f"shapes {dataset.observations.shape} and {dataset.actions.shape}"
        )
    return int(dataset.observations.shape[1]), int(dataset.actions.shape[1])


def check_positive(name: str, value: float) -> None:
    """Raises ValueError unless value > 0."""
    if not value > 0:
        raise ValueError(f"{name}={value!r}: expected a positive number")


def check_unit_interval(name: str, value: float, *, closed: bool = True) -> None:
    """Raises ValueError unless value lies in [0, 1] (or (0, 1) when not closed)."""
    ok = 0.0 <= value <= 1.0 if closed else 0.0 < value < 1.0
    if not ok:
        interval = "[0, 1]" if closed else "(0, 1)"
        raise ValueError(f"{name}={value!r}: expected a number in {interval}")
