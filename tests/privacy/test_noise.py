"""The unrolled Threefry draw gives jax.random's bits, so the DP noise law is
jax.random's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from privrl_jax.privacy._aggregation import add_noise_blocks
from privrl_jax.privacy._noise import fast_normal, random_bits32, threefry2x32

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


def test_noise_drawn_once_for_several_consumers_is_the_same_bits():
    # DP-SGD's update is read by an optimizer several times (Adam's two moments). With
    # ``once`` each noised leaf is computed in one loop and kept, instead of XLA fusing
    # the hash into every consumer: the same bits, and fewer hash rounds compiled.
    tree = {
        "w": jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6) / 7.0,
        "b": jnp.linspace(-1.0, 1.0, 5, dtype=jnp.float32),
        "h": jnp.ones((3,), jnp.bfloat16),
    }
    key = jax.random.key(11)

    def step(tree, key, once):
        noised = add_noise_blocks((tree,), key, (1.3,), once=once)[0]
        # two consumers of every noised leaf, like Adam's moments
        return jax.tree_util.tree_map(lambda g: (0.9 * g + 0.1, 0.99 * g * g), noised)

    compiled = {
        once: jax.jit(step, static_argnums=2).lower(tree, key, once).compile()
        for once in (False, True)
    }
    outs = {once: c(tree, key) for once, c in compiled.items()}
    for a, b in zip(
        jax.tree_util.tree_leaves(outs[False]), jax.tree_util.tree_leaves(outs[True])
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Eagerly the two are one code path (nothing is fused op by op).
    eager = add_noise_blocks((tree,), key, (1.3,), once=True)[0]
    ref = add_noise_blocks((tree,), key, (1.3,))[0]
    for a, b in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if jax.default_backend() == "cpu":  # the conditional is the CPU path only
        xors = {once: c.as_text().count(" xor(") for once, c in compiled.items()}

        def one_consumer(tree, key):
            noised = add_noise_blocks((tree,), key, (1.3,))[0]
            return jax.tree_util.tree_map(lambda g: 0.9 * g + 0.1, noised)

        # Each leaf's hash is compiled exactly once with ``once``: as many xors as a
        # chain with a single consumer (the conditional's other branch draws nothing),
        # and fewer than two consumers that each hash it.
        single = jax.jit(one_consumer).lower(tree, key).compile().as_text()
        assert xors[True] == single.count(" xor(") < xors[False], xors
