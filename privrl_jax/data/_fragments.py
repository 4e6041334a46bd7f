"""Trajectories <-> fragments of H steps with link transitions (PrivORL-j, Sec. VI-A).

Host side (NumPy): shapes depend on the data, as for `Trajectories`.

A trajectory of length L is cut into ceil(L / H) consecutive fragments of H steps; the
last one is zero-padded and its padding is marked in ``step_mask``. Each fragment
carries its *link transition* S = (s, a, r, s', d), the transition just before its first
step: the last step of the previous fragment, zeros for a trajectory's first fragment
(``has_link = False``).

The privacy unit of PrivORL-j is the trajectory, so fragments are kept grouped by
trajectory: fields are ``[units, max_fragments, H, ...]``. ``max_fragments`` F is a
*public* constant (a config value, never read from the sensitive data). A trajectory
longer than F H steps is **truncated** to its first F H steps: a data-independent rule
that keeps one trajectory = one unit. (Splitting it into several units would let one
trajectory move the clipped sum by more than C, i.e. group privacy, docs/dp_pitfalls.md
item 11.) ``overflow="error"`` refuses such data instead.
"""

from __future__ import annotations

import jax
import numpy as np
from flax import struct

from privrl_jax.data._types import TRANSITION_FIELDS, Trajectories

# The modelled per-step fields (timeouts is bookkeeping: it is not synthesised per
# step).
STEP_FIELDS: tuple[str, ...] = (
    "observations",
    "actions",
    "rewards",
    "next_observations",
    "terminals",
)


@struct.dataclass
class Fragments:
    """Trajectories cut into fragments, grouped by trajectory (leading axes [U, F, H]).

    Attributes:
      observations: [U, F, H, obs_dim].
      actions: [U, F, H, act_dim].
      rewards: [U, F, H].
      next_observations: [U, F, H, obs_dim].
      terminals: [U, F, H]: the terminal signal d.
      timeouts: [U, F, H]: kept so that fragments reassemble trajectories exactly.
      step_mask: [U, F, H] bool, True on real steps (a prefix of each real fragment).
      fragment_mask: [U, F] bool, True on fragments holding at least one real step.
      link: dict of the link transition's fields ``observations, actions, rewards,
        next_observations, terminals``, each [U, F, ...]; zeros where ``has_link`` is
        False.
      has_link: [U, F] bool, False on each trajectory's first fragment and on padding.
      lengths: [U] int32 real steps per unit after truncation.
    """

    observations: jax.Array
    actions: jax.Array
    rewards: jax.Array
    next_observations: jax.Array
    terminals: jax.Array
    timeouts: jax.Array
    step_mask: jax.Array
    fragment_mask: jax.Array
    link: dict
    has_link: jax.Array
    lengths: jax.Array

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.step_mask.shape[2])

    @property
    def max_fragments(self) -> int:
        return int(self.step_mask.shape[1])


def trajectories_to_fragments(
    trajectories: Trajectories,
    *,
    horizon: int = 32,
    max_fragments: int,
    overflow: str = "truncate",
) -> Fragments:
    """Cuts padded trajectories into fragments of ``horizon`` steps with their links.

    Args:
      trajectories: [B, T] with a prefix mask (`transitions_to_trajectories`).
      horizon: H, steps per fragment (paper default 32).
      max_fragments: F, the public maximum number of fragments per trajectory.
      overflow: ``"truncate"`` (keep the first F H steps) or ``"error"``.

    Returns:
      `Fragments` [B, F, H]; `fragments_to_trajectories` inverts it exactly when nothing
      was truncated.

    Raises:
      ValueError: bad ``horizon`` / ``max_fragments`` / ``overflow``, or a trajectory
        longer than F H steps with ``overflow="error"``.
    """
    for name, value in (("horizon", horizon), ("max_fragments", max_fragments)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, np.integer))
            or value < 1
        ):
            raise ValueError(f"{name} must be an int >= 1; got {value!r}.")
    if overflow not in ("truncate", "error"):
        raise ValueError(f"overflow must be 'truncate' or 'error'; got {overflow!r}.")
    lengths = np.asarray(trajectories.lengths).astype(np.int64)
    cap = horizon * max_fragments
    if overflow == "error" and lengths.size and lengths.max() > cap:
        raise ValueError(
            f"a trajectory has {int(lengths.max())} steps, more than max_fragments * "
            "horizon = "
            f"{max_fragments} * {horizon} = {cap}; raise max_fragments or use "
            "overflow='truncate'."
        )
    lengths = np.minimum(lengths, cap)
    b, t = np.asarray(trajectories.mask).shape
    steps = np.arange(cap)
    step_mask = steps[None, :] < lengths[:, None]  # [B, cap]

    def cut(x):
        x = np.asarray(x)
        out = np.zeros((b, cap) + x.shape[2:], x.dtype)
        n = min(t, cap)
        out[:, :n] = x[:, :n]
        out[~step_mask] = 0
        return out.reshape((b, max_fragments, horizon) + x.shape[2:])

    fields = {k: cut(getattr(trajectories, k)) for k in TRANSITION_FIELDS}
    # Truncation cuts the trajectory: its new last step ends the unit like a time limit.
    last = np.maximum(lengths - 1, 0)
    truncated = lengths < np.asarray(trajectories.lengths)
    timeouts = fields["timeouts"].reshape(b, cap)
    timeouts[truncated, last[truncated]] = 1
    fields["timeouts"] = timeouts.reshape(b, max_fragments, horizon)
    mask3 = step_mask.reshape(b, max_fragments, horizon)
    fragment_mask = mask3[:, :, 0]
    has_link = fragment_mask.copy()
    has_link[:, 0] = False
    link = {}
    for k in STEP_FIELDS:
        last_step = fields[k][
            :, :, -1
        ]  # the previous fragment's last step (full if a next exists)
        lk = np.zeros_like(last_step)
        lk[:, 1:] = last_step[:, :-1]
        lk[~has_link] = 0
        link[k] = lk
    return Fragments(
        **fields,
        step_mask=mask3,
        fragment_mask=fragment_mask,
        link=link,
        has_link=has_link,
        lengths=lengths.astype(np.int32),
    )


def fragments_to_trajectories(
    fragments: Fragments, *, max_length: int | None = None
) -> Trajectories:
    """Concatenates each unit's fragments back into one padded trajectory.

    Args:
      fragments: `Fragments` [U, F, H].
      max_length: pad length T of the result (default F H).

    Returns:
      `Trajectories` [U, T].

    Raises:
      ValueError: the step mask is not a prefix of ones of length ``lengths``, or
        ``max_length`` is shorter than a trajectory.
    """
    u, f, h = np.asarray(fragments.step_mask).shape
    cap = f * h
    lengths = np.asarray(fragments.lengths).astype(np.int64)
    mask = np.asarray(fragments.step_mask).reshape(u, cap)
    if not np.array_equal(mask, np.arange(cap)[None, :] < lengths[:, None]):
        raise ValueError(
            "fragments.step_mask must be a prefix of `lengths` ones per unit."
        )
    t = cap if max_length is None else int(max_length)
    if lengths.size and t < lengths.max():
        raise ValueError(
            f"max_length={max_length} is shorter than the longest unit "
            f"({lengths.max()})."
        )

    def join(x):
        x = np.asarray(x).reshape((u, cap) + np.asarray(x).shape[3:])
        out = np.zeros((u, t) + x.shape[2:], x.dtype)
        n = min(t, cap)
        out[:, :n] = x[:, :n]
        return out

    out = {k: join(getattr(fragments, k)) for k in TRANSITION_FIELDS}
    traj_mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
    return Trajectories(**out, mask=traj_mask, lengths=lengths.astype(np.int32))


def link_consistency(fragments: Fragments) -> float:
    """Measures how far each fragment's link is from the previous fragment's last step.

    Args:
      fragments: fragmented trajectories.

    Returns:
      The max over real links (`has_link`) and step fields of
      |link of fragment k+1 - last step of fragment k|; 0.0 when exact or when
      there is no real link.
    """
    has = np.asarray(fragments.has_link)
    worst = 0.0
    for k in STEP_FIELDS:
        x = np.asarray(getattr(fragments, k))
        prev_last = x[:, :-1, -1]
        lk = np.asarray(fragments.link[k])[:, 1:]
        diff = np.abs(lk - prev_last)[has[:, 1:]]
        if diff.size:
            worst = max(worst, float(diff.max()))
    return worst
