"""PrivORL-j's steps: fragment pre-training, trajectory DP fine-tuning, generation.

Trajectories are generated as conditioned, stitched fragments. Pure, jitted functions
over pytrees; the pipeline (``privrl_jax.pipelines.privorl_j``) owns data, files,
progress bars, checkpoints and the ledger.

Reference: PrivORL (``papers/privorl.txt``), Sections VI-VII and Appendix F-A. The unit
of privacy is the trajectory: DP data are laid out ``[trajectories, fragments, ...]``
(items = fragments, an item mask marks the padding fragments), so ``plan.clipped_grad``
sums a trajectory's fragment losses and clips the trajectory's whole gradient once, and
the plan's Poisson sampler draws whole trajectories with rate q = batch trajectories /
total trajectories (Sec. VII).

Layout of one fragment item (normalised space): ``x [H d]`` (steps in order, each step's
components s, a, r, s', d), ``link [d]``, ``has_link []`` and ``step_mask [H]``. For the
curiosity module and public batches a fragment is packed into one flat row ``[x, link,
has_link, step_mask]`` (:func:`pack_rows`), so PrivORL-n's RND and replacement functions
apply unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from privrl_jax import privacy
from privrl_jax.diffusion import (
    EDMConfig,
    FragmentDenoiser,
    fragment_edm_loss,
    sample_fragments,
)
from privrl_jax.synth._curiosity import (
    RNDState,
)
from privrl_jax.synth._privorl_n import (
    DPFinetune,
    PretrainMetrics,
    SynthState,
    ema_update,
    make_curious_pretrain_chunk,
)

PyTree = Any


def pack_rows(items: dict[str, jax.Array]) -> jax.Array:
    """Packs fragment items into flat float rows.

    Args:
      items: ``x`` [..., H d], ``link`` [..., d], ``has_link`` [...] and ``step_mask``
        [..., H].

    Returns:
      Rows [..., H d + d + 1 + H] in ``x``'s dtype, masks as 0/1.
    """
    x = items["x"]
    return jnp.concatenate(
        [
            x,
            items["link"].astype(x.dtype),
            items["has_link"][..., None].astype(x.dtype),
            items["step_mask"].astype(x.dtype),
        ],
        axis=-1,
    )


def unpack_rows(rows: jax.Array, *, horizon: int, dim: int) -> dict[str, jax.Array]:
    """Inverse of :func:`pack_rows` (masks back to bool)."""
    hd = horizon * dim
    return {
        "x": rows[..., :hd],
        "link": rows[..., hd : hd + dim],
        "has_link": rows[..., hd + dim] > 0.5,
        "step_mask": rows[..., hd + dim + 1 :] > 0.5,
    }


def make_fragment_pretrain_chunk(
    denoise_fn: FragmentDenoiser,
    tx: optax.GradientTransformation,
    *,
    horizon: int,
    dim: int,
    batch_size: int,
    chunk_steps: int,
    ema_decay: float = 0.995,
    edm_config: EDMConfig = EDMConfig(),
    curiosity_rate: float = 0.3,
) -> Callable[..., tuple[SynthState, RNDState, PretrainMetrics]]:
    """Builds non-private pre-training on public fragments, in jitted chunks of steps.

    PrivORL-n's pre-training (``make_pretrain_chunk``) on fragments: each update draws
    ``batch_size`` public fragment rows (:func:`pack_rows`) uniformly, replaces round(p
    B) of them by the most curious synthetic fragments of the pool (PrivORL Sec. V-B;
    the RND module sees whole packed rows), takes an optimiser step on the mean fragment
    EDM loss, updates the EMA and trains the RND predictor on the candidates.

    Args:
      denoise_fn: the fragment denoiser.
      tx: the optimiser.
      horizon: H, steps per fragment.
      dim: d, encoded width of one transition.
      batch_size: B, fragments per update.
      chunk_steps: updates per call (a ``lax.scan``).
      ema_decay: the EMA decay.
      edm_config: EDM constants of the loss.
      curiosity_rate: p in [0, 1], the share of the batch replaced; 0 ignores the pool.

    Returns:
      The jitted ``chunk(state, rnd, rows, pool, pool_scores, key) -> (state, rnd,
      metrics)``: ``rows`` [N, H d + d + 1 + H] public packed fragments, ``pool``
      [M, same] synthetic ones with ``pool_scores`` [M] (M >= B when p > 0), ``metrics``
      are the `PretrainMetrics` averaged over the chunk's updates.
    """

    def row_loss(params, row, key):
        item = unpack_rows(row, horizon=horizon, dim=dim)
        return fragment_edm_loss(denoise_fn, params, item, key, config=edm_config)

    return make_curious_pretrain_chunk(
        row_loss,
        tx,
        batch_size=batch_size,
        chunk_steps=chunk_steps,
        ema_decay=ema_decay,
        curiosity_rate=curiosity_rate,
    )


@functools.partial(
    jax.jit, static_argnames=("denoise_fn", "horizon", "num_steps", "config")
)
def sample_pool_rows(
    key: jax.Array,
    denoise_fn: FragmentDenoiser,
    params: PyTree,
    public_rows: jax.Array,
    *,
    horizon: int,
    num_steps: int,
    config: EDMConfig = EDMConfig(),
) -> jax.Array:
    """Samples synthetic fragment rows for the curiosity pool, one per public row.

    Each synthetic fragment is conditioned on the link (and ``has_link``) of a public
    fragment, so the pool covers first and later fragments in the public proportions;
    its step mask is all ones.

    Args:
      key: PRNG key.
      denoise_fn: the fragment denoiser (static).
      params: its parameters (the EMA weights, in the pipeline).
      public_rows: [M, H d + d + 1 + H] packed public fragments (:func:`pack_rows`).
      horizon: H (static).
      num_steps: sampler steps (static).
      config: EDM constants (static).

    Returns:
      [M, H d + d + 1 + H] packed synthetic fragments.
    """
    dim = (public_rows.shape[-1] - 1 - horizon) // (horizon + 1)
    cond = unpack_rows(public_rows, horizon=horizon, dim=dim)
    x = sample_fragments(
        key,
        denoise_fn,
        params,
        cond["link"],
        cond["has_link"],
        horizon=horizon,
        num_steps=num_steps,
        config=config,
    )
    return pack_rows(
        {
            "x": x,
            "link": cond["link"],
            "has_link": cond["has_link"],
            "step_mask": jnp.ones(x.shape[:-1] + (horizon,), bool),
        }
    )


def make_trajectory_dp_finetune(
    denoise_fn: FragmentDenoiser,
    plan: privacy.DPPlan,
    *,
    learning_rate: float,
    ema_decay: float = 0.995,
    ema_warmup: bool = True,
    edm_config: EDMConfig = EDMConfig(),
    clip_method: str = "vmap",
) -> DPFinetune:
    """Builds DP-SGD fine-tuning of the fragment denoiser, one trajectory per unit.

    The privacy core sums a trajectory's valid fragment losses, takes that sum's
    gradient and clips it to C once, so a trajectory of 50 fragments moves the sum by
    at most C, as one of 1 fragment does.

    Args:
      denoise_fn: the fragment denoiser.
      plan: the DP plan; its clip norm bounds each trajectory's gradient.
      learning_rate: Adam step size.
      ema_decay: the EMA decay (its upper bound with ``ema_warmup``).
      ema_warmup: warm the EMA decay up as in :func:`trajectory_dp_finetune`.
      edm_config: EDM constants of the loss.
      clip_method: per-unit clipping method of ``plan.clipped_grad``: ``"vmap"`` or
        ``"ghost"``.

    Returns:
      A `DPFinetune`: ``clip(params, items [units, F, ...], fragment_mask [units, F],
      key)`` is the plan's clipped gradient sum of the per-fragment EDM loss;
      ``update(state, noisy_mean)`` takes an Adam step on the plan's noisy mean (noisy
      sum / q N, N = number of trajectories) and updates the EMA; ``init(params)`` is
      the fresh `SynthState`.
    """

    def item_loss(params, item, key):
        return fragment_edm_loss(denoise_fn, params, item, key, config=edm_config)

    return trajectory_dp_finetune(
        item_loss,
        plan,
        learning_rate=learning_rate,
        ema_decay=ema_decay,
        ema_warmup=ema_warmup,
        clip_method=clip_method,
        uses_key=True,
    )


def trajectory_dp_finetune(
    item_loss: Callable[..., jax.Array],
    plan: privacy.DPPlan,
    *,
    learning_rate: float,
    ema_decay: float = 0.995,
    ema_warmup: bool = True,
    clip_method: str = "vmap",
    uses_key: bool = True,
) -> DPFinetune:
    """Builds trajectory-level DP-SGD of any per-fragment loss.

    Shared by PrivORL-j (EDM loss) and the DP-Transformer baseline (Gaussian NLL): the
    plan's clipped sum over units ``[units, F, ...]`` with a fragment mask, Adam on the
    noisy mean, EMA.

    The EMA decay of step t (from 0) is ``min(ema_decay, (1 + t) / (10 + t))``, the
    ``num_updates`` warm-up of TensorFlow's ``ExponentialMovingAverage``
    (docs/privorl_j.md): a trajectory-level run is short (tens of DP steps at q = B / N
    trajectories), and a fixed 0.995 would release an EMA that is still ~73% the
    pre-trained model after 62 steps, so the DP fine-tuning, and epsilon, would barely
    show in the release. ``ema_warmup=False`` keeps ``ema_decay`` from the first step
    (the schedule before issue 24; ``ema_decay=0`` then releases the last iterate).

    Args:
      item_loss: ``item_loss(params, item[, key]) -> scalar`` for one fragment.
      plan: the DP plan.
      learning_rate: Adam step size.
      ema_decay: the EMA decay.
      ema_warmup: warm the decay up as above.
      clip_method: ``"vmap"`` or ``"ghost"``.
      uses_key: whether ``item_loss`` takes a PRNG key.

    Returns:
      A `DPFinetune` (see :func:`make_trajectory_dp_finetune`).
    """
    clip = plan.clipped_grad(item_loss, uses_key=uses_key, method=clip_method)
    tx = optax.adam(learning_rate)

    def init(params: PyTree) -> SynthState:
        return SynthState(params, params, tx.init(params), jnp.zeros([], jnp.int32))

    def update(state: SynthState, noisy_mean: PyTree) -> SynthState:
        updates, opt_state = tx.update(noisy_mean, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        t = state.step.astype(jnp.float32)
        decay = (
            jnp.minimum(ema_decay, (1.0 + t) / (10.0 + t))
            if ema_warmup
            else jnp.asarray(ema_decay, jnp.float32)
        )
        return SynthState(
            params,
            ema_update(state.ema_params, params, decay),
            opt_state,
            state.step + 1,
        )

    return DPFinetune(tx, clip, init, update)


class GeneratedFragments(NamedTuple):
    """Fragments drawn one after another, each conditioned on the previous one.

    ``links[:, k + 1] == fragments[:, k, -1]`` exactly.
    """

    fragments: jax.Array  # [B, F, H, d]
    links: jax.Array  # [B, F, d]
    has_link: jax.Array  # [B, F]


@functools.partial(
    jax.jit,
    static_argnames=(
        "denoise_fn",
        "num",
        "num_fragments",
        "horizon",
        "dim",
        "num_steps",
        "config",
    ),
)
def generate_fragments(
    key: jax.Array,
    denoise_fn: FragmentDenoiser,
    params: PyTree,
    *,
    num: int,
    num_fragments: int,
    horizon: int,
    dim: int,
    num_steps: int,
    config: EDMConfig = EDMConfig(),
) -> GeneratedFragments:
    """Draws ``num`` trajectories of ``num_fragments`` fragments (PrivORL Sec. VI-C).

    The first fragment is conditioned on no link (the zero link of training, ``has_link
    = False``); fragment k + 1 on the last transition of fragment k. The loop over
    fragments is a ``lax.scan``; cutting at a terminal or at the requested length is
    :func:`stitched_lengths`. Jitted.

    Args:
      key: PRNG key.
      denoise_fn: the fragment denoiser (static).
      params: its parameters (the EMA weights, in the pipeline).
      num: B, trajectories (static).
      num_fragments: F, fragments per trajectory (static).
      horizon: H, steps per fragment (static).
      dim: d, encoded width of one transition (static).
      num_steps: sampler steps per fragment (static).
      config: EDM constants (static).

    Returns:
      `GeneratedFragments`: ``fragments`` [B, F, H, d], ``links`` [B, F, d] and
      ``has_link`` [B, F], all in the normalised space.
    """

    def body(carry, k):
        link, has_link = carry
        frag = sample_fragments(
            k,
            denoise_fn,
            params,
            link,
            has_link,
            horizon=horizon,
            num_steps=num_steps,
            config=config,
        )
        frag = frag.reshape(num, horizon, dim)
        return (frag[:, -1], jnp.ones((num,), bool)), (frag, link, has_link)

    init = (jnp.zeros((num, dim)), jnp.zeros((num,), bool))
    _, (frags, links, has) = jax.lax.scan(
        body, init, jax.random.split(key, num_fragments)
    )
    swap = lambda a: jnp.swapaxes(a, 0, 1)
    return GeneratedFragments(swap(frags), swap(links), swap(has))


@jax.jit
def stitched_lengths(
    terminals: jax.Array, requested: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Length of each stitched trajectory and whether it ended in a terminal.

    A trajectory stops at its first step with d = 1 (inclusive) or after ``requested``
    steps, whichever comes first.

    Args:
      terminals: [B, T] in {0, 1}.
      requested: [B] int <= T.

    Returns:
      The lengths [B] int32 and a bool [B], True where a terminal ended the trajectory.
    """
    t = terminals.shape[1]
    steps = jnp.arange(t)
    first = jnp.min(jnp.where(terminals > 0.5, steps, t), axis=1)
    ends_terminal = first < requested
    return jnp.where(ends_terminal, first + 1, requested).astype(
        jnp.int32
    ), ends_terminal
