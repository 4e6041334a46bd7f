"""Helpers the trajectory-level synthesizer tests share (PrivORL-j core,
DP-Transformer)."""

import jax
import jax.numpy as jnp
import numpy as np


def units(num_fragments, rng, horizon: int, dim: int, f: int = 50):
    """Units [U, F, ...] of random fragments: unit u holds num_fragments[u] full
    fragments of
    ``horizon`` steps of ``dim`` numbers (the rest padding); returns (items, fragment
    mask)."""
    u = len(num_fragments)
    frag_mask = np.arange(f)[None, :] < np.asarray(num_fragments)[:, None]
    items = {
        "x": jnp.asarray(rng.normal(size=(u, f, horizon * dim)) * 3, jnp.float32),
        "link": jnp.asarray(rng.normal(size=(u, f, dim)), jnp.float32),
        "has_link": jnp.asarray(frag_mask & (np.arange(f) > 0)),
        "step_mask": jnp.asarray(np.repeat(frag_mask[..., None], horizon, -1)),
    }
    return items, jnp.asarray(frag_mask)


def flat(tree) -> np.ndarray:
    """All leaves of a pytree as one vector."""
    return np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(tree)])


def assert_each_unit_moves_the_sum_by_c(
    clip_with_mask, mask, c: float, drop=(0, 1), low_rtol: float = 1e-5
):
    """Contract of a trajectory-level clipped sum: removing unit u (each of ``drop``)
    moves the
    pre-noise sum ``clip_with_mask(mask)`` by at most C, and by C itself when the clip
    binds."""
    full = flat(clip_with_mask(mask))
    for u in drop:
        moved = np.linalg.norm(full - flat(clip_with_mask(mask.at[u].set(False))))
        assert moved <= c * (1 + 1e-5)
        assert moved >= c * (1 - low_rtol)  # clipped to C, not zeroed


def small_transition_table():
    """(discretisation, codes, table) of 400 transitions in five columns (one
    observation and one action coordinate): mbi compiles its estimator per graph, and
    five columns keep that compile small. The next state is tied to (s, a), so 2-way
    marginals carry information."""
    from privrl_jax import synth

    disc = synth.transition_discretisation(
        obs_low=[0],
        obs_high=[4],
        act_low=[-1],
        act_high=[1],
        reward_range=(0.0, 1.0),
        obs_bins=6,
        act_bins=4,
        reward_bins=3,
    )
    rng = np.random.default_rng(5)
    s = rng.uniform(0, 4, 400)
    a = rng.uniform(-1, 1, 400)
    nxt = np.clip(s + a, 0, 4)
    table = np.stack([s, a, np.exp(-np.abs(nxt - 3)), nxt, np.zeros(400)], axis=1)
    return disc, disc.discretise(table), table
