"""Floating-point-safe noise: the discrete Gaussian on a grid, in JAX.

Why: the default noise is float32 ``x + sigma * z``. Its output values lie on the
float grid around ``x``, whose spacing depends on ``x`` itself; Mironov (CCS 2012) read
the input back from such low-order bits, and Jin et al. (S&P 2022) did the same to the
Gaussian samplers of DP-SGD libraries. No float sampler fixes that by itself.

What: the clipped sum ``S`` is rounded to the grid ``gamma Z^d`` by randomized
rounding (``k = floor(S / gamma + u)``, u uniform), an integer vector ``y`` drawn from
the multivariate discrete Gaussian N_Z(0, s^2) (Canonne, Kamath & Steinke, NeurIPS
2020, "The discrete Gaussian for differential privacy") is added to ``k`` *in int32*
(exact), and the release is ``gamma (k + y)``. The released value lies on a lattice
that does not depend on the data, so the low bits carry nothing.

The rounding costs sensitivity, and that is accounted: randomized rounding moves each
coordinate by less than ``gamma``, so for any fixed rounding randomness the rounded
sums of two neighbours differ by at most ``Delta' = Delta + gamma sqrt(d)`` in L2 (the
deterministic bound; Kairouz, Liu & Steinke, ICML 2021, "The distributed discrete
Gaussian mechanism", also give a tighter probabilistic one, which we do not use). The
grid is ``gamma = rho Delta / sqrt(d)`` (``rho = grid_fraction``, 1% by default), so
``Delta' = (1 + rho) Delta`` and the noise std in grid units is ``s = sigma Delta' /
gamma``: the noise multiplier (std / sensitivity) is exactly the plan's sigma and the
std in real units grows by the factor ``1 + rho``.

Accounting: dp-accounting (0.6) has no discrete-Gaussian event. CKS20 (Theorem 14)
prove that the multivariate discrete Gaussian with integer L2 sensitivity Delta' and
scale s is ``Delta'^2 / (2 s^2)``-zCDP, the very RDP curve ``alpha / (2 sigma^2)`` of
``GaussianDpEvent(sigma)`` (a test checks ``ZCDpEvent`` and ``GaussianDpEvent`` give
the same epsilon). For full-batch steps the plan's Gaussian event is therefore an exact
account. For Poisson-subsampled steps the plan keeps dp-accounting's subsampled
*continuous* Gaussian bound: CKS20 prove no subsampling theorem, and the sampled
Gaussian's RDP bound (Mironov, Talwar & Zhang 2019) is derived for the continuous
pair; with s in the thousands of grid units the two laws are within float precision
of each other, but that step is an approximation, stated here and in the docs.

Sampler (vectorised, no Python loop per value): CKS20's rejection scheme with a
staircase proposal ``y = sign (u0 + t v)``, u0 uniform on {0..t-1} (exact: integer
rejection of the top of the uint32 range), v ~ Geometric(1 - e^-1), t = floor(s) + 1;
accept with probability ``exp(-y^2 / (2 s^2) + v - s^2 / (2 t^2))`` (<= 1, since
``v <= |y| / t``). About half of the proposals are accepted. All values are drawn at
once in rounds; after a few rounds the still-unaccepted ones are gathered into a
smaller buffer (``jnp.nonzero`` with a static size) and the rounds go on there, so the
cost stays a few Threefry hashes per value. A value not accepted after every stage
(probability below 1e-20 per value; :func:`failure_probability`) becomes NaN: the DP
loop's finiteness check stops the run loudly rather than releasing it.

Precision, honestly: integers are exact (the rounding, ``k + y``, u0, v); the
acceptance test compares a two-word exponential variate with a float32 exponent, so
the law of ``y`` is the discrete Gaussian up to float32 relative error (~1e-7) in its
acceptance probability, for |y| up to ~9 s (beyond, probability < 1e-19). That is an
approximation error of the *law*, smooth in y, not a data-dependent support: the
attack the lattice removes is the latter. The float32 clipped sum itself carries
summation rounding (as in the default mode); it is not included in Delta'.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax.privacy._noise import threefry2x32

PyTree = Any

# Proposal rounds per stage, and the share of a stage's buffer the next stage keeps.
# The acceptance is >= 0.349 for every s >= 1 (0.48 for large s), so after 3 rounds
# at most ~27% of a buffer is left: the next buffer holds 35% (+ 64).
_ROUNDS_PER_STAGE = 3
_NEXT_STAGE_SHARE = 0.35
_SMALLEST_STAGE = 256
_FINAL_ROUNDS = 112
# t = floor(s) + 1 must keep u0 + t v (v <= 44) inside int32.
_MAX_T = 2**25
_TWO32 = float(2**32)
_LN2_32 = 32.0 * math.log(2.0)


def discrete_gaussian_pmf(k: np.typing.ArrayLike, s: float) -> np.ndarray:
    """The exact pmf of N_Z(0, s^2) at integers ``k``: exp(-k^2 / (2 s^2)) / Z.

    Z is summed in float64 over |j| <= 40 s + 40 (the remaining mass is below 1e-300).

    Args:
      k: integer points.
      s: the scale s > 0 (for s >~ 1 very close to the std).

    Returns:
      float64 probabilities, shape of ``k``.
    """
    if not s > 0:
        raise ValueError(f"s must be > 0; got {s!r}.")
    j = np.arange(-int(40 * s + 40), int(40 * s + 40) + 1, dtype=np.float64)
    log_z = np.log(np.sum(np.exp(-(j**2) / (2 * s * s))))
    k = np.asarray(k, np.float64)
    return np.exp(-(k**2) / (2 * s * s) - log_z)


def discrete_gaussian_variance(s: float) -> float:
    """The exact variance of N_Z(0, s^2) (below s^2; CKS20 Proposition 5)."""
    j = np.arange(-int(40 * s + 40), int(40 * s + 40) + 1, dtype=np.float64)
    return float(np.sum(j**2 * discrete_gaussian_pmf(j, s)))


def acceptance_probability(s: float) -> float:
    """P[one proposal is accepted] of the sampler at scale ``s`` (exact, float64)."""
    t = math.floor(s) + 1
    j = np.arange(-int(40 * s + 40), int(40 * s + 41), dtype=np.float64)
    total = np.sum(np.exp(-(j**2) / (2 * s * s)))
    # A proposal is y = +-(u0 + t v) with weight e^-v / (2 t / (1 - e^-1)) per sign
    # (-0 is proposed and rejected); the envelope's bound is M = e^{s^2 / 2 t^2}.
    proposal = 2 * t / (1 - math.exp(-1.0))
    u0_kept = ((2**32 - 1) // t) * t / 2**32
    return float(u0_kept * total / (math.exp(s * s / (2 * t * t)) * proposal))


def _stage_caps(n: int) -> list[int]:
    caps = [n]
    while caps[-1] > _SMALLEST_STAGE:
        caps.append(min(caps[-1], int(math.ceil(_NEXT_STAGE_SHARE * caps[-1])) + 64))
        if caps[-1] == caps[-2]:
            break
    return caps


def failure_probability(n: int, s: float) -> float:
    """An upper bound on P[some of ``n`` values is never accepted] (then it is NaN).

    A value fails if it is rejected in every round it takes part in, or if a stage's
    buffer overflows; the first is at most ``n (1 - a)^R`` (R all rounds it can get),
    the second is bounded by a Chernoff tail per stage.
    """
    a = acceptance_probability(s)
    caps = _stage_caps(n)
    rounds = _ROUNDS_PER_STAGE * (len(caps) - 1) + _FINAL_ROUNDS
    p = n * (1 - a) ** rounds
    left = (1 - a) ** _ROUNDS_PER_STAGE
    for prev, cap in zip(caps, caps[1:]):
        mean = prev * left
        if cap <= mean:
            return 1.0
        # multiplicative Chernoff: P[X >= (1 + e) mu] <= exp(-e^2 mu / (2 + e))
        e = cap / mean - 1
        p += math.exp(-e * e * mean / (2 + e))
    return min(1.0, p)


def _words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    bits = jax.random.bits(key, (2,), jnp.uint32)
    return bits[0], bits[1]


def _proposal(k0, k1, rnd, idx, s, t):
    """Round ``rnd`` of the proposals at positions ``idx``: (y, accepted)."""
    hi = jnp.full_like(idx, 2 * rnd)
    w1, w2 = threefry2x32(k0, k1, hi, idx)
    w3, w4 = threefry2x32(k0, k1, hi + np.uint32(1), idx)
    # u0 uniform on {0..t-1}: reject the top (2^32 mod t) values of w1
    limit = (np.uint32(0xFFFFFFFF) // t) * t
    ok = w1 < limit
    u0 = (w1 % t).astype(jnp.int32)
    # v ~ Geometric(1 - e^-1): floor of an exponential variate
    u = ((w2 >> np.uint32(1)).astype(jnp.float32) + 1.0) * np.float32(2.0**-31)
    v = jnp.floor(-jnp.log(u)).astype(jnp.int32)
    neg = (w2 & np.uint32(1)) == 1
    x = u0 + t.astype(jnp.int32) * v
    ok &= ~(neg & (x == 0))  # zero would be proposed twice
    y = jnp.where(neg, -x, x)
    sf = s.astype(jnp.float32)
    z = y.astype(jnp.float32) / sf
    ratio = sf / t.astype(jnp.float32)
    log_acc = -0.5 * z * z + v.astype(jnp.float32) - 0.5 * ratio * ratio
    # a two-word exponential variate: -log U with U = (w3 + 1) 2^-32, extended below
    # 2^-32 by the second word (memorylessness), so the test resolves e^-44
    e = -jnp.log((w3.astype(jnp.float32) + 1.0) * np.float32(2.0**-32))
    e_low = np.float32(_LN2_32) - jnp.log(
        (w4.astype(jnp.float32) + 1.0) * np.float32(2.0**-32)
    )
    e = jnp.where(w3 == 0, e_low, e)
    return y, ok & (e > -log_acc)


def sample_discrete_gaussian(
    key: jax.Array, n: int, s: jax.typing.ArrayLike
) -> tuple[jax.Array, jax.Array]:
    """``n`` draws of N_Z(0, s^2), vectorised (jittable; ``s`` may be traced).

    Args:
      key: a PRNG key (this draw's own).
      n: how many values (static).
      s: the scale, 1 <= s < 2^25.

    Returns:
      ``(y, ok)``: int32 [n] draws and a bool [n] mask, False where a value was never
      accepted (see :func:`failure_probability`) or ``s`` is out of range; use only
      values with ``ok`` (the noise functions turn the others into NaN).
    """
    s = jnp.asarray(s, jnp.float32)
    t = (jnp.floor(s) + 1.0).astype(jnp.uint32)
    s_ok = (s >= 1.0) & (s < _MAX_T - 1)
    t = jnp.where(s_ok, t, np.uint32(2))
    k0, k1 = _words(key)
    caps = _stage_caps(n)
    out = jnp.zeros(n, jnp.int32)
    done = jnp.zeros(n, bool)
    rnd = 0
    idx = jnp.arange(n, dtype=jnp.uint32)
    valid = jnp.ones(n, bool)
    for stage, cap in enumerate(caps):
        rounds = _FINAL_ROUNDS if stage == len(caps) - 1 else _ROUNDS_PER_STAGE
        val = jnp.zeros(cap, jnp.int32)
        got = ~valid

        def body(r, carry, idx=idx, base=rnd):
            val, got = carry
            y, acc = _proposal(
                k0, k1, np.uint32(base) + r.astype(jnp.uint32), idx, s, t
            )
            new = acc & ~got
            return jnp.where(new, y, val), got | new

        val, got = jax.lax.fori_loop(0, rounds, body, (val, got))
        rnd += rounds
        got_valid = got & valid
        if stage == 0:
            out, done = val, got_valid
        else:
            # padding positions hold n: out of range, dropped by the scatter
            pos = jnp.where(valid, idx, np.uint32(n)).astype(jnp.int32)
            out = out.at[pos].set(
                jnp.where(got_valid, val, out[jnp.minimum(pos, n - 1)]), mode="drop"
            )
            done = done.at[pos].set(
                got_valid | done[jnp.minimum(pos, n - 1)], mode="drop"
            )
        if stage + 1 < len(caps):
            left = valid & ~got
            (sel,) = jnp.nonzero(left, size=caps[stage + 1], fill_value=0)
            count = jnp.sum(left)
            valid = jnp.arange(caps[stage + 1]) < count
            idx = jnp.where(valid, idx[sel], np.uint32(n))
    return out, done & s_ok


def randomized_round(
    key: jax.Array, x: jax.Array, gamma: jax.typing.ArrayLike
) -> jax.Array:
    """int32 ``floor(x / gamma + u)``, u ~ U[0, 1) per coordinate: unbiased, error <
    gamma.

    Exact as long as ``|x| / gamma < 2^23`` (float32 keeps the fraction).
    """
    u = jax.random.uniform(key, x.shape, jnp.float32)
    return jnp.floor(x.astype(jnp.float32) / gamma + u).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class DiscreteGaussianNoise:
    """The discrete-Gaussian noise mode of a :class:`~privrl_jax.privacy.DPPlan`.

    Attributes:
      grid_fraction: rho, the grid step times sqrt(d) as a share of the sensitivity;
        the rounding adds ``rho Delta`` to the sensitivity and the noise std grows by
        ``1 + rho``.
    """

    grid_fraction: float = 0.01

    def __post_init__(self):
        if not 0 < self.grid_fraction <= 1:
            raise ValueError(
                f"grid_fraction must be in (0, 1]; got {self.grid_fraction!r}."
            )

    @property
    def std_factor(self) -> float:
        """Noise std over the default Gaussian's at the same sigma: 1 + rho."""
        return 1.0 + self.grid_fraction

    def describe(self) -> dict[str, Any]:
        """Plain JSON for the plan's description."""
        return {"kind": "discrete_gaussian", "grid_fraction": self.grid_fraction}

    def add_blocks(
        self,
        blocks: Sequence[PyTree],
        key: jax.Array,
        stds: Sequence[jax.typing.ArrayLike],
        sensitivities: Sequence[float],
    ) -> tuple[PyTree, ...]:
        """Rounds each block to its grid and adds discrete Gaussian noise (jittable).

        Args:
          blocks: k pytrees (the clipped sums).
          key: this release's key.
          stds: per block, the noise std in real units, ``sigma (1 + rho) Delta`` (what
            :attr:`DPPlan.noise_stds` gives in this mode).
          sensitivities: per block, Delta (static floats).

        Returns:
          The k released pytrees, ``gamma (round(S) + y)`` as float32 cast to each
          leaf's dtype; NaN where a noise value failed (never released silently).
        """
        out = []
        keys = jax.random.split(key, 2 * len(blocks))
        for i, (block, std, delta) in enumerate(zip(blocks, stds, sensitivities)):
            leaves, treedef = jax.tree_util.tree_flatten(block)
            d = sum(int(np.prod(x.shape)) for x in leaves)
            gamma = self.grid_fraction * float(delta) / math.sqrt(d)
            flat = jnp.concatenate([x.astype(jnp.float32).ravel() for x in leaves])
            k = randomized_round(keys[2 * i], flat, gamma)
            y, ok = sample_discrete_gaussian(
                keys[2 * i + 1], d, jnp.asarray(std, jnp.float32) / np.float32(gamma)
            )
            noised = jnp.where(
                ok, (k + y).astype(jnp.float32) * np.float32(gamma), jnp.nan
            )
            pieces, pos = [], 0
            for x in leaves:
                size = int(np.prod(x.shape))
                pieces.append(noised[pos : pos + size].reshape(x.shape).astype(x.dtype))
                pos += size
            out.append(jax.tree_util.tree_unflatten(treedef, pieces))
        return tuple(out)


def noise_from_description(desc: dict[str, Any] | None) -> DiscreteGaussianNoise | None:
    """The noise mode a plan description recorded (None: the default Gaussian)."""
    if desc is None:
        return None
    if desc.get("kind") != "discrete_gaussian":
        raise ValueError(f"unknown noise mode {desc!r}.")
    return DiscreteGaussianNoise(grid_fraction=float(desc["grid_fraction"]))
