"""PrivORL-n's DP fine-tuning: the ghost and vmap clipped sums of the EDM unit loss
agree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import diffusion, privacy
from privrl_jax.synth import _privorl_n as core
from privrl_jax.synth._curiosity import RNDConfig, sample_candidates


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize(
    "layer_norm, num_noise",
    # LayerNorm's ghost rule is checked against vmap in tests/privacy/test_ghost.py
    [(False, 1), pytest.param(True, 3, marks=pytest.mark.slow)],
)
def test_ghost_clipped_sum_equals_vmap_for_the_edm_unit_loss(layer_norm, num_noise):
    dim = 7
    net = diffusion.ResidualMLP(width=32, depth=2, dim_t=16, layer_norm=layer_norm)
    den = diffusion.EDMDenoiser(net.apply)
    params = net.init(jax.random.key(0), jnp.zeros(dim), jnp.zeros(()))
    x = jax.random.normal(jax.random.key(1), (12, 1, dim))
    mask = jnp.arange(12)[:, None] < 9  # three padded units
    key = jax.random.key(2)
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=100, sampling_rate=0.09, microbatch_size=12
        ),
        l2_clip_norm=0.5,
        steps=10,
        noise_multiplier=1.0,
    )
    sums, norms = {}, {}
    for method in ("vmap", "ghost"):
        fns = core.make_dp_finetune(
            den, plan, learning_rate=1e-3, num_noise=num_noise, clip_method=method
        )
        assert fns.clip.l2_clip_norms == (0.5,)  # the clip norm comes from the plan
        sums[method], metrics = jax.jit(fns.clip.__call__)(params, x, mask, key)
        norms[method] = np.asarray(metrics.per_unit_norms)
    for a, b in zip(jax.tree.leaves(sums["vmap"]), jax.tree.leaves(sums["ghost"])):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)
    np.testing.assert_allclose(norms["vmap"], norms["ghost"], rtol=2e-4)
    assert np.any(norms["vmap"][:9] > 0.5)  # the clip binds for some units


def test_pick_curious_returns_the_top_scoring_candidates_and_trains_rnd():
    from privrl_jax import synth

    rnd = synth.init_rnd(
        jax.random.key(0),
        3,
        config=RNDConfig(target_features=(16, 16), predictor_features=(16,)),
    )
    pool = jax.random.normal(jax.random.key(1), (50, 3))
    scores = jnp.arange(50.0)[::-1]  # row r scores 49 - r
    key = jax.random.key(2)
    rows, new_rnd = core.pick_curious(
        rnd, pool, scores, key, num_candidates=20, num_picked=6
    )
    cands, cand_scores = sample_candidates(key, pool, scores, num=20)
    top = np.argsort(-np.asarray(cand_scores))[:6]
    np.testing.assert_array_equal(
        np.sort(np.asarray(rows), 0), np.sort(np.asarray(cands)[top], 0)
    )
    assert int(new_rnd.step) == int(rnd.step) + 1
