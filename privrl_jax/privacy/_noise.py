"""The DP noise draw: Threefry-2x32 written out in ``jax.numpy``.

Bit-identical to ``jax.random``.

Why: on CPU, JAX 0.10 lowers its ``threefry2x32`` primitive as a *rolled* 5-iteration
``fori_loop`` (a while loop in HLO), which XLA cannot fuse with the counters or the
uniform-to-normal map. The DP noise vector has one value per parameter (6.6M on the big
denoiser), and that loop was the largest cost in a ghost-clipped DP-SGD step after the
matmuls. Written here as straight-line ``jnp`` (20 rounds unrolled), the hash, the
counters, the float conversion and ``erf_inv`` fuse into one loop over the output.

What: the same generator, the same key, the same counter layout and the same
uniform-to-normal map as ``jax.random.normal`` under JAX's default
``jax_threefry_partitionable=True`` stream, so :func:`fast_normal` returns *the same
bits* as ``jax.random.normal(key, shape, float32)`` (tests/privacy/test_noise.py checks
equality). The law of the DP noise, and every test of it, is therefore unchanged; only
the HLO that computes it differs.

References:
  J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw, "Parallel random numbers: as easy
  as 1, 2, 3", SC 2011, https://doi.org/10.1145/2063384.2063405 (Threefry-2x32: 20
  rounds of add / rotate / xor, rotation constants (13, 15, 26, 6, 17, 29, 16, 24), a
  key injection every 4 rounds with the Threefish parity constant 0x1BD11BDA).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

# Threefry-2x32 rotation distances, rounds 0-3 and 4-7 of each 8-round cycle (Salmon et
# al. 2011, Table 4), and the Threefish key-schedule parity constant.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _rotl(x: jax.Array, d: int) -> jax.Array:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(
    k0: jax.Array, k1: jax.Array, x0: jax.Array, x1: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The Threefry-2x32 block function (20 rounds), elementwise over the counter words.

    Args:
      k0: the first uint32 key word (a scalar).
      k1: the second uint32 key word (a scalar).
      x0: the first uint32 counter words, any shape.
      x1: the second uint32 counter words, the shape of ``x0``.

    Returns:
      The two uint32 output words, shape of ``x0``.
    """
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(_PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    # Five groups of four rounds; after group g the key words (g+1) mod 3, (g+2) mod 3
    # and the injection counter g+1 are added (the schedule of Threefish, specialised to
    # two words).
    for g in range(5):
        for r in _ROTATIONS[g % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(g + 1) % 3]
        x1 = x1 + ks[(g + 2) % 3] + np.uint32(g + 1)
    return x0, x1


def _key_words(key: jax.Array) -> tuple[jax.Array, jax.Array] | None:
    """The two uint32 words of a scalar Threefry key.

    None for another PRNG implementation.
    """
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape or "threefry2x32" not in str(jax.random.key_impl(key)):
            return None
        data = jax.random.key_data(key)
    else:
        # a raw uint32[2] key is read with the default implementation,
        # as jax.random does
        if key.shape != (2,) or key.dtype != jnp.uint32:
            return None
        # jax.config's flags are dynamic attributes that its stubs do not declare.
        prng_impl = jax.config.jax_default_prng_impl  # type: ignore[attr-defined]
        if "threefry2x32" not in str(prng_impl):
            return None
        data = key
    return data[0], data[1]


def random_bits32(key: jax.Array, shape: Sequence[int]) -> jax.Array:
    """uint32 random bits equal to ``jax.random.bits(key, shape, uint32)``.

    On the partitionable stream.

    Each output word i is ``y0 ^ y1`` of Threefry-2x32 under the key at counter ``(i >>
    32, i & 0xFFFFFFFF)``, i the row-major flat index. Falls back to ``jax.random.bits``
    for a non-Threefry key, the original (non-partitionable) stream or 2^32 values or
    more.
    """
    shape = tuple(int(d) for d in shape)
    words = _key_words(key)
    if (
        words is None
        or not jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
        or np.prod(shape) >= 2**32
    ):
        return jax.random.bits(key, shape, jnp.uint32)
    # Sizes below 2^32 have a zero high counter word: a constant, which XLA folds away.
    lo = jax.lax.iota(jnp.uint32, int(np.prod(shape))).reshape(shape)
    y0, y1 = threefry2x32(words[0], words[1], jnp.zeros_like(lo), lo)
    return y0 ^ y1


def _normal_from_bits(bits: jax.Array) -> jax.Array:
    """``jax.random.normal``'s map from bits to normals.

    23 mantissa bits -> U[nextafter(-1, 0), 1) -> sqrt(2) erfinv(u).
    """
    lo = np.nextafter(np.float32(-1.0), np.float32(0.0), dtype=np.float32)
    hi = np.float32(1.0)
    one = np.array(1.0, np.float32).view(np.uint32)
    floats = jax.lax.bitcast_convert_type(
        (bits >> np.uint32(9)) | one, jnp.float32
    ) - np.float32(1)
    u = jax.lax.max(
        jnp.asarray(lo), floats * (jnp.asarray(hi) - jnp.asarray(lo)) + jnp.asarray(lo)
    )
    return np.float32(np.sqrt(2)) * jax.lax.erf_inv(u)


def fast_normal(key: jax.Array, shape: Sequence[int]) -> jax.Array:
    """float32 N(0, 1) draws equal, bit for bit, to ``jax.random.normal``.

    The reference call is ``jax.random.normal(key, shape, float32)``.

    Args:
      key: a scalar PRNG key (typed or raw uint32[2]).
      shape: the output shape.

    Returns:
      float32 array of ``shape``. Same generator, counters and transform as
      ``jax.random`` (see the module docstring), so the same law and no new
      floating-point caveats: like ``jax.random``, it offers no formal guarantee against
      floating-point attacks on the Gaussian mechanism (Mironov 2012;
      docs/dp_pitfalls.md item 13). A non-Threefry key or the non-partitionable stream
      uses ``jax.random.normal`` itself.

    >>> key = jax.random.key(0)
    >>> bool(jnp.array_equal(fast_normal(key, (3, 5)), jax.random.normal(key, (3, 5))))
    True
    """
    shape = tuple(int(d) for d in shape)
    partitionable = jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
    if _key_words(key) is None or not partitionable:
        return jax.random.normal(key, shape, jnp.float32)
    return _normal_from_bits(random_bits32(key, shape))
