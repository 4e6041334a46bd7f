"""FineCur: curiosity during PrivORL-n's DP fine-tuning (PrivORL Appendix F-B).

Each DP step adds the clipped gradients of the most curious synthetic rows to the sum
of the real batch's clipped gradients before the noise. The rows come from a pool the
EMA model samples once per epoch and an RND predictor scores; both are functions of the
model under training only (post-processing of the DP iterates), so they cost no budget.
The pipeline's DP loop calls the hook :func:`make_finecur_rows` returns at every step
(its ``public_rows``); the pool, its scores and the RND state live in the loop's tree,
so they are checkpointed and resume with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from privrl_jax.synth._curiosity import curiosity_score, init_rnd
from privrl_jax.synth._privorl_n import pick_curious

PyTree = Any


def init_finecur(key: jax.Array, dim: int, pool_size: int) -> dict[str, Any]:
    """Builds FineCur's entries of the DP loop's tree.

    Args:
      key: PRNG key of the fresh RND module.
      dim: width of a row.
      pool_size: rows in the synthetic pool.

    Returns:
      A dict with ``rnd`` (a fresh `RNDState` from ``key``), ``pool`` (zeros
      [pool_size, dim]) and ``scores`` (zeros [pool_size]); the hook of
      :func:`make_finecur_rows` fills the pool and its scores at the first step.
    """
    return {
        "rnd": init_rnd(key, dim),
        "pool": jnp.zeros((pool_size, dim)),
        "scores": jnp.zeros(pool_size),
    }


def make_finecur_rows(
    clip: Callable,
    sample_pool: Callable[[jax.Array, PyTree], jax.Array],
    key: jax.Array,
    *,
    dim: int,
    num_curious: int,
    num_candidates: int,
    microbatch_size: int,
    steps_per_epoch: int,
) -> Callable:
    """Builds FineCur's ``public_rows`` hook for the DP loop.

    ``tree`` holds ``state`` (its ``params`` and ``ema_params``) and the entries of
    :func:`init_finecur`; ``acc`` is the step's sum of clipped gradients of the real
    batch. The added rows are functions of the model under training only, so they cost
    no privacy budget.

    Args:
      clip: the method's per-unit clip ``(params, rows, mask, key) -> (clipped sum,
        aux)`` (``DPFinetune.clip``), applied to the picked rows in microbatches.
      sample_pool: ``(key, ema_params) -> [pool_size, dim]`` synthetic rows; called at
        every ``steps_per_epoch``-th step (a fresh pool per epoch, from the EMA model).
      key: public randomness; the pool, the pick and the clip fold in the step.
      dim: width of a row.
      num_curious: rows added per step (``synth.num_replaced(batch, rate)``).
      num_candidates: candidates drawn from the pool per step (the batch size).
      microbatch_size: rows per clip call (padded with masked rows).
      steps_per_epoch: steps between two pools.

    Returns:
      ``hook(tree, acc, t) -> (tree, acc)``: at step ``t`` it refreshes the pool when
      ``t % steps_per_epoch == 0``, picks the ``num_curious`` most curious of
      ``num_candidates`` pool rows, trains the RND predictor on the candidates, and adds
      the picked rows' clipped gradients to ``acc``.
    """
    mb = microbatch_size
    padded = -(-num_curious // mb) * mb
    mask = (jnp.arange(padded) < num_curious)[:, None]

    @jax.jit
    def add(acc, params, rows, mask, k):
        clipped, _ = clip(params, rows, mask, k)
        return jax.tree_util.tree_map(jnp.add, acc, clipped)

    def hook(tree, acc, t):
        state = tree["state"]
        if t % steps_per_epoch == 0:
            pool = sample_pool(jax.random.fold_in(key, 20_000 + t), state.ema_params)
            tree = {**tree, "pool": pool, "scores": curiosity_score(tree["rnd"], pool)}
        rows, rnd = pick_curious(
            tree["rnd"],
            tree["pool"],
            tree["scores"],
            jax.random.fold_in(key, 30_000 + t),
            num_candidates=num_candidates,
            num_picked=num_curious,
        )
        rows = jnp.zeros((padded, dim)).at[:num_curious].set(rows)[:, None]
        kt = jax.random.fold_in(jax.random.fold_in(key, 40_000), t)
        for j in range(padded // mb):
            sl = slice(j * mb, (j + 1) * mb)
            acc = add(acc, state.params, rows[sl], mask[sl], jax.random.fold_in(kt, j))
        return {**tree, "rnd": rnd}, acc

    return hook
