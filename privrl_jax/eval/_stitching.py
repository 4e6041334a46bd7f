"""Stitching quality of trajectories made of fragments (PrivORL-j)."""

from __future__ import annotations

import numpy as np

from privrl_jax import data


def stitching_gaps(transitions: data.Transitions, horizon: int) -> dict[str, float]:
    """Mean L2 gaps ||s_{t+1} - s'_t|| inside trajectories, at and between stitches.

    At fragment boundaries (t + 1 a multiple of ``horizon``: the stitch) and inside
    fragments (the rest). Real maze data give ~0 for both; a synthesizer whose stitches
    are worse than its fragments shows a larger first.

    Args:
      transitions: flat D4RL rows whose episodes end at a terminal or a timeout.
      horizon: the fragment length H.

    Returns:
      ``at_fragment_boundaries`` and ``inside_fragments`` (NaN when there is none) and
      ``num_boundaries``.
    """
    starts, lengths = data.episode_boundaries(transitions)
    obs, nxt = (
        np.asarray(transitions.observations),
        np.asarray(transitions.next_observations),
    )
    at, inside = [], []
    for s, length in zip(starts, lengths):
        gap = np.linalg.norm(obs[s + 1 : s + length] - nxt[s : s + length - 1], axis=-1)
        boundary = (np.arange(1, length) % horizon) == 0
        at.append(gap[boundary])
        inside.append(gap[~boundary])
    a = np.concatenate(at) if at else np.zeros(0)
    i = np.concatenate(inside) if inside else np.zeros(0)
    return {
        "at_fragment_boundaries": float(a.mean()) if a.size else float("nan"),
        "inside_fragments": float(i.mean()) if i.size else float("nan"),
        "num_boundaries": int(a.size),
    }
