"""Ghost-norm clipping equals the vmap reference: sums, norms, metrics, fallbacks,
transforms."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.privacy import _ghost, ghost_coverage
from privrl_jax.privacy._clip_core import clip_unit_grads
from privrl_jax.privacy._clipping import clipped_grad
from privrl_jax.privacy._ghost import ghost_clipped_grad_sum

# These tests build fallback leaves on purpose; the one-line fallback warning itself is
# asserted where it is tested (pytest.warns records it whatever this filter says).
pytestmark = pytest.mark.filterwarnings("ignore:ghost clipping:UserWarning")

# float32: both paths round differently (Gram vs direct sums), so compare relative to
# the scale.
RTOL = 2e-5


class ResidualMLP(nn.Module):
    """EDM-style residual MLP: Dense in, (LayerNorm, SiLU, Dense) blocks with skips,
    Dense out."""

    width: int = 64
    depth: int = 3
    out: int = 3

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(self.width)(x)
        for _ in range(self.depth):
            h = h + nn.Dense(self.width)(nn.silu(nn.LayerNorm()(h)))
        return nn.Dense(self.out)(nn.silu(h))


class AttentionBlock(nn.Module):
    """A pre-LN transformer block over a sequence [T, d] inside one item, with a token
    embedding."""

    @nn.compact
    def __call__(self, tokens, x):
        h = nn.Dense(8)(x) + nn.Embed(11, 8)(tokens)
        h = h + nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)(
            nn.LayerNorm()(h)
        )
        h = h + nn.Dense(8)(nn.gelu(nn.Dense(16)(nn.LayerNorm()(h))))
        return nn.Dense(1)(h)


# Test data comes from NumPy and params from one jitted init: eager jax.random calls
# would compile one tiny program per shape, which dominated this file's run time.
def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def _ints(seed, shape, low, high):
    return jnp.asarray(
        np.random.default_rng(seed).integers(low, high, size=shape), jnp.int32
    )


def _init(model, seed, *args):
    return jax.jit(model.init)(jax.random.key(seed), *args)


def _batch(seed, units, items, shape):
    x = _normal(seed, (units, items) + shape)
    y = _normal(seed + 1, (units, items))
    mask = np.random.default_rng(seed + 2).random((units, items)) < 0.7
    mask[0], mask[1] = True, False
    return {"x": x, "y": y}, jnp.asarray(mask)


def _unit_grads(loss, params, batch, mask):
    """Per-unit gradients of the masked item-loss sums, written independently of the
    library."""

    def unit_loss(p, items, m):
        losses = jax.vmap(loss, in_axes=(None, 0))(p, items)
        return jnp.sum(jnp.where(m, losses, 0.0))

    return jax.vmap(jax.grad(unit_loss), in_axes=(None, 0, 0))(params, batch, mask)


def _reference_norms(grads, mask):
    # NumPy (float64) on the host: no extra XLA compilations in the test.
    leaves = [np.asarray(g, np.float64) for g in jax.tree.leaves(grads)]
    norms = np.sqrt(sum(np.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves))
    with np.errstate(invalid="ignore"):
        return np.where(
            np.any(np.asarray(mask), axis=1) & np.isfinite(norms), norms, 0.0
        )


def _assert_close_trees(expected, actual):
    expected, actual = jax.device_get((expected, actual))
    scale = max(float(np.max(np.abs(x))) for x in jax.tree.leaves(expected)) + 1e-30
    assert jax.tree.structure(expected) == jax.tree.structure(actual)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * scale),
        expected,
        actual,
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_equal(a.dtype, b.dtype), expected, actual
    )


def _assert_metrics_equal(expected, actual):
    expected, actual = jax.device_get((expected, actual))
    np.testing.assert_allclose(
        actual.per_unit_norms, expected.per_unit_norms, rtol=RTOL, atol=1e-6
    )
    np.testing.assert_allclose(actual.clipped_fraction, expected.clipped_fraction)
    assert int(actual.num_units) == int(expected.num_units)
    assert int(actual.num_nonfinite) == int(expected.num_nonfinite)


def _compare_at_clip_norms(loss, params, batch, mask, clips, *, jit=True):
    """Ghost vs vmap-then-clip at several clip norms, compiled once (the clip norm is
    traced)."""

    @jax.jit
    def reference(clip):
        grads = _unit_grads(loss, params, batch, mask)
        return clip_unit_grads(grads, jnp.any(mask, axis=1), clip), grads

    def ghost(clip):
        return ghost_clipped_grad_sum(
            loss, params, batch, mask, None, l2_clip_norm=clip, uses_key=False
        )

    ghost = jax.jit(ghost) if jit else ghost
    out = []
    for clip in clips:
        (g_ref, m_ref), grads = reference(np.float32(clip))
        g_ghost, m_ghost = ghost(np.float32(clip) if jit else clip)
        _assert_close_trees(g_ref, g_ghost)
        _assert_metrics_equal(m_ref, m_ghost)
        np.testing.assert_allclose(
            m_ghost.per_unit_norms, _reference_norms(grads, mask), rtol=RTOL, atol=1e-6
        )
        out.append(m_ghost)
    return out


def _assert_agree(
    loss,
    params,
    batch,
    mask,
    clip,
    *,
    jit=False,
    key=None,
    uses_key=False,
    microbatch_size=None,
):
    """Through the public dispatch: clipped_grad(method="ghost") vs the
    default method."""
    ref = clipped_grad(loss, l2_clip_norm=clip, uses_key=uses_key)
    ghost = clipped_grad(
        loss,
        l2_clip_norm=clip,
        uses_key=uses_key,
        method="ghost",
        microbatch_size=microbatch_size,
    )
    if jit:
        ref, ghost = jax.jit(ref), jax.jit(ghost)
    g_ref, m_ref = ref(params, batch, mask, key)
    g_ghost, m_ghost = ghost(params, batch, mask, key)
    _assert_close_trees(g_ref, g_ghost)
    _assert_metrics_equal(m_ref, m_ghost)
    return m_ghost


def _mse(model):
    return lambda p, item: jnp.mean((model.apply(p, item["x"]) - item["y"]) ** 2)


def _first_item(batch):
    return jax.tree.map(lambda a: a[0, 0], batch)


def _mlp_problem(width=64, depth=3):
    model = ResidualMLP(width=width, depth=depth)
    batch, mask = _batch(0, units=6, items=3, shape=(5,))
    # Unit 2 holds a valid item with an inf input: its gradient is non-finite and must
    # be dropped.
    batch["x"] = batch["x"].at[2, 0, 1].set(jnp.inf)
    mask = mask.at[2, 0].set(True)
    params = _init(model, 1, batch["x"][0, 0])
    return _mse(model), params, batch, mask


def test_residual_mlp_matches_vmap_at_every_clip_norm():
    """Width 64 x depth 3 with LayerNorm and skips, multi-item units, masks, a
    non-finite unit."""
    loss, params, batch, mask = _mlp_problem()
    clip_all, clip_some, clip_none = _compare_at_clip_norms(
        loss, params, batch, mask, [1e-4, 30.0, 1e6]
    )
    present = int(clip_all.num_units) - int(clip_all.num_nonfinite)
    assert (
        round(float(clip_all.clipped_fraction) * int(clip_all.num_units)) == present
    )  # all
    assert 0.0 < float(clip_some.clipped_fraction) < 1.0
    assert float(clip_none.clipped_fraction) == 0.0
    assert int(clip_all.num_nonfinite) == 1 and float(clip_all.per_unit_norms[2]) == 0.0


def test_residual_mlp_not_jitted():
    loss, params, batch, mask = _mlp_problem(width=8, depth=1)
    _compare_at_clip_norms(loss, params, batch, mask, [0.5], jit=False)


def test_one_item_per_unit_matches_vmap():
    """Example-level units (one item each) take the path without an inner vmap: the
    same sums, norms and metrics, a padded unit and a non-finite one included, with and
    without a keyed loss."""
    model = ResidualMLP(width=16, depth=2)
    batch, _ = _batch(4, units=6, items=1, shape=(5,))
    batch["x"] = batch["x"].at[2, 0, 1].set(jnp.inf)  # unit 2: dropped, not NaN
    mask = jnp.ones((6, 1), bool).at[1, 0].set(False)  # unit 1: padded
    params = _init(model, 5, batch["x"][0, 0])
    clip_all, clip_some = _compare_at_clip_norms(
        _mse(model), params, batch, mask, [1e-4, 0.5]
    )
    assert int(clip_all.num_nonfinite) == 1 and int(clip_all.num_units) == 5
    assert float(clip_all.per_unit_norms[1]) == 0.0  # the padded unit
    assert 0.0 < float(clip_some.clipped_fraction) < 1.0

    def keyed(p, item, key):
        noisy = item["x"] + jax.random.normal(key, item["x"].shape)
        return jnp.mean((model.apply(p, noisy) - item["y"]) ** 2)

    finite = {"x": jnp.nan_to_num(batch["x"], posinf=3.0), "y": batch["y"]}
    _assert_agree(
        keyed,
        params,
        finite,
        mask,
        0.5,
        key=jax.random.key(6),
        uses_key=True,
        microbatch_size=3,
        jit=True,
    )


def test_dispatch_with_microbatches_matches_full_batch_vmap():
    model = ResidualMLP(width=8, depth=1)
    batch, mask = _batch(2, units=8, items=2, shape=(4,))
    params = _init(model, 3, batch["x"][0, 0])
    _assert_agree(_mse(model), params, batch, mask, 0.3, jit=True, microbatch_size=2)


class Norms(nn.Module):
    """LayerNorm in the forms its ghost rule covers, over a sequence [T, 5] inside one
    item, and one it does not (feature axis not the last: the exact fallback)."""

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(6)(x)
        h = nn.silu(nn.LayerNorm()(h))  # scale and bias, one row per position
        h = nn.LayerNorm(use_bias=False, epsilon=1e-2)(nn.Dense(6)(h))
        h = nn.LayerNorm(use_scale=False)(h)
        h = nn.LayerNorm(reduction_axes=(-2, -1))(h)  # statistics over the sequence
        h = nn.LayerNorm(feature_axes=-2, reduction_axes=-2)(h)
        return nn.Dense(1)(h)[:, 0]


def test_layernorm_rule_matches_vmap():
    # The scale's per-unit gradient is sum over the unit's positions of x_hat * D, the
    # bias's sum of D; the reference is vmap(grad) per unit, clipped (float64 norms).
    model = Norms()
    batch, mask = _batch(50, units=5, items=2, shape=(4, 5))
    batch["y"] = _normal(51, (5, 2, 4))
    params = _init(model, 52, batch["x"][0, 0])
    loss = _mse(model)
    _compare_at_clip_norms(loss, params, batch, mask, [0.05, 1e6])
    coverage = ghost_coverage(loss, params, _first_item(batch))
    ln = lambda i, n: f"['params']['LayerNorm_{i}']['{n}']"  # noqa: E731
    assert coverage[ln(0, "scale")] == "ghost: LayerNorm('LayerNorm_0',) scale"
    assert coverage[ln(0, "bias")] == "ghost: LayerNorm('LayerNorm_0',) bias"
    assert (
        coverage[ln(1, "scale")].startswith("ghost") and ln(1, "bias") not in coverage
    )
    assert (
        coverage[ln(2, "bias")].startswith("ghost") and ln(2, "scale") not in coverage
    )
    assert coverage[ln(3, "scale")].startswith("ghost")
    assert coverage[ln(4, "scale")] == "fallback: LayerNorm('LayerNorm_4',)"
    assert coverage[ln(4, "bias")] == "fallback: LayerNorm('LayerNorm_4',)"
    assert sum(v.startswith("fallback") for v in coverage.values()) == 2


class TiedIntoALayer(nn.Module):
    """A Dense kernel also used by hand, and that use feeds another layer's input; a
    LayerNorm scale likewise."""

    @nn.compact
    def __call__(self, x):
        first, norm = nn.Dense(4), nn.LayerNorm()
        h = first(x)
        h = h + x @ first.variables["params"]["kernel"]
        h = norm(h)
        return nn.Dense(2)(h * norm.variables["params"]["scale"])


def test_a_leaf_also_used_into_another_layers_input_falls_back():
    # The extra use reaches the loss only through the next layer (whose output the
    # analysis stops): the analysis must still see it, or the ghost norm and sum would
    # miss that part of the gradient.
    model = TiedIntoALayer()
    batch, mask = _batch(53, units=4, items=2, shape=(4,))
    params = _init(model, 54, batch["x"][0, 0])
    loss = _mse(model)
    _compare_at_clip_norms(loss, params, batch, mask, [0.05, 1e6])
    coverage = ghost_coverage(loss, params, _first_item(batch))
    assert coverage["['params']['Dense_0']['kernel']"] == "fallback: Dense('Dense_0',)"
    assert coverage["['params']['LayerNorm_0']['scale']"] == (
        "fallback: LayerNorm('LayerNorm_0',)"
    )
    assert coverage["['params']['LayerNorm_0']['bias']"].startswith("ghost")
    assert coverage["['params']['Dense_1']['kernel']"].startswith("ghost")


class LayerZoo(nn.Module):
    """Every supported layer in its cheap-norm regimes, applied to parts of one item."""

    @nn.compact
    def __call__(self, item):
        outs = [
            nn.Dense(3)(item["vec"]),  # one position: ||a||^2 ||d||^2
            nn.Dense(3, use_bias=False)(item["vec"]),
            nn.Dense(4)(
                item["seq4"]
            ),  # T (d_in + d_out) > d_in d_out: direct per-unit gradient
            nn.Dense(16)(item["seq16"]),  # Gram form
            nn.DenseGeneral((2, 3), axis=(-2, -1))(item["grid"]),  # kernel [2, 5, 2, 3]
            nn.DenseGeneral(3, axis=0)(
                item["grid"][:, 0]
            ),  # contracted axis is not the last
            nn.Embed(3, 4)(
                item["tokens"]
            ),  # vocab < T: direct (one-hot) per-unit gradient
            nn.Embed(50, 4)(
                item["tokens"] % 50
            ),  # Gram form with the same-row indicator
        ]
        return sum(jnp.sum(jnp.sin(o)) for o in outs)


def _zoo_problem():
    units, items = 5, 2
    batch = {
        "vec": _normal(40, (units, items, 4)),
        "seq4": _normal(41, (units, items, 5, 4)),
        "seq16": _normal(42, (units, items, 3, 16)),
        "grid": _normal(43, (units, items, 4, 2, 5)),
        "tokens": _ints(44, (units, items, 6), -3, 3),  # negative indices too
    }
    mask = jnp.ones((units, items), bool).at[1].set(False).at[3, 0].set(False)
    model = LayerZoo()
    params = _init(model, 5, _first_item(batch))
    return model.apply, params, batch, mask


def test_every_supported_layer_matches_vmap():
    loss, params, batch, mask = _zoo_problem()
    _compare_at_clip_norms(loss, params, batch, mask, [0.05, 1e6])
    coverage = ghost_coverage(loss, params, _first_item(batch))
    assert all(how.startswith("ghost") for how in coverage.values()), coverage


def test_attention_block_matches_vmap():
    """A transformer block: Embed, Dense, MultiHeadDotProductAttention over a sequence,
    LayerNorm."""
    model = AttentionBlock()
    units, items, seq = 4, 2, 5
    batch = {
        "tokens": _ints(9, (units, items, seq), 0, 11),
        "x": _normal(10, (units, items, seq, 3)),
        "y": _normal(11, (units, items)),
    }
    mask = jnp.array([[1, 1], [1, 0], [0, 0], [0, 1]], bool)
    params = _init(model, 12, batch["tokens"][0, 0], batch["x"][0, 0])

    def loss(p, item):
        return (jnp.mean(model.apply(p, item["tokens"], item["x"])) - item["y"]) ** 2

    _compare_at_clip_norms(loss, params, batch, mask, [1e-3, 0.05, 1e6])
    coverage = ghost_coverage(loss, params, _first_item(batch))
    # Every leaf, the LayerNorms' included, takes a ghost rule.
    assert all(how.startswith("ghost") for how in coverage.values()), coverage
    assert coverage["['params']['LayerNorm_1']['scale']"] == (
        "ghost: LayerNorm('LayerNorm_1',) scale"
    )
    assert coverage[
        "['params']['MultiHeadDotProductAttention_0']['query']['kernel']"
    ] == ("ghost: DenseGeneral('MultiHeadDotProductAttention_0', 'query') kernel")


def test_keyed_loss_and_microbatches_match_vmap():
    """Randomness in the loss (EDM noise): item keys are split from unit keys as in the
    reference."""
    model = ResidualMLP(width=8, depth=1, out=4)
    batch, mask = _batch(13, units=6, items=2, shape=(4,))

    def loss(p, item, key):
        noisy = item["x"] + jax.random.normal(key, item["x"].shape)
        return jnp.sum((model.apply(p, noisy) - item["x"]) ** 2)

    params = _init(model, 14, batch["x"][0, 0])
    _assert_agree(
        loss,
        params,
        batch,
        mask,
        1.0,
        key=jax.random.key(15),
        uses_key=True,
        microbatch_size=3,
        jit=True,
    )


class Awkward(nn.Module):
    """What ghost norms must not get wrong: a Dense called twice, a tied embedding
    (attend)."""

    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(7, 4)
        shared = nn.Dense(4)
        h = shared(jnp.tanh(shared(embed(tokens))))
        return embed.attend(nn.Dense(4)(h))


def test_shared_tied_regularised_and_unused_params_are_exact():
    model = Awkward()
    tokens = _ints(20, (4, 2, 3), 0, 7)
    batch = {"x": tokens, "y": _normal(21, (4, 2, 3, 7))}
    mask = jnp.ones((4, 2), bool).at[3, 1].set(False)
    params = {"net": _init(model, 22, tokens[0, 0]), "unused": jnp.ones((3, 3))}

    def loss(p, item):
        # Weight decay on one kernel: it reaches the loss outside its Dense, so it must
        # fall back.
        decay = 0.1 * jnp.sum(p["net"]["params"]["Dense_1"]["kernel"] ** 2)
        return jnp.sum(model.apply(p["net"], item["x"]) * item["y"]) + decay

    _compare_at_clip_norms(loss, params, batch, mask, [0.5])
    coverage = ghost_coverage(loss, params, _first_item(batch))
    assert coverage == {
        "['net']['params']['Dense_0']['bias']": (
            "ghost: Dense('Dense_0',) bias (shared by 2 calls)"
        ),
        "['net']['params']['Dense_0']['kernel']": (
            "ghost: Dense('Dense_0',) kernel (shared by 2 calls)"
        ),
        "['net']['params']['Dense_1']['bias']": "ghost: Dense('Dense_1',) bias",
        "['net']['params']['Dense_1']['kernel']": "fallback: Dense('Dense_1',)",
        "['net']['params']['Embed_0']['embedding']": "fallback: Embed('Embed_0',)",
        "['unused']": "unused",
    }


def test_inside_shard_map_matches_vmap():
    """A per-chunk function: it runs inside shard_map with a psum over the data axis."""
    devices = np.array(jax.devices())
    mesh = jax.sharding.Mesh(devices, ("data",))
    spec = jax.sharding.PartitionSpec
    model = ResidualMLP(width=8, depth=1)
    batch, mask = _batch(25, units=2 * len(devices), items=2, shape=(3,))
    params = _init(model, 26, batch["x"][0, 0])
    fn = clipped_grad(_mse(model), l2_clip_norm=0.5, method="ghost")

    @jax.jit
    @jax.shard_map(
        mesh=mesh, in_specs=(spec(), spec("data"), spec("data")), out_specs=spec()
    )
    def sharded(p, b, m):
        return jax.lax.psum(fn(p, b, m)[0], "data")

    expected, _ = jax.jit(clipped_grad(_mse(model), l2_clip_norm=0.5))(
        params, batch, mask
    )
    _assert_close_trees(expected, sharded(params, batch, mask))


def test_lifted_transforms_fall_back_and_say_so_once():
    """nn.remat hides a Dense's params, nn.scan (params broadcast) its inputs: both fall
    back to exact per-unit gradients, ghost_coverage says so (it once called the scanned
    layer "ghost", and the ghost path then refused it), and a run warns once."""

    class Remat(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.remat(nn.Dense)(2)(x)

    class Scan(nn.Module):
        @nn.compact
        def __call__(self, x):
            body = lambda mdl, c, _: (mdl(c), None)  # noqa: E731
            scan = nn.scan(
                body,
                variable_broadcast="params",
                split_rngs={"params": False},
                length=2,
            )
            return scan(nn.Dense(3), x, None)[0]

    batch, mask = _batch(27, units=3, items=1, shape=(3,))
    remat = Remat()
    params = _init(remat, 28, batch["x"][0, 0])
    loss = lambda p, item: jnp.sum(remat.apply(p, item["x"]) ** 2)  # noqa: E731
    assert all(
        v.startswith("fallback")
        for v in ghost_coverage(loss, params, _first_item(batch)).values()
    )
    _assert_agree(loss, params, batch, mask, 0.1)

    scan = Scan()
    params = _init(scan, 29, batch["x"][0, 0])
    loss = lambda p, item: jnp.sum(scan.apply(p, item["x"]) ** 2)  # noqa: E731
    coverage = ghost_coverage(loss, params, _first_item(batch))
    assert coverage and all(
        v.startswith("fallback") and "inside nn.scan" in v for v in coverage.values()
    ), coverage
    _ghost._WARNED.clear()
    fn = clipped_grad(loss, l2_clip_norm=1.0, method="ghost")
    with pytest.warns(UserWarning, match=r"2 parameter leaf/leaves of Dense\(") as w:
        fn(params, batch, mask)
        fn(params, batch, jnp.asarray(mask)[::-1])  # another call: no second warning
    assert len([x for x in w if "ghost clipping" in str(x.message)]) == 1
    _assert_agree(loss, params, batch, mask, 0.1)


class PositionalAttention(nn.Module):
    """PrivORL-j's fragment transformer in small: raw position and "no link" params
    (no flax layer owns them: the exact fallback), pre-LN attention with a key mask
    (DenseGeneral projections) and a GELU MLP."""

    @nn.compact
    def __call__(self, x, valid, has_link):
        pos = self.param("pos", nn.initializers.normal(0.5), (x.shape[0], 8))
        no_link = self.param("no_link", nn.initializers.normal(0.5), (8,))
        h = nn.Dense(8)(x) + pos
        h = h.at[0].set(jnp.where(has_link, h[0], no_link))
        attn = nn.MultiHeadDotProductAttention(num_heads=2)
        h = h + attn(nn.LayerNorm()(h), mask=valid[None, None, :])
        h = h + nn.Dense(8)(nn.gelu(nn.Dense(16)(nn.LayerNorm()(h))))
        return nn.Dense(1)(nn.LayerNorm()(h))[:, 0]


def _positional_problem():
    """Several items (fragments) per unit: padded items, an all-padded unit (1), a
    unit with a non-finite valid item (2), padded positions inside items."""
    units, items, seq = 6, 3, 6
    batch = {
        "x": _normal(60, (units, items, seq, 3)),
        "y": _normal(61, (units, items, seq)),
        "valid": jnp.asarray(np.arange(seq) < _ints(62, (units, items, 1), 1, seq + 1)),
        "has_link": jnp.asarray(np.arange(items) > 0)[None].repeat(units, 0),
    }
    batch["x"] = batch["x"].at[2, 1, 0, 1].set(jnp.inf)
    mask = jnp.ones((units, items), bool).at[1].set(False).at[3, 2].set(False)
    mask = mask.at[0, 1].set(False)
    model = PositionalAttention()
    item = _first_item(batch)
    params = _init(model, 63, item["x"], item["valid"], item["has_link"])

    def loss(p, item, key):
        noisy = item["x"] + 0.3 * jax.random.normal(key, item["x"].shape)
        pred = model.apply(p, noisy, item["valid"], item["has_link"])
        return jnp.sum(jnp.where(item["valid"], (pred - item["y"]) ** 2, 0.0))

    return loss, params, batch, mask


def test_several_items_per_unit_with_fallback_leaves_match_vmap():
    """Several items per unit (PrivORL-j's fragments) with fallback leaves (a position
    embedding, a "no link" vector) beside LayerNorm and attention: the same clipped
    sums, norms and metrics as the vmap reference, with item keys split from unit keys,
    microbatches, padded items and units and a non-finite unit."""
    loss, params, batch, mask = _positional_problem()
    key = jax.random.key(64)
    item, item_key = _ghost._first_item(batch, jax.random.split(key, 6), True)
    plan = _ghost._plan(loss, True, params, item, item_key)
    fallback = {
        jax.tree_util.keystr(p)
        for i, (p, _) in enumerate(jax.tree_util.tree_leaves_with_path(params))
        if i in plan.fallback
    }
    assert fallback == {"['params']['no_link']", "['params']['pos']"}
    clipped = _assert_agree(
        loss,
        params,
        batch,
        mask,
        1e-3,  # every finite unit is clipped: the sum of their gradients' directions
        key=key,
        uses_key=True,
        microbatch_size=2,
        jit=True,
    )
    assert int(clipped.num_nonfinite) == 1 and int(clipped.num_units) == 5
    assert float(clipped.per_unit_norms[1]) == 0.0  # all-padded unit
    assert float(clipped.per_unit_norms[2]) == 0.0  # non-finite unit: dropped
    # The non-finite unit counts as present, unclipped.
    assert round(float(clipped.clipped_fraction) * 5) == 4


class HandWeight(nn.Module):
    """A weight matrix used by hand (the exact fallback) before a LayerNorm."""

    @nn.compact
    def __call__(self, x):
        w = self.param("w", nn.initializers.normal(0.3), (x.shape[-1], 12))
        return nn.Dense(1)(nn.LayerNorm()(jnp.tanh(x @ w)))[0]


def test_a_fallback_weight_matrix_with_several_items_per_unit_matches_vmap():
    # Its per-unit gradient is the sum over the unit's items, taken by the backward
    # pass of the unit's summed loss.
    model = HandWeight()
    batch, mask = _batch(65, units=4, items=3, shape=(6,))
    params = _init(model, 66, batch["x"][0, 0])
    loss = _mse(model)
    plan = _ghost._plan(loss, False, params, _first_item(batch), None)
    assert len(plan.fallback) == 1 and len(plan.ghost) == 4
    _compare_at_clip_norms(loss, params, batch, mask, [0.05, 1e6])
