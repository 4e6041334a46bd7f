"""PrivORL-j core: trajectory-level clipping bound, whole-trajectory batches,
generation."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from synth_testlib import assert_each_unit_moves_the_sum_by_c, flat, units

from privrl_jax import diffusion, privacy, synth
from privrl_jax.privacy._fit import make_accumulate
from privrl_jax.synth._privorl_j import pack_rows, stitched_lengths, unpack_rows
from privrl_jax.synth._privorl_n import init_synth_state

SIZES = (1, 1, 1, 1, 1)
D = sum(SIZES)
H = 2


def _linear_net(params, x, c_noise, link, has_link, step_mask):
    """A stand-in network with the transformer's signature and masking, cheap to
    compile: these
    tests are about the clipping, batching and generation paths, which do not depend on
    the network (the transformer's own tests are in
    tests/diffusion/test_fragment_transformer.py)."""
    lk = jnp.where(has_link[..., None], link @ params["v"], params["no_link"])
    out = x @ params["w"] + lk + c_noise[..., None] * params["b"]
    return out * jnp.repeat(step_mask, D, axis=-1)


def _den():
    k1, k2 = jax.random.split(jax.random.key(0))
    params = {
        "w": 0.1 * jax.random.normal(k1, (H * D, H * D)),
        "v": 0.1 * jax.random.normal(k2, (D, H * D)),
        "no_link": jnp.zeros(H * D),
        "b": jnp.zeros(H * D),
    }
    return diffusion.FragmentDenoiser(_linear_net), params


def _units(num_fragments, rng, f=50):
    """Units [U, F, ...]: unit u holds num_fragments[u] full fragments."""
    return units(num_fragments, rng, H, D, f)


def _plan(n, c):
    sampler = privacy.PoissonSampler(
        dataset_size=n, sampling_rate=0.5, microbatch_size=n
    )
    return privacy.DPPlan(
        sampler=sampler, l2_clip_norm=c, steps=1, noise_multiplier=1.0
    )


def test_a_trajectory_moves_the_pre_noise_sum_by_at_most_c():
    den, params = _den()
    c = 1e-3  # far below every unit's gradient norm, so the clip binds
    items, mask = _units([50, 1, 3, 7], np.random.default_rng(0))
    fns = synth.make_trajectory_dp_finetune(den, _plan(4, c), learning_rate=1e-3)
    key = jax.random.key(1)
    clip = jax.jit(lambda p, it, m, ks: fns.clip.with_unit_keys(p, it, m, ks))
    keys = jax.random.split(key, 4)
    _, metrics = clip(params, items, mask, keys)
    assert float(jnp.min(metrics.per_unit_norms)) > 100 * c
    # Dropping the 50-fragment or the 1-fragment trajectory moves the sum by C (clipped,
    # not zeroed).
    assert_each_unit_moves_the_sum_by_c(
        lambda m: clip(params, items, m, keys)[0], mask, c, low_rtol=1e-3
    )
    # Clipping fragments separately (the pitfall) would let the 50-fragment trajectory
    # move it 50 C.
    frag_units = jax.tree_util.tree_map(lambda x: x[0][:, None], items)
    per_frag, _ = jax.jit(lambda p, it, m, ks: fns.clip.with_unit_keys(p, it, m, ks))(
        params, frag_units, mask[0][:, None], jax.random.split(key, 50)
    )
    assert np.linalg.norm(flat(per_frag)) > 10 * c


def test_the_loop_gathers_whole_trajectories():
    """Index i of a batch brings all of trajectory i's fragments, clipped as one
    gradient."""
    den, params = _den()
    c = 0.05
    items, mask = _units([5, 1, 2], np.random.default_rng(2), f=6)
    plan = _plan(3, c)
    fns = synth.make_trajectory_dp_finetune(den, plan, learning_rate=1e-3)
    acc0 = jax.tree_util.tree_map(jnp.zeros_like, params)
    loss_key = jax.random.key(9)
    got = make_accumulate(fns.clip)(
        acc0,
        params,
        items,
        mask,
        jnp.array([0]),
        jnp.array([True]),
        np.int64(0),
        loss_key,
        np.int32(4),
    )
    # Reference: the gradient of the trajectory's summed fragment losses, clipped to C
    # by hand; unit 0 of step 4 is keyed by (step, global index).
    unit_key = jax.random.fold_in(jax.random.fold_in(loss_key, 4), 0)
    frag_keys = jax.random.split(unit_key, 6)

    def traj_loss(p):
        one = jax.tree_util.tree_map(lambda x: x[0, :5], items)
        losses = jax.vmap(lambda it, k: diffusion.fragment_edm_loss(den, p, it, k))(
            one, frag_keys[:5]
        )
        return jnp.sum(losses)

    g = jax.jit(jax.grad(traj_loss))(params)
    norm = float(
        np.sqrt(sum(np.sum(np.square(x)) for x in jax.tree_util.tree_leaves(g)))
    )
    assert norm > c
    ref = jax.tree_util.tree_map(lambda x: x * c / norm, g)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-8)
    assert plan.dataset_size == 3  # q N counts trajectories, not fragments


def test_pack_unpack_round_trip():
    items, _ = _units([3], np.random.default_rng(0))
    rows = pack_rows(items)
    back = unpack_rows(rows, horizon=H, dim=D)
    for k in items:
        np.testing.assert_array_equal(back[k], items[k])


def test_stitched_lengths():
    term = jnp.array(
        [[0, 0, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 1, 0]],
        jnp.float32,
    )
    lengths, ended = stitched_lengths(term, jnp.array([5, 4, 5, 2]))
    np.testing.assert_array_equal(lengths, [3, 4, 1, 2])
    np.testing.assert_array_equal(ended, [True, False, True, False])


def _toy_rows(rng, n_traj=64):
    """Public-like toy data: s_{t+1} = s_t + 0.25, a = 0.5, r = s, d = 0; fragments of H
    steps."""
    rows = []
    for _ in range(n_traj):
        s0 = rng.uniform(-2, 2)
        length = 3 * H
        s = s0 + 0.25 * np.arange(length + 1)
        steps = np.stack(
            [s[:-1], np.full(length, 0.5), s[:-1], s[1:], np.zeros(length)], -1
        )
        for f in range(length // H):
            link = steps[f * H - 1] if f else np.zeros(D)
            rows.append(
                np.concatenate(
                    [
                        steps[f * H : (f + 1) * H].ravel(),
                        link,
                        [float(f > 0)],
                        np.ones(H),
                    ]
                )
            )
    return jnp.asarray(np.array(rows), jnp.float32)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_generation_with_a_tiny_trained_model():
    den, params = _den()
    rows = _toy_rows(np.random.default_rng(0))
    tx = optax.adam(3e-3)
    chunk = synth.make_fragment_pretrain_chunk(
        den,
        tx,
        horizon=H,
        dim=D,
        batch_size=32,
        chunk_steps=150,
        curiosity_rate=0.0,
        ema_decay=0.9,
    )
    state = init_synth_state(params, tx)
    rnd = synth.init_rnd(jax.random.key(3), rows.shape[1])
    dummy = jnp.zeros((1, rows.shape[1]))
    state, rnd, m0 = chunk(state, rnd, rows, dummy, jnp.zeros(1), jax.random.key(4))
    state, rnd, m1 = chunk(state, rnd, rows, dummy, jnp.zeros(1), jax.random.key(5))
    assert float(m1.loss) < float(m0.loss)
    gen = synth.generate_fragments(
        jax.random.key(6),
        den,
        state.ema_params,
        num=16,
        num_fragments=4,
        horizon=H,
        dim=D,
        num_steps=8,
    )
    assert gen.fragments.shape == (16, 4, H, D)
    assert not bool(gen.has_link[:, 0].any()) and bool(gen.has_link[:, 1:].all())
    np.testing.assert_array_equal(gen.links[:, 0], 0.0)
    # The link of fragment k + 1 is exactly the last transition of fragment k.
    np.testing.assert_allclose(
        gen.links[:, 1:], gen.fragments[:, :-1, -1], rtol=1e-6, atol=1e-6
    )
    # Requested lengths cut the stitched trajectory (no terminals in this data).
    steps = gen.fragments.reshape(16, 4 * H, D)
    requested = jnp.arange(16) % (4 * H) + 1
    lengths, _ = stitched_lengths(
        jnp.zeros(steps.shape[:2]) * (steps[..., 4] > 10), requested
    )
    np.testing.assert_array_equal(lengths, requested)
    # Stitching: a fragment's first state follows its link's next state (trained: s =
    # s'_link), closer than an unrelated pairing.
    first_s = np.asarray(gen.fragments[:, 1:, 0, 0])
    link_next = np.asarray(gen.links[:, 1:, 3])
    gap = np.mean(np.abs(first_s - link_next))
    shuffled = np.mean(np.abs(first_s - np.roll(link_next, 1, axis=0)))
    assert gap < 0.75 * shuffled, (gap, shuffled)


@pytest.mark.slow  # ~20 s: compiles the transformer's vmap and ghost clipped sums
# its position embedding and "no link" vector take the exact fallback, as expected
@pytest.mark.filterwarnings("ignore:ghost clipping:UserWarning")
def test_ghost_clipped_sum_equals_vmap_for_the_fragment_transformer():
    """PrivORL-j's trajectory-level clip with ``clip_method="ghost"`` on the real
    fragment transformer (LayerNorm, attention, position and "no link" params on the
    exact fallback): the same clipped sum and norms as ``"vmap"``, for trajectories of
    several fragments, padded fragments, a padded trajectory and keyed EDM losses."""
    sizes, horizon = (1, 1, 1), 2
    net = diffusion.FragmentTransformer(
        sizes, horizon, num_layers=1, num_heads=2, embed_dim=8, fourier_dim=4
    )
    dim = sum(sizes)
    params = jax.jit(net.init)(
        jax.random.key(0),
        jnp.zeros(horizon * dim),
        jnp.zeros(()),
        jnp.zeros(dim),
        jnp.array(True),
        jnp.ones(horizon, bool),
    )
    den = diffusion.FragmentDenoiser(net.apply)
    items, mask = units([3, 1, 0, 2], np.random.default_rng(5), horizon, dim, f=3)
    # A padded step inside a real fragment (the last fragment of a trajectory).
    items["step_mask"] = items["step_mask"].at[0, 2, 1].set(False)
    key = jax.random.key(6)
    sums, norms = {}, {}
    for method in ("vmap", "ghost"):
        fns = synth.make_trajectory_dp_finetune(
            den, _plan(4, 0.5), learning_rate=1e-3, clip_method=method
        )
        sums[method], metrics = jax.jit(fns.clip.__call__)(params, items, mask, key)
        norms[method] = np.asarray(metrics.per_unit_norms)
    scale = max(float(np.max(np.abs(x))) for x in jax.tree.leaves(sums["vmap"]))
    for a, b in zip(jax.tree.leaves(sums["vmap"]), jax.tree.leaves(sums["ghost"])):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-5 * scale)
    np.testing.assert_allclose(norms["ghost"], norms["vmap"], rtol=2e-5)
    assert norms["vmap"][2] == 0.0 and np.all(norms["vmap"][[0, 1, 3]] > 0.5)
