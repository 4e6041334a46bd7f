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
staircase proposal ``y = sign (u0 + t v)``, u0 uniform on {0..t-1} (exact: Lemire's
multiply-and-reject on a uint32 word), v ~ Geometric(1 - e^-1), t = floor(s) + 1;
accept with probability ``exp(-y^2 / (2 s^2) + v - s^2 / (2 t^2))`` (<= 1, since
``v <= |y| / t``). About half of the proposals are accepted. All values are drawn at
once in rounds; after 3 rounds the still-unaccepted ones are gathered into a smaller
buffer (``jnp.nonzero`` with a static size) and the rounds go on there, three times,
so the cost stays a few Threefry hashes per value. A value not accepted after every
stage (:func:`failure_probability`: below 1e-16 per draw of 6.6M values at s = 1, below
1e-27 at the s of DP-SGD, thousands) becomes NaN: the DP
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

# Four stages (each a compiled loop: more stages compile slower, ~5 s each on a busy
# CPU). The acceptance is >= 0.349 for every s >= 1 (0.48 for large s): after 3 rounds
# on all n values at most ~27% are left, gathered into a buffer of 35% (+ 64); after 3
# more, <= 7.6% of n, into 10%; after 4 more, <= 1.4% of n, into 2%, where rounds go
# on until every value is accepted or 112 more rounds have run.
_STAGES = ((1.0, 3), (0.35, 3), (0.1 / 0.35, 4), (0.02 / 0.1, 112))
_SLACK = 64
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


def _stages(n: int) -> list[tuple[int, int]]:
    """(buffer size, rounds) of each stage for n values."""
    out: list[tuple[int, int]] = []
    cap = n
    for share, rounds in _STAGES:
        cap = min(cap, int(math.ceil(share * cap)) + (_SLACK if out else 0))
        out.append((cap, rounds))
    return out


def failure_probability(n: int, s: float) -> float:
    """An upper bound on P[some of ``n`` values is never accepted] (then it is NaN).

    A value fails if it is rejected in every round it takes part in (at most
    ``n (1 - a)^R``, R = 125 rounds), or if a stage's buffer overflows (a Chernoff bound
    on the Binomial count of values left, per stage).
    """
    a = acceptance_probability(s)
    stages = _stages(n)
    p = n * (1 - a) ** sum(r for _, r in stages)
    done_rounds = 0
    for (prev, rounds), (cap, _) in zip(stages, stages[1:]):
        done_rounds += rounds
        if cap >= prev:  # the buffer holds every value: it cannot overflow
            continue
        mean = n * (1 - a) ** done_rounds
        if cap <= mean:
            return 1.0
        # multiplicative Chernoff: P[X >= (1 + e) mu] <= exp(-e^2 mu / (2 + e))
        e = cap / mean - 1
        p += math.exp(-e * e * mean / (2 + e))
    return min(1.0, p)


def _words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    bits = jax.random.bits(key, (2,), jnp.uint32)
    return bits[0], bits[1]


def _mul32(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The high and low uint32 words of the 64-bit product a b (16-bit limbs)."""
    m16 = np.uint32(0xFFFF)
    ah, al = a >> np.uint32(16), a & m16
    bh, bl = b >> np.uint32(16), b & m16
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> np.uint32(16)) + (lh & m16) + (hl & m16)
    lo = (mid << np.uint32(16)) | (ll & m16)
    hi = hh + (lh >> np.uint32(16)) + (hl >> np.uint32(16)) + (mid >> np.uint32(16))
    return hi, lo


def _proposal(k0, k1, rnd, idx, s, t):
    """Round ``rnd`` of the proposals at positions ``idx``: (y, accepted)."""
    hi = jnp.full_like(idx, 2 * rnd)
    w1, w2 = threefry2x32(k0, k1, hi, idx)
    w3, w4 = threefry2x32(k0, k1, hi + np.uint32(1), idx)
    # u0 uniform on {0..t-1}, exactly: Lemire's multiply-and-reject (the high word of
    # w1 t, rejected when the low word is below 2^32 mod t), no per-value division
    hi, lo = _mul32(w1, t)
    ok = lo >= (np.uint32(0) - t) % t
    u0 = hi.astype(jnp.int32)
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
    stages = _stages(n)
    out = jnp.zeros(n, jnp.int32)
    done = jnp.zeros(n, bool)
    rnd = 0
    idx, valid = jnp.arange(n, dtype=jnp.uint32), jnp.ones(n, bool)
    for stage, (cap, rounds) in enumerate(stages):
        last = stage == len(stages) - 1

        def body(carry, idx=idx, base=rnd):
            r, val, got = carry
            y, acc = _proposal(k0, k1, np.uint32(base) + r, idx, s, t)
            new = acc & ~got
            return r + np.uint32(1), jnp.where(new, y, val), got | new

        def more(carry, rounds=rounds, last=last):
            r, _, got = carry
            # the last stage stops as soon as every value is accepted
            return (r < rounds) & (jnp.any(~got) if last else True)

        init = (np.uint32(0), jnp.zeros(cap, jnp.int32), ~valid)
        _, val, got = jax.lax.while_loop(more, body, init)
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
        if not last:
            left = valid & ~got
            next_cap = stages[stage + 1][0]
            (sel,) = jnp.nonzero(left, size=next_cap, fill_value=0)
            valid = jnp.arange(next_cap) < jnp.sum(left)
            idx = jnp.where(valid, idx[sel], np.uint32(n))
    return out, done & s_ok


def randomized_round(
    key: jax.Array, x: jax.Array, gamma: jax.typing.ArrayLike
) -> jax.Array:
    """int32 ``floor(x / gamma + u)``, u ~ U[0, 1) per coordinate.

    Unbiased, with error < gamma.

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
