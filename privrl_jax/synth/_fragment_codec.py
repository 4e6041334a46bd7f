"""PrivORL-j's fragment codec: trajectories to model rows, fragments to trajectories.

Host-side numpy around the jitted encoders of ``diffusion``: a trajectory's fragments
become its DP unit's items (``fragment_items``), the real public fragments become
pre-training rows (``public_fragment_rows``), and generated fragments are decoded and
stitched into D4RL rows (``stitch_fragments``). The normaliser is the public one.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import data, diffusion
from privrl_jax.synth._privorl_j import GeneratedFragments, pack_rows, stitched_lengths


def _normalised(
    fields: dict[str, Any], n: int, layout: diffusion.TransitionLayout, norm: Any
) -> np.ndarray:
    """Encodes and normalises ``n`` steps given field by field: ``[n, d]``.

    The fields' leading axes are already flat.
    """
    flat = data.Transitions(**fields, timeouts=np.zeros(n, np.float32))
    return np.asarray(
        diffusion.normalise(
            norm,
            diffusion.flatten_transitions(
                jax.tree_util.tree_map(jnp.asarray, flat), layout
            ),
        )
    )


def _encode_steps(
    frags: data.Fragments, layout: diffusion.TransitionLayout, norm: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Normalised encoded steps and links of fragments.

    Returns steps [U, F, H, d] (zero on padding) and links [U, F, d] (zero if none).
    """
    u, f, h = frags.step_mask.shape
    steps = {
        k: np.asarray(getattr(frags, k)).reshape(
            (u * f * h,) + np.asarray(getattr(frags, k)).shape[3:]
        )
        for k in data.STEP_FIELDS
    }
    x = _normalised(steps, u * f * h, layout, norm)
    x = np.where(np.asarray(frags.step_mask).reshape(-1, 1), x, 0.0).reshape(
        u, f, h, -1
    )
    links = {
        k: np.asarray(frags.link[k]).reshape(
            (u * f,) + np.asarray(frags.link[k]).shape[2:]
        )
        for k in data.STEP_FIELDS
    }
    lk = _normalised(links, u * f, layout, norm)
    lk = np.where(np.asarray(frags.has_link).reshape(-1, 1), lk, 0.0).reshape(u, f, -1)
    return x.astype(np.float32), lk.astype(np.float32)


def fragment_items(
    frags: data.Fragments, layout: diffusion.TransitionLayout, norm: Any
) -> dict[str, np.ndarray]:
    """Encodes fragments as the items of PrivORL-j's losses, one unit per trajectory.

    Args:
      frags: fragments grouped by trajectory, [U, F, H, ...].
      layout: the flat transition layout of d encoded dims.
      norm: the public normaliser of the encoded transitions.

    Returns:
      ``x`` [U, F, H d] (normalised steps, step-major, zero on padding), ``link``
      [U, F, d] (zero where there is none), ``has_link`` [U, F] bool and
      ``step_mask`` [U, F, H] bool.
    """
    x, link = _encode_steps(frags, layout, norm)
    u, f, h, d = x.shape
    return {
        "x": x.reshape(u, f, h * d),
        "link": link,
        "has_link": np.asarray(frags.has_link),
        "step_mask": np.asarray(frags.step_mask),
    }


def public_fragment_rows(
    public: list[data.Trajectories],
    layout: diffusion.TransitionLayout,
    norm: Any,
    horizon: int,
) -> np.ndarray:
    """Packs every real fragment of the public trajectory sets into pre-training rows.

    Each set is cut at its own maximum fragment count (public data, so no truncation
    rule is needed).

    Args:
      public: public trajectory sets.
      layout: the flat transition layout of d encoded dims.
      norm: the public normaliser of the encoded transitions.
      horizon: H, steps per fragment.

    Returns:
      [M, H d + d + 1 + H] float32 rows (:func:`pack_rows`), M the number of real
      fragments of all sets.
    """
    rows = []
    for traj in public:
        f = -(-int(np.max(traj.lengths)) // horizon)
        frags = data.trajectories_to_fragments(traj, horizon=horizon, max_fragments=f)
        items = fragment_items(frags, layout, norm)
        keep = np.asarray(frags.fragment_mask)
        rows.append(
            np.asarray(pack_rows({k: jnp.asarray(v[keep]) for k, v in items.items()}))
        )
    return np.concatenate(rows)


def stitch_fragments(
    gen: GeneratedFragments,
    n: int,
    length: int,
    layout: diffusion.TransitionLayout,
    norm: Any,
    action_bounds: tuple[float, ...] | None,
    stop_at_terminal: bool,
) -> data.Transitions:
    """Decodes and stitches the first ``n`` generated trajectories into flat D4RL rows.

    A trajectory ends at its first terminal (``stop_at_terminal``; else terminals are
    zeroed) or at ``length`` steps, where ``timeouts`` = 1.

    Args:
      gen: generated fragments [B, F, H, d] in the normalised space, B >= n.
      n: trajectories to keep.
      length: requested steps per trajectory, <= F H.
      layout: the flat transition layout of the d encoded dims.
      norm: the public normaliser the model was trained with.
      action_bounds: ``(low, high)`` to clip actions to, or None.
      stop_at_terminal: cut a trajectory at its first terminal.

    Returns:
      NumPy `Transitions` of the ``n`` trajectories, trajectory-major, one row per
      kept step.
    """
    _, f, h, d = gen.fragments.shape
    steps = diffusion.denormalise(norm, gen.fragments[:n].reshape(n * f * h, d))
    t = jax.tree_util.tree_map(
        lambda x: np.asarray(x).reshape((n, f * h) + np.asarray(x).shape[1:]),
        diffusion.unflatten_transitions(steps, layout),
    )
    if not stop_at_terminal:
        t = t.replace(terminals=np.zeros_like(t.terminals))
    lengths, ended = stitched_lengths(
        jnp.asarray(t.terminals), jnp.full((n,), length, jnp.int32)
    )
    lengths, ended = np.asarray(lengths), np.asarray(ended)
    mask = np.arange(f * h)[None, :] < lengths[:, None]
    timeouts = np.zeros((n, f * h), np.float32)
    timeouts[np.arange(n)[~ended], lengths[~ended] - 1] = 1.0
    actions = np.clip(t.actions, *action_bounds) if action_bounds else t.actions
    terminals = np.where(mask, t.terminals, 0.0)
    traj = data.Trajectories(
        observations=t.observations,
        actions=actions,
        rewards=t.rewards,
        next_observations=t.next_observations,
        terminals=terminals,
        timeouts=timeouts,
        mask=mask.astype(np.float32),
        lengths=lengths,
    )
    return jax.tree_util.tree_map(np.asarray, data.trajectories_to_transitions(traj))
