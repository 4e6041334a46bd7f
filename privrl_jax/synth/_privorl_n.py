"""PrivORL-n's steps: curiosity-driven pre-training and DP fine-tuning of an EDM.

Pure, jitted functions over pytrees; the pipeline (``privrl_jax.pipelines.privorl_n``)
owns data, files, progress bars, checkpoints and the ledger.

Reference: PrivORL (``papers/privorl.txt``), Sections IV-V and Appendix F: pre-train an
EDM (Karras et al. 2022) on public transitions, each iteration replacing the top-p of
the real batch by the most curious (RND, Burda et al. 2018) synthetic samples; fine-tune
on the sensitive transitions with DP-SGD (one transition = one privacy unit); sample
with the EMA weights.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from privrl_jax import privacy
from privrl_jax.diffusion import EDMConfig, edm_loss
from privrl_jax.synth._curiosity import (
    RNDState,
    curiosity_replace,
    curiosity_score,
    rnd_update,
    sample_candidates,
)

PyTree = Any


@struct.dataclass
class SynthState:
    """Denoiser parameters, their exponential moving average and the optimizer state."""

    params: PyTree
    ema_params: PyTree
    opt_state: optax.OptState
    step: jax.Array


def ema_update(ema: PyTree, params: PyTree, decay: jax.typing.ArrayLike) -> PyTree:
    """Moves the EMA towards the parameters: decay * ema + (1 - decay) * params.

    PrivORL and SynthER use decay 0.995.

    Args:
      ema: the moving average, a pytree like ``params``.
      params: the current parameters.
      decay: the decay in [0, 1], a scalar.

    Returns:
      The new moving average.
    """
    return jax.tree_util.tree_map(
        lambda e, p: decay * e + (1.0 - decay) * p, ema, params
    )


def init_synth_state(params: PyTree, tx: optax.GradientTransformation) -> SynthState:
    """Builds a fresh training state whose EMA starts at ``params``.

    Args:
      params: the denoiser's initial parameters.
      tx: the optimiser; its state is initialised on ``params``.

    Returns:
      A `SynthState` at step 0.
    """
    return SynthState(
        params=params,
        ema_params=params,
        opt_state=tx.init(params),
        step=jnp.zeros([], jnp.int32),
    )


class PretrainMetrics(NamedTuple):
    loss: jax.Array
    rnd_loss: jax.Array
    replaced_curiosity: jax.Array


def make_pretrain_chunk(
    denoise_fn: Callable,
    tx: optax.GradientTransformation,
    *,
    batch_size: int,
    chunk_steps: int,
    ema_decay: float = 0.995,
    edm_config: EDMConfig = EDMConfig(),
    num_noise: int = 1,
    curiosity_rate: float = 0.3,
) -> Callable[..., tuple[SynthState, RNDState, PretrainMetrics]]:
    """Builds non-private pre-training on public transitions, in jitted chunks of steps.

    Each update draws a uniform batch of ``batch_size`` public rows of ``data``, draws
    ``batch_size`` candidates from the synthetic ``pool`` (scored once per epoch,
    Appendix F-B's amortised generation), replaces round(p B) real rows by the most
    curious candidates, takes an optimiser step on the mean EDM loss, updates the EMA,
    and trains the RND predictor on the candidates so that often-generated samples
    become familiar. With ``curiosity_rate == 0`` (the PDP-Diffusion ablation) the pool
    is ignored.

    Args:
      denoise_fn: the preconditioned EDM denoiser ``(params, x, sigma) -> x``
        (static inside the jitted chunk).
      tx: the optimiser.
      batch_size: B, rows per update.
      chunk_steps: updates per call (a ``lax.scan``).
      ema_decay: the EMA decay.
      edm_config: EDM constants of the loss.
      num_noise: noise draws per row averaged in its loss (DPDM noise multiplicity).
      curiosity_rate: p in [0, 1], the share of the batch replaced.

    Returns:
      The jitted ``chunk(state, rnd, data, pool, pool_scores, key) -> (state, rnd,
      metrics)``: ``data`` [N, d] public encoded, normalised transitions, ``pool``
      [M, d] synthetic rows with ``pool_scores`` [M] (M >= B when p > 0), ``metrics``
      are the `PretrainMetrics` averaged over the chunk's updates.
    """

    def item_loss(params, x, key):
        return edm_loss(
            denoise_fn, params, x, key, config=edm_config, num_noise=num_noise
        )

    return make_curious_pretrain_chunk(
        item_loss,
        tx,
        batch_size=batch_size,
        chunk_steps=chunk_steps,
        ema_decay=ema_decay,
        curiosity_rate=curiosity_rate,
    )


def make_curious_pretrain_chunk(
    row_loss: Callable[[Any, jax.Array, jax.Array], jax.Array],
    tx: optax.GradientTransformation,
    *,
    batch_size: int,
    chunk_steps: int,
    ema_decay: float = 0.995,
    curiosity_rate: float = 0.3,
) -> Callable[..., tuple[SynthState, RNDState, PretrainMetrics]]:
    """Builds curiosity-driven pre-training of any row loss on public rows.

    The loop of :func:`make_pretrain_chunk` (PrivORL Sec. V-B) for any row format:
    transitions (PrivORL-n) or packed fragments (PrivORL-j); the RND module sees whole
    rows.

    Args:
      row_loss: ``row_loss(params, row, key) -> scalar`` for one row.
      tx: the optimiser.
      batch_size: B, rows per update.
      chunk_steps: updates per call (a ``lax.scan``).
      ema_decay: the EMA decay.
      curiosity_rate: p in [0, 1], the share of the batch replaced; 0 ignores the pool.

    Returns:
      The jitted ``chunk(state, rnd, data, pool, pool_scores, key) -> (state, rnd,
      metrics)`` of :func:`make_pretrain_chunk`.
    """

    def update(carry, key, data, pool, pool_scores):
        state, rnd = carry
        k_idx, k_cand, k_loss = jax.random.split(key, 3)
        batch = data[jax.random.randint(k_idx, (batch_size,), 0, data.shape[0])]
        if curiosity_rate > 0:
            cands, scores = sample_candidates(k_cand, pool, pool_scores, num=batch_size)
            batch, replaced = curiosity_replace(
                batch, cands, scores, rate=curiosity_rate
            )
            rnd, rnd_metrics = rnd_update(rnd, cands)
            rnd_loss = rnd_metrics["rnd_loss"]
            cur = jnp.sum(
                jnp.where(replaced, curiosity_score(rnd, batch), 0.0)
            ) / jnp.maximum(replaced.sum(), 1)
        else:
            rnd_loss = cur = jnp.zeros([])
        keys = jax.random.split(k_loss, batch_size)
        loss, grads = jax.value_and_grad(
            lambda p: jnp.mean(jax.vmap(row_loss, (None, 0, 0))(p, batch, keys))
        )(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        state = SynthState(
            params,
            ema_update(state.ema_params, params, ema_decay),
            opt_state,
            state.step + 1,
        )
        return (state, rnd), PretrainMetrics(loss, rnd_loss, cur)

    @jax.jit
    def chunk(state, rnd, data, pool, pool_scores, key):
        body = functools.partial(update, data=data, pool=pool, pool_scores=pool_scores)
        (state, rnd), metrics = jax.lax.scan(
            body, (state, rnd), jax.random.split(key, chunk_steps)
        )
        return state, rnd, jax.tree_util.tree_map(jnp.mean, metrics)

    return chunk


class DPFinetune(NamedTuple):
    """The pieces of DP fine-tuning (see :func:`make_dp_finetune`)."""

    tx: optax.GradientTransformation
    clip: privacy.ClippedSumFn
    init: Callable[[PyTree], SynthState]
    update: Callable[[SynthState, PyTree], SynthState]


def make_dp_finetune(
    denoise_fn: Callable,
    plan: privacy.DPPlan,
    *,
    learning_rate: float,
    ema_decay: float = 0.995,
    edm_config: EDMConfig = EDMConfig(),
    num_noise: int = 1,
    clip_method: str = "vmap",
    mean_scale: float = 1.0,
) -> DPFinetune:
    """Builds DP-SGD fine-tuning of the denoiser, one transition per privacy unit.

    The per-unit loss is the EDM loss of one transition averaged over ``num_noise``
    noise draws (DPDM noise multiplicity, Dockhorn et al. 2022): the draws are inside
    the unit, so the clip bounds the unit's whole contribution and the privacy cost is
    unchanged. The noise itself is the plan's, added by the DP run loop.

    Args:
      denoise_fn: the preconditioned EDM denoiser ``(params, x, sigma) -> x``.
      plan: the DP plan; its clip norm bounds each transition's gradient.
      learning_rate: Adam step size.
      ema_decay: the EMA decay, fixed from the first step.
      edm_config: EDM constants of the loss.
      num_noise: noise draws per transition averaged in its loss.
      clip_method: per-unit clipping method of ``plan.clipped_grad``: ``"vmap"`` or
        ``"ghost"``.
      mean_scale: a public rescaling of the mean; FineCur adds k public synthetic rows
        to every batch and averages over q N + k rows, i.e. ``mean_scale = q N / (q N +
        k)``.

    Returns:
      A `DPFinetune`: ``clip(params, x [units, 1, d], mask [units, 1], key)`` is the
      plan's clipped gradient sum; ``update(state, noisy_mean) -> state`` takes an Adam
      step on the privatized mean (the plan's noisy sum / q N, times ``mean_scale``)
      and updates the EMA; ``init(params)`` is the fresh `SynthState`.
    """

    def item_loss(params, x, key):
        return edm_loss(
            denoise_fn, params, x, key, config=edm_config, num_noise=num_noise
        )

    clip = plan.clipped_grad(item_loss, uses_key=True, method=clip_method)
    tx = optax.adam(learning_rate)

    def init(params: PyTree) -> SynthState:
        return SynthState(params, params, tx.init(params), jnp.zeros([], jnp.int32))

    def update(state: SynthState, noisy_mean: PyTree) -> SynthState:
        grads = jax.tree_util.tree_map(lambda g: g * mean_scale, noisy_mean)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return SynthState(
            params,
            ema_update(state.ema_params, params, ema_decay),
            opt_state,
            state.step + 1,
        )

    return DPFinetune(tx, clip, init, update)


@functools.partial(jax.jit, static_argnames=("num_candidates", "num_picked"))
def pick_curious(
    rnd: RNDState,
    pool: jax.Array,
    pool_scores: jax.Array,
    key: jax.Array,
    *,
    num_candidates: int,
    num_picked: int,
) -> tuple[jax.Array, RNDState]:
    """Picks FineCur's synthetic rows for one DP step.

    Draws ``num_candidates`` candidates from the synthetic pool (scored once per epoch),
    keeps the ``num_picked`` with the highest RND error and trains the RND predictor on
    all candidates, as pre-training does. Everything here is a function of the released
    model only (post-processing), so the rows cost no privacy budget.

    Args:
      rnd: the curiosity module.
      pool: synthetic rows [M, d] in generation order.
      pool_scores: their curiosity scores [M].
      key: PRNG key of the draw.
      num_candidates: candidates drawn (static), <= M.
      num_picked: rows kept (static), <= ``num_candidates``.

    Returns:
      The picked rows [num_picked, d] and the updated RND module.
    """
    cands, scores = sample_candidates(key, pool, pool_scores, num=num_candidates)
    _, top = jax.lax.top_k(scores, num_picked)
    rnd, _ = rnd_update(rnd, cands)
    return cands[top], rnd
