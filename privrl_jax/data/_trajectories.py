"""Transitions <-> Trajectories (host side, NumPy: shapes depend on the data)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from privrl_jax.data._types import TRANSITION_FIELDS, Trajectories, Transitions


def episode_boundaries(transitions: Transitions) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of every trajectory in a flat dataset.

    A trajectory ends at a row with `terminals` or `timeouts` set, or at the last row.

    Args:
      transitions: [N] rows in collection order.

    Returns:
      `(starts, lengths)`, both [B] int64, B the number of trajectories; both
      are empty when N = 0.
    """
    ends = (np.asarray(transitions.terminals) > 0) | (
        np.asarray(transitions.timeouts) > 0
    )
    if ends.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ends[-1] = True
    end_idx = np.flatnonzero(ends)
    starts = np.concatenate([[0], end_idx[:-1] + 1])
    return starts, end_idx - starts + 1


def transitions_to_trajectories(
    transitions: Transitions, *, max_length: int | None = None
) -> Trajectories:
    """Splits a flat dataset into zero-padded trajectories at terminals and timeouts.

    Args:
      transitions: [N] rows in collection order.
      max_length: pad length T; default the longest trajectory.

    Returns:
      `Trajectories` [B, T]. `trajectories_to_transitions` inverts this exactly.

    Raises:
      ValueError: `max_length` shorter than the longest trajectory, or empty data.

    >>> import numpy as np
    >>> t = Transitions(observations=np.zeros((3, 1)), actions=np.zeros((3, 1)),
    ...     rewards=np.arange(3.0), next_observations=np.zeros((3, 1)),
    ...     terminals=np.array([0.0, 1.0, 0.0]), timeouts=np.zeros(3))
    >>> transitions_to_trajectories(t).lengths.tolist()
    [2, 1]
    """
    n = len(transitions)
    if n == 0:
        raise ValueError("transitions is empty; need at least one row")
    starts, lengths = episode_boundaries(transitions)
    longest = int(lengths.max())
    t_max = longest if max_length is None else int(max_length)
    if t_max < longest:
        raise ValueError(
            f"max_length={max_length} is shorter than the longest trajectory "
            f"({longest} "
            f"steps); pass max_length >= {longest} or None"
        )
    b = len(lengths)
    traj = np.repeat(np.arange(b), lengths)
    step = np.arange(n) - np.repeat(starts, lengths)
    out = {}
    for k in TRANSITION_FIELDS:
        x = np.asarray(getattr(transitions, k))
        padded = np.zeros((b, t_max) + x.shape[1:], x.dtype)
        padded[traj, step] = x
        out[k] = jnp.asarray(padded)
    mask = np.zeros((b, t_max), np.float32)
    mask[traj, step] = 1.0
    return Trajectories(
        **out, mask=jnp.asarray(mask), lengths=jnp.asarray(lengths.astype(np.int32))
    )


def trajectories_to_transitions(trajectories: Trajectories) -> Transitions:
    """Flattens trajectories back to rows (trajectory-major), dropping the padding.

    Args:
      trajectories: [B, T] with a prefix mask.

    Returns:
      `Transitions` with `sum(lengths)` rows.

    Raises:
      ValueError: the mask is not a prefix of ones of length `lengths`.
    """
    mask = np.asarray(trajectories.mask) > 0
    lengths = np.asarray(trajectories.lengths)
    expected = np.arange(mask.shape[1])[None, :] < lengths[:, None]
    if mask.shape[0] != lengths.shape[0] or not np.array_equal(mask, expected):
        raise ValueError(
            "trajectories.mask must be 1 on the first `lengths[b]` steps of each "
            "trajectory and 0 after; rebuild it from lengths"
        )
    return Transitions(
        **{
            k: jnp.asarray(np.asarray(getattr(trajectories, k))[mask])
            for k in TRANSITION_FIELDS
        }
    )
