"""The unrolled Threefry draw gives jax.random's bits, so the DP noise law is
jax.random's."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats

from privrl_jax.privacy import _aggregation
from privrl_jax.privacy._aggregation import add_noise_blocks, dpsgd
from privrl_jax.privacy._noise import (
    fast_normal,
    fast_normals,
    random_bits32,
    threefry2x32,
)

SHAPES = [
    (),
    (0,),
    (1,),
    (2,),
    (7,),
    (3, 5),
    (4, 0, 3),
    (2, 3, 4, 5),
    (100_001,),
    (1024, 130),
]
KEYS = [
    lambda: jax.random.key(0),
    lambda: jax.random.fold_in(jax.random.key(7), 3),
    lambda: jax.random.PRNGKey(2**31 + 5),  # raw uint32[2] key
    lambda: jax.random.split(jax.random.key(123), 4)[3],
]


def test_block_function_matches_the_published_known_answers():
    # Known-answer vectors of the Random123 distribution (kat_vectors, threefry2x32_20),
    # which the 2011 paper's reference implementation ships; also asserted by JAX's own
    # tests.
    u = lambda *v: tuple(np.uint32(x) for x in v)  # noqa: E731
    cases = [
        (u(0, 0), u(0, 0), (0x6B200159, 0x99BA4EFE)),
        (
            u(0xFFFFFFFF, 0xFFFFFFFF),
            u(0xFFFFFFFF, 0xFFFFFFFF),
            (0x1CB996FC, 0xBB002BE7),
        ),
        (
            u(0x13198A2E, 0x03707344),
            u(0x243F6A88, 0x85A308D3),
            (0xC4923A9C, 0x483DF7A0),
        ),
    ]
    for key, count, want in cases:
        got = threefry2x32(
            *(jnp.asarray(k) for k in key), *(jnp.asarray(c) for c in count)
        )
        assert tuple(int(g) for g in got) == want


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("key_fn", KEYS)
def test_bits_and_normals_equal_jax_random(shape, key_fn, jit):
    key = key_fn()
    bits = jax.jit(random_bits32, static_argnums=1) if jit else random_bits32
    normal = jax.jit(fast_normal, static_argnums=1) if jit else fast_normal
    np.testing.assert_array_equal(
        np.asarray(bits(key, shape)),
        np.asarray(jax.random.bits(key, shape, jnp.uint32)),
    )
    got = np.asarray(normal(key, shape))
    want = np.asarray(jax.random.normal(key, shape, jnp.float32))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(
        got.view(np.uint32), want.view(np.uint32)
    )  # bit for bit


def test_other_prng_and_the_original_stream_fall_back_to_jax_random():
    rbg = jax.random.key(7, impl="rbg")
    np.testing.assert_array_equal(
        np.asarray(fast_normal(rbg, (33,))),
        np.asarray(jax.random.normal(rbg, (33,), jnp.float32)),
    )
    key = jax.random.key(7)
    with jax.threefry_partitionable(False):
        got = np.asarray(fast_normal(key, (33,)))
        want = np.asarray(jax.random.normal(key, (33,), jnp.float32))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(
        got, np.asarray(jax.random.normal(key, (33,), jnp.float32))
    )


def test_noise_blocks_are_jax_normal_per_leaf_split_key():
    # The stream of add_noise_blocks is unchanged: leaf i gets normal(split(key, n)[i]).
    key = jax.random.key(11)
    tree = ({"a": jnp.zeros((5, 3)), "b": jnp.zeros(4, jnp.bfloat16)}, jnp.ones(6))
    got = jax.jit(lambda t, k: add_noise_blocks(t, k, (2.0, 0.5)))(tree, key)
    keys = jax.random.split(key, 3)
    want = (
        2.0 * jax.random.normal(keys[0], (5, 3)),
        (2.0 * jax.random.normal(keys[1], (4,))).astype(jnp.bfloat16),
        1.0 + 0.5 * jax.random.normal(keys[2], (6,)),
    )
    got = [got[0]["a"], got[0]["b"], got[1]]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def _per_leaf_normals(key, shapes):
    # The draw before issue 52, verbatim: one fused fast_normal per leaf, so XLA
    # recomputed each leaf's hash in every consumer of its noise.
    keys = jax.random.split(key, len(shapes)) if shapes else []
    return [
        jax.lax.platform_dependent(
            k,
            cpu=lambda k, s=s: fast_normal(k, s),
            default=lambda k, s=s: jax.random.normal(k, s, jnp.float32),
        )
        for k, s in zip(keys, shapes)
    ]


def _bits(x):
    # Raw bytes, so -0.0 / 0.0 or differently-rounded low bits cannot compare equal.
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.atleast_1d(np.asarray(x)).view(np.uint8)


def _assert_trees_bit_equal(got, want):
    g, gdef = jax.tree_util.tree_flatten(got)
    w, wdef = jax.tree_util.tree_flatten(want)
    assert gdef == wdef
    for a, b in zip(g, w):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(_bits(a), _bits(b))


# Several dtypes and shapes, an empty leaf and a scalar, in nested containers.
TREE = (
    {
        "w": jnp.linspace(-1, 1, 15, dtype=jnp.float32).reshape(3, 5),
        "b": jnp.arange(7, dtype=jnp.bfloat16),
        "s": jnp.asarray(0.25, jnp.float16),
    },
    [jnp.ones((2, 3, 4), jnp.float32), jnp.zeros((0, 3)), jnp.full((9,), -3.0)],
)


@pytest.mark.parametrize("jit", [False, True])
def test_hash_once_draw_is_the_per_leaf_draw_bit_for_bit(jit, monkeypatch):
    # Issue 52: all leaves' bits are drawn once, behind one conditional; every bit of
    # the noised tree must stay what the per-leaf draw gave (stored runs replay).
    key = jax.random.fold_in(jax.random.key(52), 3)
    stds = (1.7, 0.3)

    def noised(t, k):
        return add_noise_blocks(t, k, stds)

    fn = jax.jit(noised) if jit else noised
    got = fn(TREE, key)
    assert not np.array_equal(np.asarray(got[0]["w"]), np.asarray(TREE[0]["w"]))
    monkeypatch.setattr(_aggregation, "_normals_f32", _per_leaf_normals)
    fn = jax.jit(noised) if jit else noised
    _assert_trees_bit_equal(got, fn(TREE, key))


def test_hash_once_normals_equal_jax_random_and_under_vmap():
    shapes = [(3, 5), (), (0,), (2, 3, 4), (1_001,)]
    keys = list(jax.random.split(jax.random.key(9), len(shapes)))
    got = jax.jit(lambda ks: fast_normals(ks, shapes))(keys)
    for g, k, s in zip(got, keys, shapes):
        want = jax.random.normal(k, s, jnp.float32)
        np.testing.assert_array_equal(_bits(g), _bits(want))
    # vmap over the keys turns the conditional into a select of two equal draws.
    batch = jax.random.split(jax.random.key(10), 3)
    got = jax.vmap(lambda k: fast_normals([k, jax.random.fold_in(k, 1)], shapes[:2]))(
        batch
    )
    for i, k in enumerate(batch):
        for g, kk, s in zip(got, [k, jax.random.fold_in(k, 1)], shapes[:2]):
            want = jax.random.normal(kk, s, jnp.float32)
            np.testing.assert_array_equal(_bits(g[i]), _bits(want))
    with pytest.raises(ValueError, match="2 keys but 1 shapes"):
        fast_normals(keys[:2], shapes[:1])


def test_hash_once_dp_adam_steps_are_the_per_leaf_steps_bit_for_bit(monkeypatch):
    # Under jit with Adam consuming the noise (the fusion issue 52 is about): the
    # parameters and the whole optimizer state after three DP steps are bit-equal.
    params = jax.tree.map(lambda x: x.astype(jnp.float32), TREE)
    grads = jax.tree.map(lambda x: 0.1 * jnp.ones_like(x) + x, params)
    tx = dpsgd(
        optax.adam(1e-2),
        noise_multiplier=1.1,
        l2_clip_norm=0.7,
        expected_batch_size=8.0,
        key=jax.random.key(2024),
    )

    def run():
        @jax.jit
        def step(p, s):
            u, s = tx.update(grads, s, p)
            return optax.apply_updates(p, u), s

        p, s = params, tx.init(params)
        for _ in range(3):
            p, s = step(p, s)
        return p, s

    new = run()
    monkeypatch.setattr(_aggregation, "_normals_f32", _per_leaf_normals)
    old = run()
    _assert_trees_bit_equal(new, old)
    assert not np.array_equal(np.asarray(new[0][0]["w"]), np.asarray(params[0]["w"]))


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU lowering")
def test_noise_hashes_once_behind_one_conditional():
    # One conditional for all leaves (not one per leaf, which adds ops); were it
    # inlined (a constant predicate, a new XLA pass), the hash would fuse again.
    text = jax.jit(lambda t, k: add_noise_blocks(t, k, (1.0, 2.0))).lower(
        TREE, jax.random.key(0)
    )
    text = text.compile().as_text()
    assert text.count(" conditional(") == 1


def test_law_ks_moments_and_independence():
    # Redundant with bit equality, kept as a guard on the law itself (fixed keys,
    # 6-sigma bounds).
    n = 1_000_000
    z = np.asarray(fast_normal(jax.random.key(3), (n,)), np.float64)
    assert scipy.stats.kstest(z[:50_000], "norm").pvalue > 1e-3
    assert scipy.stats.kstest(z[:50_000], "norm", args=(0, 1.1)).pvalue < 1e-6
    assert abs(z.mean()) < 6 / np.sqrt(n)
    assert abs(z.var() - 1) < 6 * np.sqrt(2 / n)
    assert abs(np.mean(z**4) - 3) < 6 * np.sqrt(96 / n)  # Var(z^4) = 105 - 9
    # Leaves and releases: fresh keys give uncorrelated noise.
    other = np.asarray(fast_normal(jax.random.fold_in(jax.random.key(3), 1), (n,)))
    assert abs(np.corrcoef(z, other)[0, 1]) < 6 / np.sqrt(n)
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 6 / np.sqrt(
        n
    )  # neighbouring counters
