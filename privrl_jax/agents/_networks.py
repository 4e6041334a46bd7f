"""Networks and policy distributions shared by the offline-RL agents.

One place for every network an algorithm builds (MLP, Q, V, the deterministic, Gaussian
and tanh-Gaussian actors), their initialisation, vmapped ensembles over stacked
parameters, and the Gaussian / tanh-Gaussian log-densities. The algorithm modules
(`_td3_bc`, `_iql`, `_edac`) import from here and not from each other.

Initialisation: CORL's (Tarasov et al., `algorithms/offline/{td3_bc,iql,edac}.py`),
kernels and biases. CORL builds its networks from PyTorch `nn.Linear`, whose default
(`reset_parameters`) draws the kernel from kaiming_uniform(a=sqrt(5)) ==
U(+-1/sqrt(fan_in)) and the bias from U(+-1/sqrt(fan_in)); d3rlpy 2.x's encoders and
heads are `nn.Linear` with that default too. So every Dense layer here starts from
U(+-1/sqrt(fan_in)) for kernel and bias unless a network says otherwise:

- TD3+BC (`Actor`, `Critic`) and IQL (`GaussianPolicy`, `TwinQ`, `ValueFunction`):
  the default everywhere (CORL overrides nothing; IQL's `log_std` parameter is 0).
- EDAC actor: trunk kernels default, trunk biases 0.1, both heads (kernel and bias)
  U(+-1e-3) ("init as in the EDAC paper").
- EDAC critic (`VectorizedCritic` of `VectorizedLinear` layers): hidden biases 0.1,
  last layer kernel and bias U(+-3e-3). Its hidden kernels come from
  `kaiming_uniform_(weight[i], a=sqrt(5))` on a weight stored as [in, out], for which
  PyTorch's fan_in is the *out* width: U(+-1/sqrt(fan_out)). We copy that (it only
  differs from the default in the first layer, whose fan_in is obs_dim + act_dim).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeAlias

import flax.linen as nn
import jax
import jax.numpy as jnp

PyTree: TypeAlias = Any

# PyTorch's nn.Linear default kernel: kaiming_uniform(a=sqrt(5)), i.e. gain
# sqrt(2 / (1 + 5)) and bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in). The
# variance_scaling(1/3, "uniform") bound is sqrt(3 * (1/3) / fan_in): the same.
torch_kernel_init = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")
# CORL's VectorizedLinear (EDAC critic): the same formula with PyTorch's fan_in taken
# from a weight laid out [in, out], i.e. U(+-1/sqrt(out)).
corl_vectorized_kernel_init = nn.initializers.variance_scaling(
    1.0 / 3.0, "fan_out", "uniform"
)

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def uniform_init(scale: float) -> nn.initializers.Initializer:
    """U(-scale, scale), the small output-layer init of SAC-N/EDAC (CORL)."""

    def init(
        key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32
    ) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -scale, scale)

    return init


def torch_bias_init(fan_in: int) -> nn.initializers.Initializer:
    """PyTorch's nn.Linear default bias, U(+-1/sqrt(fan_in)) (CORL's and d3rlpy's)."""
    if fan_in < 1:
        raise ValueError(f"fan_in={fan_in!r}: expected a positive int")
    return uniform_init(1.0 / math.sqrt(fan_in))


class MLP(nn.Module):
    """ReLU multi-layer perceptron, PyTorch `nn.Linear`-initialised by default.

    A `None` init means PyTorch's default for that layer: U(+-1/sqrt(fan_in)) for
    kernel and bias, fan_in being the layer's input width.

    Attributes:
      hidden_dims: widths of the hidden layers, e.g. (256, 256).
      out_dim: width of the output layer.
      hidden_kernel_init: kernel init of the hidden layers.
      hidden_bias_init: bias init of the hidden layers (EDAC uses 0.1).
      out_kernel_init: kernel init of the output layer.
      out_bias_init: bias init of the output layer.
    """

    hidden_dims: Sequence[int]
    out_dim: int
    hidden_kernel_init: nn.initializers.Initializer = torch_kernel_init
    hidden_bias_init: nn.initializers.Initializer | None = None
    out_kernel_init: nn.initializers.Initializer = torch_kernel_init
    out_bias_init: nn.initializers.Initializer | None = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for width in self.hidden_dims:
            bias_init = self.hidden_bias_init or torch_bias_init(x.shape[-1])
            x = nn.Dense(
                width, kernel_init=self.hidden_kernel_init, bias_init=bias_init
            )(x)
            x = nn.relu(x)
        bias_init = self.out_bias_init or torch_bias_init(x.shape[-1])
        return nn.Dense(
            self.out_dim, kernel_init=self.out_kernel_init, bias_init=bias_init
        )(x)


class QNetwork(nn.Module):
    """Q(s, a) = MLP([s, a]); output [...] (no trailing unit axis).

    Inits as in `MLP` (None: PyTorch's default).
    """

    hidden_dims: Sequence[int]
    hidden_kernel_init: nn.initializers.Initializer = torch_kernel_init
    hidden_bias_init: nn.initializers.Initializer | None = None
    out_kernel_init: nn.initializers.Initializer = torch_kernel_init
    out_bias_init: nn.initializers.Initializer | None = None

    @nn.compact
    def __call__(self, observations: jax.Array, actions: jax.Array) -> jax.Array:
        x = jnp.concatenate([observations, actions], axis=-1)
        q = MLP(
            self.hidden_dims,
            1,
            hidden_kernel_init=self.hidden_kernel_init,
            hidden_bias_init=self.hidden_bias_init,
            out_kernel_init=self.out_kernel_init,
            out_bias_init=self.out_bias_init,
        )(x)
        return q[..., 0]


class ValueNetwork(nn.Module):
    """V(s) = MLP(s); output [...].

    PyTorch-default init, as CORL's IQL `ValueFunction`.
    """

    hidden_dims: Sequence[int]

    @nn.compact
    def __call__(self, observations: jax.Array) -> jax.Array:
        return MLP(self.hidden_dims, 1)(observations)[..., 0]


class DeterministicActor(nn.Module):
    """a = max_action * tanh(MLP(s)) (TD3+BC); PyTorch-default init (CORL's `Actor`)."""

    hidden_dims: Sequence[int]
    action_dim: int
    max_action: float

    @nn.compact
    def __call__(self, observations: jax.Array) -> jax.Array:
        x = MLP(self.hidden_dims, self.action_dim)(observations)
        return self.max_action * jnp.tanh(x)


class GaussianPolicy(nn.Module):
    """N(tanh(MLP(s)), diag(exp(log_std))) with a state-independent log-std (IQL).

    PyTorch-default init and log_std = 0, as CORL's IQL `GaussianPolicy`; the
    defaults of the log-std clamp are CORL's IQL constants. With
    `log_std_mode="sigmoid"`, d3rlpy's `NormalPolicy(use_std_parameter=True)` instead:
    log_std = min + sigmoid(p) * (max - min), p starting at 0 (so log_std starts at
    the middle of [min, max]; d3rlpy's IQL uses [-5, 2], i.e. -1.5).
    Returns (mean, log_std), each [..., action_dim] (log_std broadcast from [A]).
    """

    hidden_dims: Sequence[int]
    action_dim: int
    log_std_min: float = -20.0
    log_std_max: float = 2.0
    log_std_mode: str = "clamp"

    @nn.compact
    def __call__(self, observations: jax.Array) -> tuple[jax.Array, jax.Array]:
        mean = jnp.tanh(MLP(self.hidden_dims, self.action_dim)(observations))
        log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        if self.log_std_mode == "sigmoid":
            span = self.log_std_max - self.log_std_min
            return mean, self.log_std_min + span * jax.nn.sigmoid(log_std)
        return mean, jnp.clip(log_std, self.log_std_min, self.log_std_max)


class TanhGaussianActor(nn.Module):
    """a = max_action * tanh(u), u ~ N(mu(s), exp(log_std(s))^2) (CORL / EDAC init).

    Hidden kernels PyTorch-default, hidden biases 0.1 and both heads (kernel and
    bias) U(-1e-3, 1e-3), as in CORL's EDAC `Actor` (its two heads are separate
    layers; one layer of width 2A with the same i.i.d. init is the same distribution);
    the log-std clamp defaults are CORL's EDAC constants (the EDAC reference code uses
    the same). Returns (mu, log_std), each [..., action_dim].
    """

    hidden_dims: Sequence[int]
    action_dim: int
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, observations: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = MLP(
            self.hidden_dims,
            2 * self.action_dim,
            hidden_bias_init=nn.initializers.constant(0.1),
            out_kernel_init=uniform_init(1e-3),
            out_bias_init=uniform_init(1e-3),
        )(observations)
        mu, log_std = jnp.split(out, 2, axis=-1)
        return mu, jnp.clip(log_std, self.log_std_min, self.log_std_max)


def gaussian_log_prob(mean: jax.Array, log_std: jax.Array, x: jax.Array) -> jax.Array:
    """Log-density log N(x; mean, diag(exp(log_std))^2), summed over the last axis."""
    z = (x - mean) * jnp.exp(-log_std)
    return (-0.5 * z**2 - log_std - _HALF_LOG_2PI).sum(-1)


def sample_tanh_gaussian(
    key: jax.Array, mu: jax.Array, log_std: jax.Array, max_action: float
) -> tuple[jax.Array, jax.Array]:
    """Reparameterised tanh-Gaussian sample and its log-density.

    Args:
      key: PRNG key.
      mu: [..., A] pre-tanh mean.
      log_std: [..., A] pre-tanh log standard deviation.
      max_action: output scale.

    Returns:
      (actions [..., A], log_prob [...]); log_prob uses CORL's change of variables
      `log N(u) - sum log(1 - tanh(u)^2 + 1e-6)` (without the constant log max_action).
    """
    u = mu + jnp.exp(log_std) * jax.random.normal(key, mu.shape)
    # Keep this op order: XLA fuses differently otherwise and EDAC's updates change
    # in the last bits (tests/agents/test_networks.py pins them).
    log_prob = gaussian_log_prob(mu, log_std, u)
    tanh_u = jnp.tanh(u)
    log_prob = log_prob - jnp.log(1.0 - tanh_u**2 + 1e-6).sum(-1)
    return max_action * tanh_u, log_prob


def init_ensemble(
    module: nn.Module, key: jax.Array, num: int, *example: jax.Array
) -> PyTree:
    """Initialises `num` independent copies of `module`, stacked on a leading axis."""
    return jax.vmap(lambda k: module.init(k, *example))(jax.random.split(key, num))


def apply_ensemble(module: nn.Module, params: PyTree, *inputs: jax.Array) -> jax.Array:
    """Applies stacked parameters [E, ...] to shared inputs; output [E, ...]."""
    return jax.vmap(lambda p: module.apply(p, *inputs))(params)
