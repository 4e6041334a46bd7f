"""DP-Transformer, PrivORL-j's autoregressive baseline.

A causal transformer over transitions, trained with DP-SGD at trajectory level and
sampled step by step, as in DP text synthesis.

References: Yue et al. 2023, "Synthetic text generation with differential privacy: a
simple and practical recipe" (https://arxiv.org/abs/2210.14348): pre-train a causal
language model on public data, fine-tune it with DP-SGD on the private documents, sample
from it autoregressively; PrivORL (``papers/privorl.txt``, Sec. VIII-A) uses that recipe
as its "DP-Transformer" baseline for trajectories. Decision Transformer (Chen et al.
2021, https://arxiv.org/abs/2106.01345) and Trajectory Transformer (Janner et al. 2021,
https://arxiv.org/abs/2106.02039) are the causal transformers over RL trajectories whose
choices we borrow below.

Choices (the paper gives none), and why:

* **One token per transition** (s, a, r, s', d), embedded by an MLP; the token at
  position t + 1 is step t, position 0 is the link transition (the step before the
  fragment) or, for a trajectory's first fragment, a learned start-of-trajectory vector
  (GPT-2's BOS: the model learns the first step's distribution itself, so no start-state
  distribution is needed). Per-field tokens (Decision Transformer) would make the
  sequence 5x longer, the attention 25x dearer, and sampling need 5H transformer passes
  per fragment instead of H.
* **Continuous outputs by a chained diagonal-Gaussian head**: p(x_t | past) = prod_c
  N(field_c; mu_c, sigma_c^2) where (mu_c, log sigma_c) = MLP_c(h_t, fields_<c of x_t),
  fields in the order s, a, r, s', d. The chain keeps the within-step dependencies a
  single diagonal Gaussian would lose (s' - s is a function of s and a), like Trajectory
  Transformer's per-dim autoregression but per field. A Gaussian head with a learned
  variance (not plain MSE) so that sampling draws from a fitted density; log sigma is
  soft-clamped into [-5, 1] (normalised units) so the NLL stays bounded. d and r are
  modelled as continuous values; d is thresholded at 0.5 on decoding, as for the
  diffusion models.
* **Context = one fragment of H steps plus its link**, the data layout of PrivORL-j: a
  trajectory is cut into fragments, each fragment's steps are predicted from its link
  and its own earlier steps (a context window of H steps, reset at fragment boundaries,
  as a language model truncates long documents to its context length). Sampling does the
  same: fragment k + 1 is generated after the last step of fragment k, so training and
  sampling see the same contexts, and both synthesizers condition on exactly the same
  information.
* **Privacy**: the unit is the trajectory. A fragment's loss is the Gaussian NLL summed
  over its real steps and divided by the public constant H d (as ``fragment_edm_loss``);
  the privacy core sums a trajectory's fragment losses, clips the trajectory's gradient
  once, and Poisson-samples trajectories (the same plan and loop as PrivORL-j). Every op
  is within one example (causal attention over that fragment's tokens, LayerNorm), so
  per-unit gradients are exact under vmap.

Padding: a fragment's padded steps are a suffix; they are zeroed on input, removed as
attention keys (causality already hides them from real steps) and excluded from the
loss, so they get no gradient and never change a real prediction.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from privrl_jax import privacy
from privrl_jax.diffusion import ComponentMLP, MaskedTransformerBlock
from privrl_jax.synth._curiosity import RNDState
from privrl_jax.synth._privorl_j import (
    GeneratedFragments,
    trajectory_dp_finetune,
    unpack_rows,
)
from privrl_jax.synth._privorl_n import (
    DPFinetune,
    PretrainMetrics,
    SynthState,
    make_curious_pretrain_chunk,
)

PyTree = Any
LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0


class StepTransformer(nn.Module):
    """Causal transformer over a fragment's steps, with a chained Gaussian head.

    Attributes:
      component_sizes: per-step field sizes, e.g. (obs, act, 1, obs, 1) for (s, a, r,
        s', d).
      horizon: H, steps per fragment (the context).
      num_layers: transformer blocks.
      num_heads: attention heads.
      embed_dim: token width (divisible by ``num_heads``).
    """

    component_sizes: tuple[int, ...]
    horizon: int
    num_layers: int = 2
    num_heads: int = 4
    embed_dim: int = 64

    @property
    def transition_dim(self) -> int:
        return sum(self.component_sizes)

    def setup(self):
        e = self.embed_dim
        if e % self.num_heads:
            raise ValueError(
                f"embed_dim={e} must be divisible by num_heads={self.num_heads}."
            )
        self.step_embed = ComponentMLP(e, e)
        self.link_embed = ComponentMLP(e, e)
        self.start = self.param("start", nn.initializers.normal(0.02), (e,))
        self.pos_embed = self.param(
            "pos_embed", nn.initializers.normal(0.02), (self.horizon, e)
        )
        self.blocks = [
            MaskedTransformerBlock(self.num_heads) for _ in range(self.num_layers)
        ]
        self.norm = nn.LayerNorm()
        self.heads = [ComponentMLP(e, 2 * size) for size in self.component_sizes]

    def trunk(
        self, x: jax.Array, link: jax.Array, has_link: jax.Array, step_mask: jax.Array
    ) -> jax.Array:
        """Context features h_t for t < H, each from the link and steps < t only.

        Args:
          x: fragment steps, [..., H * d] (normalised, step-major).
          link: the link transition, [..., d] (ignored where ``has_link`` is False).
          has_link: [...] bool, False for a trajectory's first fragment (the learned
            start vector is used instead).
          step_mask: [..., H] bool, True on real steps (a prefix).

        Returns:
          [..., H, embed_dim].

        Raises:
          ValueError: ``x``, ``link`` or ``step_mask`` of the wrong last dimension.
        """
        h_len, d = self.horizon, self.transition_dim
        if x.shape[-1] != h_len * d:
            raise ValueError(
                f"x has last dim {x.shape[-1]}, expected horizon * transition_dim = "
                f"{h_len} * {d}."
            )
        if link.shape[-1] != d:
            raise ValueError(f"link has last dim {link.shape[-1]}, expected {d}.")
        if step_mask.shape[-1] != h_len:
            raise ValueError(
                f"step_mask has last dim {step_mask.shape[-1]}, expected horizon "
                f"{h_len}."
            )
        batch = x.shape[:-1]
        step_mask = step_mask.astype(bool)
        steps = x.reshape(*batch, h_len, d) * step_mask[..., None]
        first = jnp.where(has_link[..., None], self.link_embed(link), self.start)
        # Token t + 1 is step t; step H - 1 is never an input (nothing after it is
        # predicted).
        seq = jnp.concatenate(
            [first[..., None, :], self.step_embed(steps[..., :-1, :])], axis=-2
        )
        seq = seq + self.pos_embed
        valid = jnp.concatenate(
            [jnp.ones(batch + (1,), bool), step_mask[..., :-1]], axis=-1
        )
        attn = valid[..., None, None, :] & jnp.tril(jnp.ones((h_len, h_len), bool))
        for block in self.blocks:
            seq = block(seq, attn)
        return self.norm(seq)

    def head(
        self, h: jax.Array, x_t: jax.Array, field: int
    ) -> tuple[jax.Array, jax.Array]:
        """Gaussian parameters of one field of a step, given context and earlier fields.

        Args:
          h: the step's context features, [..., embed_dim].
          x_t: the step, [..., d]; only the fields before ``field`` are read.
          field: index of the field in ``component_sizes``.

        Returns:
          ``(mean, log_std)``, each [..., component_sizes[field]]; log_std is
          soft-clamped into [LOG_STD_MIN, LOG_STD_MAX].
        """
        start = sum(self.component_sizes[:field])
        inp = jnp.concatenate([h, x_t[..., :start]], axis=-1)
        out = self.heads[field](inp)
        mean, raw = jnp.split(out, 2, axis=-1)
        # Soft clamp into [LOG_STD_MIN, LOG_STD_MAX] (PETS, Chua et al. 2018): smooth,
        # and log_std ~ -0.3 at initialisation, a sensible std for normalised data.
        log_std = LOG_STD_MAX - jax.nn.softplus(LOG_STD_MAX - raw)
        log_std = LOG_STD_MIN + jax.nn.softplus(log_std - LOG_STD_MIN)
        return mean, log_std

    def __call__(self, x, link, has_link, step_mask) -> tuple[jax.Array, jax.Array]:
        """Teacher-forced (mean, log_std) of every step, each [..., H, d]."""
        h = self.trunk(x, link, has_link, step_mask)
        steps = x.reshape(*h.shape[:-1], self.transition_dim)
        outs = [self.head(h, steps, c) for c in range(len(self.component_sizes))]
        return (
            jnp.concatenate([m for m, _ in outs], axis=-1),
            jnp.concatenate([s for _, s in outs], axis=-1),
        )


def ar_fragment_nll(
    model: StepTransformer, params: PyTree, item: dict[str, jax.Array]
) -> jax.Array:
    """Gaussian NLL of ONE fragment, summed over its real steps and divided by H d.

    Dividing by the public constant H d, not by the number of real steps, weighs every
    real step of a trajectory the same (as ``fragment_edm_loss``).

    Args:
      model: the step transformer.
      params: its parameters.
      item: one fragment in PrivORL-j's item layout: ``x`` [H d], ``link`` [d],
        ``has_link`` [] and ``step_mask`` [H].

    Returns:
      The scalar loss.
    """
    x, step_mask = item["x"], item["step_mask"].astype(bool)
    chex.assert_rank(x, 1)
    mean, log_std = model.apply(params, x, item["link"], item["has_link"], step_mask)
    target = x.reshape(mean.shape)
    nll = (
        0.5 * ((target - mean) * jnp.exp(-log_std)) ** 2
        + log_std
        + 0.5 * math.log(2 * math.pi)
    )
    return jnp.sum(jnp.where(step_mask[:, None], nll, 0.0)) / x.shape[-1]


def make_ar_pretrain_chunk(
    model: StepTransformer,
    tx: optax.GradientTransformation,
    *,
    batch_size: int,
    chunk_steps: int,
    ema_decay: float = 0.995,
) -> Callable[..., tuple[SynthState, RNDState, PretrainMetrics]]:
    """Builds non-private pre-training on public packed fragment rows.

    The first half of Yue et al.'s recipe: PrivORL-j's pre-training loop (same
    signature, same batches, rows of :func:`pack_rows`) on the NLL, without curiosity
    (the curiosity module is PrivORL's contribution, not the baseline's; ``pool`` and
    ``pool_scores`` are ignored).

    Args:
      model: the step transformer.
      tx: the optimiser.
      batch_size: B, fragments per update.
      chunk_steps: updates per call (a ``lax.scan``).
      ema_decay: the EMA decay.

    Returns:
      The jitted ``chunk(state, rnd, rows, pool, pool_scores, key) -> (state, rnd,
      metrics)`` of ``make_fragment_pretrain_chunk`` (``rnd`` is returned unchanged,
      metrics are averaged over the chunk's updates).
    """
    horizon, dim = model.horizon, model.transition_dim

    def row_loss(params, row, key):
        del key
        return ar_fragment_nll(
            model, params, unpack_rows(row, horizon=horizon, dim=dim)
        )

    return make_curious_pretrain_chunk(
        row_loss,
        tx,
        batch_size=batch_size,
        chunk_steps=chunk_steps,
        ema_decay=ema_decay,
        curiosity_rate=0.0,
    )


def make_ar_dp_finetune(
    model: StepTransformer,
    plan: privacy.DPPlan,
    *,
    learning_rate: float,
    ema_decay: float = 0.995,
    ema_warmup: bool = True,
    clip_method: str = "vmap",
) -> DPFinetune:
    """Builds trajectory-level DP-SGD for the DP-Transformer, one trajectory per unit.

    A trajectory's fragment losses are summed and its gradient is clipped to C once.

    Args:
      model: the step transformer.
      plan: the DP plan; its clip norm bounds each trajectory's gradient.
      learning_rate: Adam step size.
      ema_decay: the EMA decay (its upper bound with ``ema_warmup``).
      ema_warmup: warm the EMA decay up (see ``trajectory_dp_finetune``).
      clip_method: per-unit clipping method of ``plan.clipped_grad``: ``"vmap"`` or
        ``"ghost"``.

    Returns:
      A `DPFinetune`: ``clip(params, items [units, F, ...], fragment_mask [units, F])``
      is the plan's clipped sum of the per-fragment NLL (no key); ``update`` is
      PrivORL-j's: Adam on the plan's noisy mean, then the EMA.
    """

    def item_loss(params, item):
        return ar_fragment_nll(model, params, item)

    return trajectory_dp_finetune(
        item_loss,
        plan,
        learning_rate=learning_rate,
        ema_decay=ema_decay,
        ema_warmup=ema_warmup,
        clip_method=clip_method,
        uses_key=False,
    )


@functools.partial(jax.jit, static_argnames=("model", "num", "num_fragments"))
def generate_ar_fragments(
    key: jax.Array,
    model: StepTransformer,
    params: PyTree,
    *,
    num: int,
    num_fragments: int,
) -> GeneratedFragments:
    """Samples ``num`` trajectories of ``num_fragments`` fragments autoregressively.

    The first fragment starts from the learned start vector (``has_link = False``); step
    t of a fragment is drawn field by field from the chained Gaussian head given the
    link and steps < t (``lax.scan`` over steps, one transformer pass each); fragment
    k + 1's link is fragment k's last step (``lax.scan`` over fragments). Same output as
    ``generate_fragments``, so the stitching, cuts at terminals and D4RL export are
    shared. Jitted.

    Args:
      key: PRNG key.
      model: the step transformer (static).
      params: its parameters (the EMA weights, in the pipeline).
      num: B, trajectories (static).
      num_fragments: F, fragments per trajectory (static).

    Returns:
      `GeneratedFragments`: ``fragments`` [B, F, H, d], ``links`` [B, F, d] and
      ``has_link`` [B, F], in the normalised space.
    """
    h_len, d = model.horizon, model.transition_dim
    sizes = model.component_sizes
    full = jnp.ones((num, h_len), bool)

    def step(carry, inp):
        x, link, has_link = carry
        t, k = inp
        h = model.apply(
            params,
            x.reshape(num, h_len * d),
            link,
            has_link,
            full,
            method=StepTransformer.trunk,
        )[:, t]
        x_t = jnp.zeros((num, d))
        start = 0
        for c, size in enumerate(sizes):  # fields in order: static, 5 iterations
            mean, log_std = model.apply(params, h, x_t, c, method=StepTransformer.head)
            eps = jax.random.normal(jax.random.fold_in(k, c), mean.shape)
            x_t = x_t.at[:, start : start + size].set(mean + jnp.exp(log_std) * eps)
            start += size
        return (x.at[:, t].set(x_t), link, has_link), None

    def fragment(carry, k):
        link, has_link = carry
        x0 = jnp.zeros((num, h_len, d))
        (x, _, _), _ = jax.lax.scan(
            step, (x0, link, has_link), (jnp.arange(h_len), jax.random.split(k, h_len))
        )
        return (x[:, -1], jnp.ones((num,), bool)), (x, link, has_link)

    init = (jnp.zeros((num, d)), jnp.zeros((num,), bool))
    _, (frags, links, has) = jax.lax.scan(
        fragment, init, jax.random.split(key, num_fragments)
    )
    swap = lambda a: jnp.swapaxes(a, 0, 1)
    return GeneratedFragments(swap(frags), swap(links), swap(has))


def init_step_transformer(key: jax.Array, model: StepTransformer) -> PyTree:
    """Initialises the parameters of ``model`` on one dummy fragment.

    Args:
      key: PRNG key.
      model: the step transformer.

    Returns:
      The parameters (a flax variables dict).
    """
    d, h_len = model.transition_dim, model.horizon
    return model.init(
        key, jnp.zeros(h_len * d), jnp.zeros(d), jnp.array(False), jnp.ones(h_len, bool)
    )


__all__ = [
    "StepTransformer",
    "ar_fragment_nll",
    "generate_ar_fragments",
    "init_step_transformer",
    "make_ar_dp_finetune",
    "make_ar_pretrain_chunk",
]
