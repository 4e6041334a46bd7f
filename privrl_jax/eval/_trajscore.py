"""TrajScore: BERTScore-style similarity of synthetic and real trajectories.

PrivORL Sec. VIII-C, Appendix H-C.

The paper gives the idea only: "TrajScore uses pre-trained MLPs in an autoencoder as a
trajectory encoder [...] to compute trajectory embeddings. It calculates similarity via
cosine similarity between generated and real trajectories", inspired by BERTScore (Zhang
et al. 2020, https://arxiv.org/abs/1904.09675). Our exact definition:

1. **Elements.** Each trajectory (steps encoded and normalised as the synthesizer sees
   them, [s, a, r, s' (or s' - s), d]) is cut into non-overlapping windows of W
   consecutive steps from its start; a tail shorter than W is dropped. A window,
   flattened to [W d], is one element (the analogue of a token).
2. **Encoder.** An MLP autoencoder (encoder [W d] -> hidden -> latent, decoder back,
   ReLU, mean squared reconstruction error, Adam) trained on windows of *public*
   trajectories only, so the metric itself reads no sensitive data before it is applied.
   The embedding of a window is the encoder's output.
3. **Score.** With e(.) the embeddings and cos the cosine similarity, for real windows R
   and synthetic windows S (BERTScore's greedy matching, without idf weights or baseline
   rescaling): recall = mean_{x in R} max_{y in S} cos(e(x), e(y)), precision = mean_{y
   in S} max_{x in R} cos(e(x), e(y)), TrajScore = F1 = 2 P R / (P + R). Identical sets
   give 1; F1 <= 1 always (when P + R > 0).

TrajScore compares with the real (sensitive) trajectories, so it is an audit quantity:
never publish it as part of a DP release.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax


class _AutoEncoder(nn.Module):
    hidden: tuple[int, ...]
    latent: int
    out: int

    def setup(self):
        self.enc = [nn.Dense(h) for h in self.hidden] + [nn.Dense(self.latent)]
        self.dec = [nn.Dense(h) for h in reversed(self.hidden)] + [nn.Dense(self.out)]

    def encode(self, x):
        for layer in self.enc[:-1]:
            x = nn.relu(layer(x))
        return self.enc[-1](x)

    def __call__(self, x):
        z = self.encode(x)
        for layer in self.dec[:-1]:
            z = nn.relu(layer(z))
        return self.dec[-1](z)


class TrajEncoder(NamedTuple):
    """A trained window encoder: ``embed(windows [n, W d]) -> [n, latent]``."""

    params: Any
    module: Any
    window: int

    def embed(self, windows: jax.typing.ArrayLike) -> jax.Array:
        return _embed(self.module, self.params, jnp.asarray(windows, jnp.float32))


@functools.partial(jax.jit, static_argnums=0)
def _embed(module, params, x):
    return module.apply(params, x, method=module.encode)


def trajectory_windows(
    steps: np.ndarray, lengths: np.ndarray, window: int
) -> np.ndarray:
    """Non-overlapping windows of ``window`` steps from each trajectory's start.

    Each window is flattened to one row.

    Args:
      steps: [B, T, d] encoded steps of padded trajectories.
      lengths: [B] real lengths.
      window: The window length W.

    Returns:
      [sum_b floor(lengths[b] / W), W d]; tails shorter than W are dropped.
    """
    steps = np.asarray(steps)
    out = []
    for b, length in enumerate(np.asarray(lengths)):
        for start in range(0, int(length) - window + 1, window):
            out.append(steps[b, start : start + window].reshape(-1))
    return np.asarray(out, np.float32).reshape(len(out), window * steps.shape[-1])


def fit_trajectory_encoder(
    key: jax.Array,
    public_windows: np.ndarray,
    *,
    window: int,
    latent_dim: int = 32,
    hidden: tuple[int, ...] = (256, 256),
    steps: int = 2_000,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
) -> TrajEncoder:
    """Trains the TrajScore autoencoder on public windows and returns its encoder.

    Minibatches are drawn uniformly with replacement; the loss is the mean squared
    reconstruction error, minimised by Adam in one jitted scan.

    Args:
      key: PRNG key of the initialisation and the batches.
      public_windows: [n, W d] windows of public trajectories
        (`trajectory_windows`); never sensitive data.
      window: W, stored in the encoder.
      latent_dim: the embedding width.
      hidden: widths of the encoder's hidden layers (the decoder mirrors them).
      steps: Adam steps.
      batch_size: windows per step.
      learning_rate: Adam's learning rate.

    Returns:
      The trained `TrajEncoder`.

    Raises:
      ValueError: `public_windows` not [n >= 1, W d].
    """
    x = jnp.asarray(public_windows, jnp.float32)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(
            f"public_windows must be [n >= 1, W d]; got shape {tuple(x.shape)}."
        )
    module = _AutoEncoder(tuple(hidden), latent_dim, x.shape[1])
    k_init, k_train = jax.random.split(key)
    params = module.init(k_init, x[:1])
    tx = optax.adam(learning_rate)

    def step(carry, k):
        params, opt = carry
        batch = x[jax.random.randint(k, (batch_size,), 0, x.shape[0])]
        loss, g = jax.value_and_grad(
            lambda p: jnp.mean((module.apply(p, batch) - batch) ** 2)
        )(params)
        upd, opt = tx.update(g, opt, params)
        return (optax.apply_updates(params, upd), opt), loss

    (params, _), _ = jax.jit(
        lambda p, o, k: jax.lax.scan(step, (p, o), jax.random.split(k, steps))
    )(params, tx.init(params), k_train)
    return TrajEncoder(params, module, window)


def trajscore_from_embeddings(
    real: jax.typing.ArrayLike, synthetic: jax.typing.ArrayLike
) -> dict[str, float | int]:
    """Precision, recall and F1 of greedy cosine matching (see the module docstring).

    >>> e = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> trajscore_from_embeddings(e, e)["f1"]
    1.0
    """
    r = np.asarray(real, np.float64)
    s = np.asarray(synthetic, np.float64)
    if (
        r.ndim != 2
        or s.ndim != 2
        or not len(r)
        or not len(s)
        or r.shape[1] != s.shape[1]
    ):
        raise ValueError(
            f"need two non-empty [n, k] embedding sets; got {r.shape} and {s.shape}."
        )
    unit = lambda a: a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    cos = unit(r) @ unit(s).T
    recall = float(cos.max(axis=1).mean())
    precision = float(cos.max(axis=0).mean())
    f1 = (
        2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    )
    return {
        "precision": precision,
        "recall": recall,
        "f1": float(min(f1, 1.0)),
        "num_real": len(r),
        "num_synthetic": len(s),
    }


def trajscore(
    encoder: TrajEncoder, real_windows: np.ndarray, synthetic_windows: np.ndarray
) -> dict[str, float | int]:
    """TrajScore of synthetic vs real windows under a trained encoder.

    An audit quantity: it reads the real (sensitive) windows, so it is not part of
    a DP release.

    Args:
      encoder: from `fit_trajectory_encoder` (on public windows).
      real_windows: [n, W d] windows of the real trajectories.
      synthetic_windows: [m, W d] windows of the synthetic trajectories.

    Returns:
      {"precision", "recall", "f1" (TrajScore), "num_real", "num_synthetic"}:
      greedy cosine matching of the embeddings (see the module docstring).

    Raises:
      ValueError: an empty set of windows.
    """
    return trajscore_from_embeddings(
        encoder.embed(real_windows), encoder.embed(synthetic_windows)
    )
