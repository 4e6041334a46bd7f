"""Per-unit clipped sums against a naive Python-loop reference and the DP invariants."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from privrl_jax.privacy import Neighboring
from privrl_jax.privacy._clipping import clipped_grad


def naive_clipped_sum(per_item_loss, params, batch, mask, clip):
    """Reference: per unit, grad of the summed valid item losses, norm, scale, add (no
    vmap)."""
    total = jax.tree_util.tree_map(np.zeros_like, params)
    norms = []
    for u in range(mask.shape[0]):

        def unit_loss(p):
            out = 0.0
            for j in range(mask.shape[1]):
                if mask[u, j]:
                    out = out + per_item_loss(
                        p, jax.tree_util.tree_map(lambda x: x[u, j], batch)
                    )
            return out

        if not mask[u].any():
            norms.append(0.0)
            continue
        g = jax.grad(unit_loss)(params)
        n = float(
            np.sqrt(
                sum(
                    np.sum(np.asarray(x, np.float64) ** 2)
                    for x in jax.tree_util.tree_leaves(g)
                )
            )
        )
        norms.append(n)
        s = min(1.0, clip / n) if n > 0 else 1.0
        total = jax.tree_util.tree_map(
            lambda t, x: t + s * np.asarray(x, np.float64), total, g
        )
    return total, np.array(norms)


def linear_loss(w, item):
    x, y = item
    return 0.5 * (jnp.dot(w, x) - y) ** 2


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.silu(nn.Dense(16)(x))
        x = nn.silu(nn.Dense(16)(x))
        return nn.Dense(1)(x)[0]


def _mlp_setup():
    model = MLP()
    params = model.init(jax.random.key(0), jnp.zeros(3))

    def loss(p, item):
        x, y = item
        return (model.apply(p, x) - y) ** 2

    return loss, params


def _batch(units, items, dim, key=1):
    kx, ky = jax.random.split(jax.random.key(key))
    x = 3.0 * jax.random.normal(kx, (units, items, dim))
    y = jax.random.normal(ky, (units, items))
    mask = np.ones((units, items), bool)
    mask[1, 1:] = False  # a unit with fewer items
    mask[-1] = False  # a padded unit
    return (x, y), jnp.asarray(mask)


@pytest.mark.parametrize("model", ["linear", "mlp"])
@pytest.mark.parametrize("microbatch_size", [None, 2])
@pytest.mark.parametrize("jit", [False, True])
def test_matches_naive_reference(model, microbatch_size, jit):
    if model == "linear":
        loss, params = linear_loss, jnp.array([0.3, -1.0, 2.0])
    else:
        loss, params = _mlp_setup()
    batch, mask = _batch(6, 3, 3)
    clip = 1.5
    fn = clipped_grad(loss, l2_clip_norm=clip, microbatch_size=microbatch_size)
    call = jax.jit(fn) if jit else fn
    total, metrics = call(params, batch, mask)
    ref_total, ref_norms = naive_clipped_sum(
        loss, params, batch, np.asarray(mask), clip
    )
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5),
        total,
        ref_total,
    )
    np.testing.assert_allclose(metrics.per_unit_norms, ref_norms, rtol=2e-5)
    assert int(metrics.num_units) == 5
    assert float(metrics.clipped_fraction) == pytest.approx(
        np.mean(ref_norms[:5] > clip)
    )


def test_linear_closed_form():
    # d/dw 0.5 (w.x - y)^2 = (w.x - y) x: compute the clipped sum by hand in float64.
    w = np.array([0.5, -0.25])
    x = np.array([[[1.0, 2.0]], [[3.0, -1.0]], [[0.1, 0.1]]])
    y = np.array([[1.0], [0.0], [0.0]])
    g = (np.einsum("d,uid->ui", w, x) - y)[..., None] * x
    g = g.sum(1)
    n = np.linalg.norm(g, axis=1)
    expected = (g * np.minimum(1, 1.0 / n)[:, None]).sum(0)
    total, _ = clipped_grad(linear_loss, l2_clip_norm=1.0)(
        jnp.asarray(w, jnp.float32),
        (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)),
        jnp.ones((3, 1), bool),
    )
    np.testing.assert_allclose(total, expected, rtol=1e-6)


def test_clips_each_unit_not_the_batch():
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731  gradient of an item is x
    batch = jnp.array([[[10.0, 0.0]], [[0.0, 10.0]]])
    total, _ = clipped_grad(loss, l2_clip_norm=1.0)(
        jnp.zeros(2), batch, jnp.ones((2, 1), bool)
    )
    np.testing.assert_array_equal(total, [1.0, 1.0])


def test_multi_item_unit_is_clipped_as_a_whole():
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    # One unit of 5 items, each with gradient (1, 0): the unit's gradient is (5, 0),
    # clipped to C.
    batch = jnp.tile(jnp.array([1.0, 0.0]), (1, 5, 1))
    total, m = clipped_grad(loss, l2_clip_norm=2.0)(
        jnp.zeros(2), batch, jnp.ones((1, 5), bool)
    )
    np.testing.assert_allclose(total, [2.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(m.per_unit_norms, [5.0], rtol=1e-6)


@pytest.mark.parametrize("scale", [0.0, 1e-3, 1.0, 1e8])
def test_every_unit_norm_at_most_c_and_no_nan(scale):
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    x = scale * jax.random.normal(jax.random.key(3), (8, 1, 4))
    fn = clipped_grad(loss, l2_clip_norm=0.7)
    for u in range(8):
        one = jnp.zeros((8, 1), bool).at[u].set(True)
        total, _ = fn(jnp.zeros(4), x, one)
        assert np.all(np.isfinite(total))
        assert float(jnp.linalg.norm(total)) <= 0.7 * (1 + 1e-6)


def test_add_remove_one_unit_moves_sum_by_at_most_c():
    loss, params = _mlp_setup()
    batch, mask = _batch(6, 3, 3, key=7)
    fn = jax.jit(clipped_grad(loss, l2_clip_norm=0.5))
    x, y = batch
    # Unit 0 gets a huge gradient; removing it (masking) moves the sum by at most C.
    x = x.at[0].mul(1e4)
    with_u, _ = fn(params, (x, y), mask)
    without_u, _ = fn(params, (x, y), mask.at[0].set(False))
    diff = jax.tree_util.tree_map(jnp.subtract, with_u, without_u)
    assert float(optax.tree.norm(diff)) <= 0.5 * (1 + 1e-5)
    assert float(optax.tree.norm(diff)) > 0.49  # the unit was clipped to exactly C


def test_padded_units_contribute_exactly_zero_even_if_nan():
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    x = jnp.array([[[1.0, 2.0]], [[jnp.nan, jnp.inf]]])
    total, m = clipped_grad(loss, l2_clip_norm=10.0)(
        jnp.zeros(2), x, jnp.array([[True], [False]])
    )
    np.testing.assert_array_equal(total, [1.0, 2.0])
    assert int(m.num_nonfinite) == 0


def test_nonfinite_units_are_zeroed_and_counted():
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    x = jnp.array([[[1.0, 2.0]], [[jnp.nan, 1.0]], [[jnp.inf, 0.0]]])
    total, m = clipped_grad(loss, l2_clip_norm=10.0)(
        jnp.zeros(2), x, jnp.ones((3, 1), bool)
    )
    np.testing.assert_array_equal(total, [1.0, 2.0])
    assert int(m.num_nonfinite) == 2


def test_keyed_loss_does_not_depend_on_microbatching():
    loss = lambda w, x, key: jnp.sum(w * x) * jax.random.uniform(key)  # noqa: E731
    x = jax.random.normal(jax.random.key(0), (8, 2, 3))
    mask = jnp.ones((8, 2), bool)
    key = jax.random.key(42)
    a, _ = clipped_grad(loss, l2_clip_norm=0.3, uses_key=True)(
        jnp.ones(3), x, mask, key
    )
    b, _ = clipped_grad(loss, l2_clip_norm=0.3, uses_key=True, microbatch_size=4)(
        jnp.ones(3), x, mask, key
    )
    np.testing.assert_allclose(a, b, rtol=1e-6)
    c, _ = clipped_grad(loss, l2_clip_norm=0.3, uses_key=True)(
        jnp.ones(3), x, mask, jax.random.key(43)
    )
    assert not np.allclose(a, c)


def test_cross_unit_independence():
    """Perturbing unit j leaves unit i's clipped contribution bitwise unchanged (pitfall
    9)."""
    loss, params = _mlp_setup()
    batch, mask = _batch(4, 2, 3)
    only0 = jnp.zeros_like(mask).at[0].set(mask[0])
    fn = jax.jit(clipped_grad(loss, l2_clip_norm=1.0))
    a, _ = fn(params, batch, only0)
    x, y = batch
    b, _ = fn(params, (x.at[2].add(5.0), y), only0)
    jax.tree_util.tree_map(np.testing.assert_array_equal, a, b)


def test_sensitivity():
    fn = clipped_grad(linear_loss, l2_clip_norm=2.0)
    assert fn.sensitivity() == 2.0
    assert fn.sensitivity(Neighboring.REPLACE_ONE) == 4.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"l2_clip_norm": 0.0}, "l2_clip_norm"),
        ({"l2_clip_norm": float("inf")}, "l2_clip_norm"),
        ({"l2_clip_norm": 1.0, "microbatch_size": 0}, "microbatch_size"),
        ({"l2_clip_norm": 1.0, "method": "fast"}, "method"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        clipped_grad(linear_loss, **kwargs)


def test_bad_batch_layout():
    fn = clipped_grad(lambda w, x: jnp.sum(w * x), l2_clip_norm=1.0)
    with pytest.raises(ValueError, match="mask must have shape"):
        fn(jnp.zeros(2), jnp.zeros((3, 2)), jnp.ones(3, bool))
    with pytest.raises(ValueError, match="units, items_per_unit"):
        fn(jnp.zeros(2), jnp.zeros((3, 2)), jnp.ones((3, 1), bool))
    with pytest.raises(ValueError, match="must divide"):
        clipped_grad(lambda w, x: jnp.sum(w * x), l2_clip_norm=1.0, microbatch_size=2)(
            jnp.zeros(2), jnp.zeros((3, 1, 2)), jnp.ones((3, 1), bool)
        )
    keyed = clipped_grad(
        lambda w, x, k: jnp.sum(w * x), l2_clip_norm=1.0, uses_key=True
    )
    with pytest.raises(ValueError, match="key=None"):
        keyed(jnp.zeros(2), jnp.zeros((3, 1, 2)), jnp.ones((3, 1), bool))
