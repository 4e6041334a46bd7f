"""EDM: preconditioning, training loss and the stochastic (churn) sampler.

Everything here follows Karras et al. (2022), "Elucidating the Design Space of
Diffusion-Based Generative Models", https://arxiv.org/abs/2206.00364 (Table 1,
Algorithm 2, Table 5), in the variance-exploding form x_sigma = x_0 + sigma * n.

Constants the PrivORL paper does not state, and where they come from:

* ``sigma_data = 1.0``. PrivORL (Appendix F-A) builds on SynthER (Lu et al. 2023,
  https://arxiv.org/abs/2303.06614), whose released config
  (``config/resmlp_denoiser.gin``: ``ElucidatedDiffusion.sigma_data = 1.0``) uses 1.0
  on standardised transitions. EDM's own value for images in [-1, 1] is 0.5.
* Training noise ``ln sigma ~ N(P_mean=-1.2, P_std=1.2)``: EDM Table 1.
* Sampler: the paper says "the stochastic SDE sampler [...] using the default
  hyper-parameters designed for ImageNet" with 128 steps, i.e. EDM Table 5,
  ImageNet-64: ``S_churn=40, S_min=0.05, S_max=50, S_noise=1.003`` and
  ``sigma_min=0.002, sigma_max=80, rho=7``. (SynthER's own config uses S_churn=80.)
* The squared error is averaged over dimensions (SynthER), not summed (EDM), so the
  per-example gradient norm, which DP-SGD clips, does not grow with the dimension.

What runs where: everything is pure JAX; `edm_sample` is jitted with the denoiser,
shapes and config static, and its denoising loop is a `lax.scan`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple, Protocol, TypeAlias

import chex
import jax
import jax.numpy as jnp

Params: TypeAlias = Any


class ApplyFn(Protocol):
    """A raw network F_theta, e.g. a flax ``module.apply``.

    ``apply_fn(params, x_in [..., d], c_noise [...]) -> [..., d]``.
    """

    def __call__(
        self, params: Params, x: jax.Array, c_noise: jax.Array
    ) -> jax.Array: ...


class DenoiseFn(Protocol):
    """A denoiser D(x; sigma) ~ E[x_0 | x_0 + sigma n = x].

    ``denoise_fn(params, x [..., d], sigma [...]) -> [..., d]``; ``sigma`` broadcasts
    against the leading axes of ``x`` (a scalar works for any batch).
    """

    def __call__(self, params: Params, x: jax.Array, sigma: jax.Array) -> jax.Array: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class EDMConfig:
    """Hyper-parameters of EDM training and sampling (defaults: see module docstring).

    Attributes:
      sigma_data: standard deviation of the (normalised) data.
      p_mean: mean of ln(sigma) for training noise levels.
      p_std: standard deviation of ln(sigma) for training noise levels.
      sigma_min: smallest noise level of the sampling schedule.
      sigma_max: largest noise level of the sampling schedule (the prior's std).
      rho: curvature of the sampling schedule (Eq. 5 of EDM).
      s_churn: total stochasticity added over the schedule.
      s_min: churn is added only for sigma in [s_min, s_max].
      s_max: see ``s_min``.
      s_noise: std of the fresh noise added by churn (slightly above 1 to offset
        detail loss, EDM Sec. 4).
    """

    sigma_data: float = 1.0
    p_mean: float = -1.2
    p_std: float = 1.2
    sigma_min: float = 0.002
    sigma_max: float = 80.0
    rho: float = 7.0
    s_churn: float = 40.0
    s_min: float = 0.05
    s_max: float = 50.0
    s_noise: float = 1.003

    def __post_init__(self):
        for name in ("sigma_data", "p_std", "sigma_min", "sigma_max", "rho", "s_noise"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(
                    f"EDMConfig.{name} must be finite and > 0, got {value}."
                )
        if self.sigma_min >= self.sigma_max:
            raise ValueError(
                f"EDMConfig.sigma_min={self.sigma_min} must be < "
                f"sigma_max={self.sigma_max}."
            )
        if not (math.isfinite(self.s_churn) and self.s_churn >= 0):
            raise ValueError(
                f"EDMConfig.s_churn must be finite and >= 0, got {self.s_churn}."
            )
        if self.s_min > self.s_max:
            raise ValueError(
                f"EDMConfig.s_min={self.s_min} must be <= s_max={self.s_max}."
            )


class Preconditioning(NamedTuple):
    """EDM's preconditioning coefficients (Table 1), each shaped like ``sigma``."""

    c_skip: jax.Array
    c_out: jax.Array
    c_in: jax.Array
    c_noise: jax.Array


def edm_preconditioning(
    sigma: jax.typing.ArrayLike, sigma_data: jax.typing.ArrayLike = 1.0
) -> Preconditioning:
    """Returns c_skip, c_out, c_in, c_noise for noise level(s) ``sigma``.

    c_skip = sd^2 / (s^2 + sd^2), c_out = s sd / sqrt(s^2 + sd^2),
    c_in = 1 / sqrt(s^2 + sd^2), c_noise = ln(s) / 4.

    Args:
      sigma: noise level(s), any shape, > 0.
      sigma_data: data standard deviation.

    Returns:
      A `Preconditioning` whose fields have the shape of ``sigma``.

    >>> pre = edm_preconditioning(1.0, 1.0)
    >>> float(pre.c_skip), round(float(pre.c_out) ** 2, 6)
    (0.5, 0.5)
    """
    sigma = jnp.asarray(sigma, dtype=jnp.result_type(float))
    total = sigma**2 + sigma_data**2
    return Preconditioning(
        c_skip=sigma_data**2 / total,
        c_out=sigma * sigma_data * jax.lax.rsqrt(total),
        c_in=jax.lax.rsqrt(total),
        c_noise=jnp.log(sigma) / 4.0,
    )


def edm_loss_weight(
    sigma: jax.typing.ArrayLike, sigma_data: jax.typing.ArrayLike = 1.0
) -> jax.Array:
    """EDM's loss weight lambda(sigma) = (sigma^2 + sd^2) / (sigma sd)^2 = 1/c_out^2."""
    sigma = jnp.asarray(sigma, dtype=jnp.result_type(float))
    return (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2


@dataclasses.dataclass(frozen=True)
class EDMDenoiser:
    """D(x; sigma) = c_skip x + c_out F(c_in x, c_noise): EDM's preconditioned denoiser.

    A frozen dataclass (not a closure) so it is hashable and can be a static
    argument of `jax.jit`: two equal instances share one compilation.

    Attributes:
      apply_fn: the raw network, ``apply_fn(params, x_in, c_noise)``; e.g.
        ``ResidualMLP(...).apply`` with ``params = {"params": ...}``.
      sigma_data: data standard deviation used in the preconditioning.
    """

    apply_fn: ApplyFn
    sigma_data: float = 1.0

    def __call__(
        self, params: Params, x: jax.Array, sigma: jax.typing.ArrayLike
    ) -> jax.Array:
        """Denoises ``x [..., d]`` at noise level ``sigma`` (scalar or ``[...]``)."""
        sigma = jnp.broadcast_to(jnp.asarray(sigma, x.dtype), x.shape[:-1])
        pre = edm_preconditioning(sigma, self.sigma_data)
        f_x = self.apply_fn(params, pre.c_in[..., None] * x, pre.c_noise)
        chex.assert_equal_shape([f_x, x])
        return pre.c_skip[..., None] * x + pre.c_out[..., None] * f_x


def sample_training_sigma(
    key: jax.Array,
    shape: tuple[int, ...] = (),
    *,
    p_mean: float = -1.2,
    p_std: float = 1.2,
) -> jax.Array:
    """Draws training noise levels with ln(sigma) ~ N(p_mean, p_std^2) (EDM Table 1)."""
    return jnp.exp(p_mean + p_std * jax.random.normal(key, shape))


def edm_loss_at(
    denoise_fn: DenoiseFn,
    params: Params,
    x: jax.Array,
    sigma: jax.typing.ArrayLike,
    noise: jax.Array,
    *,
    sigma_data: float = 1.0,
) -> jax.Array:
    """Weighted denoising loss of ONE example at a given noise level and noise draw.

    lambda(sigma) * mean_d (D(x + sigma n; sigma) - x)^2. Deterministic, so it is also
    the per-example score of the loss-threshold membership-inference attack.

    Args:
      denoise_fn: preconditioned denoiser, e.g. `EDMDenoiser`.
      params: its parameters.
      x: one clean example, [d].
      sigma: noise level, scalar > 0.
      noise: standard normal draw, [d].
      sigma_data: data std (for the weight).

    Returns:
      A scalar.
    """
    chex.assert_rank(x, 1)
    chex.assert_equal_shape([x, noise])
    sigma = jnp.asarray(sigma, x.dtype)
    chex.assert_rank(sigma, 0)
    denoised = denoise_fn(params, x + sigma * noise, sigma)
    return edm_loss_weight(sigma, sigma_data) * jnp.mean((denoised - x) ** 2)


def edm_loss(
    denoise_fn: DenoiseFn,
    params: Params,
    x: jax.Array,
    key: jax.Array,
    *,
    config: EDMConfig = EDMConfig(),
    num_noise: int = 1,
) -> jax.Array:
    """EDM training loss of ONE example, averaged over ``num_noise`` noise draws.

    Written for one example so the privacy core can ``vmap`` it per unit and clip each
    unit's gradient. With ``num_noise = K > 1`` this is DPDM's noise multiplicity
    (Dockhorn et al. 2022, https://arxiv.org/abs/2210.09929, Sec. 3.2): K independent
    (sigma, n) pairs for the same example, their losses averaged *inside* the unit loss,
    so the clipped gradient has lower variance at the same privacy cost.

    Args:
      denoise_fn: preconditioned denoiser ``denoise_fn(params, x, sigma)``.
      params: its parameters.
      x: one clean (normalised) example, [d].
      key: PRNG key for the noise levels and noise.
      config: EDM hyper-parameters (``sigma_data``, ``p_mean``, ``p_std`` are used).
      num_noise: K, the noise multiplicity (static, >= 1).

    Returns:
      A scalar loss.

    Raises:
      ValueError: if ``num_noise < 1``.
    """
    if not isinstance(num_noise, int) or num_noise < 1:
        raise ValueError(f"num_noise must be an int >= 1, got {num_noise!r}.")
    chex.assert_rank(x, 1)
    key_sigma, key_noise = jax.random.split(key)
    sigmas = sample_training_sigma(
        key_sigma, (num_noise,), p_mean=config.p_mean, p_std=config.p_std
    ).astype(x.dtype)
    noises = jax.random.normal(key_noise, (num_noise,) + x.shape, x.dtype)
    # One batched denoiser call over the K draws (not a vmap of `edm_loss_at`): ghost
    # clipping reads each layer's inputs, which an inner vmap would hide from it.
    denoised = denoise_fn(params, x + sigmas[:, None] * noises, sigmas)
    weights = edm_loss_weight(sigmas, config.sigma_data)
    return jnp.mean(weights * jnp.mean((denoised - x) ** 2, axis=-1))


def karras_sigmas(
    num_steps: int,
    *,
    sigma_min: float = 0.002,
    sigma_max: float = 80.0,
    rho: float = 7.0,
) -> jax.Array:
    """EDM's sampling schedule (Eq. 5) with a final 0 appended: shape [num_steps + 1].

    sigma_i = (sigma_max^(1/rho) + i/(N-1) (sigma_min^(1/rho) - sigma_max^(1/rho)))^rho.
    """
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}.")
    # With one step the schedule is just [sigma_max, 0].
    frac = jnp.arange(num_steps) / max(num_steps - 1, 1)
    inv_rho = 1.0 / rho
    sigmas = (
        sigma_max**inv_rho + frac * (sigma_min**inv_rho - sigma_max**inv_rho)
    ) ** rho
    return jnp.concatenate([sigmas, jnp.zeros((1,))])


@functools.partial(
    jax.jit, static_argnames=("denoise_fn", "num_samples", "dim", "num_steps", "config")
)
def edm_sample(
    key: jax.Array,
    denoise_fn: DenoiseFn,
    params: Params,
    *,
    num_samples: int,
    dim: int,
    num_steps: int,
    config: EDMConfig = EDMConfig(),
) -> jax.Array:
    """EDM's stochastic sampler (Algorithm 2: Heun steps with churn), jitted.

    Starts from x_0 ~ N(0, sigma_max^2 I) and runs ``num_steps`` steps along
    `karras_sigmas`; each step first adds churn noise (raising sigma_i to
    sigma_hat = (1 + gamma) sigma_i, gamma = min(S_churn / N, sqrt(2) - 1) inside
    [S_min, S_max], else 0), then takes an Euler step and, except on the last step
    (to sigma = 0), Heun's second-order correction: 2N - 1 denoiser calls.

    Args:
      key: PRNG key.
      denoise_fn: preconditioned denoiser (static: hashable, e.g. `EDMDenoiser`).
      params: its parameters.
      num_samples: batch size B (static).
      dim: data dimension d (static).
      num_steps: N, the number of noise levels (static); 128 at paper scale.
      config: EDM hyper-parameters (static).

    Returns:
      Samples in the (normalised) data space, [num_samples, dim].

    Raises:
      ValueError: if ``num_samples``, ``dim`` or ``num_steps`` is not a positive int.
    """
    for name, value in (("num_samples", num_samples), ("dim", dim)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
    sigmas = karras_sigmas(
        num_steps,
        sigma_min=config.sigma_min,
        sigma_max=config.sigma_max,
        rho=config.rho,
    )
    gamma_max = min(config.s_churn / num_steps, math.sqrt(2.0) - 1.0)
    gammas = jnp.where(
        (sigmas[:-1] >= config.s_min) & (sigmas[:-1] <= config.s_max), gamma_max, 0.0
    )
    key_init, key_steps = jax.random.split(key)
    step_keys = jax.random.split(key_steps, num_steps)
    x = sigmas[0] * jax.random.normal(key_init, (num_samples, dim))

    def churn(x, sigma, gamma, step_key):
        sigma_hat = sigma * (1.0 + gamma)
        eps = config.s_noise * jax.random.normal(step_key, x.shape)
        # sqrt(sigma_hat^2 - sigma^2) written so that gamma = 0 gives exactly 0: the
        # difference of squares can round (or be fused) to a tiny negative -> NaN.
        return x + sigma * jnp.sqrt(gamma * (2.0 + gamma)) * eps, sigma_hat

    def heun_step(x, inputs):
        sigma, sigma_next, gamma, step_key = inputs
        x_hat, sigma_hat = churn(x, sigma, gamma, step_key)
        d = (x_hat - denoise_fn(params, x_hat, sigma_hat)) / sigma_hat
        x_euler = x_hat + (sigma_next - sigma_hat) * d
        d_next = (x_euler - denoise_fn(params, x_euler, sigma_next)) / sigma_next
        return x_hat + (sigma_next - sigma_hat) * 0.5 * (d + d_next), None

    # Steps 0..N-2 end at sigma > 0 and take the Heun correction; the last step ends at
    # sigma = 0, where the correction is undefined, so it is a plain Euler step.
    x, _ = jax.lax.scan(
        heun_step,
        x,
        (sigmas[:-2], sigmas[1:-1], gammas[:-1], step_keys[:-1]),
    )
    x_hat, sigma_hat = churn(x, sigmas[-2], gammas[-1], step_keys[-1])
    return denoise_fn(params, x_hat, sigma_hat)
