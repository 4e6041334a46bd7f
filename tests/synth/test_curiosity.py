"""RND curiosity scores and the curiosity replacement step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import synth
from privrl_jax.synth._curiosity import (
    RNDConfig,
    curiosity_replace,
    rnd_update,
    sample_candidates,
)

SMALL = RNDConfig(
    target_features=(64, 64, 64), predictor_features=(64,), learning_rate=3e-3
)


@pytest.fixture(scope="module")
def trained():
    """An RND predictor trained on N(0, I) in 4-D, with its state before training."""
    state0 = synth.init_rnd(jax.random.key(0), 4, config=SMALL)

    @jax.jit
    def train(state, key):
        def step(state, key):
            x = jax.random.normal(key, (128, 4))
            return rnd_update(state, x)

        return jax.lax.scan(step, state, jax.random.split(key, 400))

    state, metrics = train(state0, jax.random.key(1))
    return state0, state, metrics["rnd_loss"]


def test_rnd_error_higher_out_of_distribution(trained):
    state0, state, losses = trained
    assert float(losses[-20:].mean()) < 0.2 * float(losses[:20].mean())
    x_in = jax.random.normal(jax.random.key(2), (1000, 4))
    x_out = 4.0 + jax.random.normal(jax.random.key(3), (1000, 4))
    s_in = np.asarray(synth.curiosity_score(state, x_in))
    s_out = np.asarray(synth.curiosity_score(state, x_out))
    assert s_in.shape == (1000,)
    assert s_out.mean() > 5 * s_in.mean()
    # Training lowered the error on the training distribution.
    assert s_in.mean() < 0.2 * float(synth.curiosity_score(state0, x_in).mean())


def test_rnd_update_trains_only_the_predictor(trained):
    state0, state, _ = trained
    for a, b in zip(
        jax.tree.leaves(state0.target_params), jax.tree.leaves(state.target_params)
    ):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(
        jax.tree.leaves(state0.predictor_params)[0],
        jax.tree.leaves(state.predictor_params)[0],
    )
    assert int(state.step) == 400


def test_target_is_deeper_with_output_32():
    state = synth.init_rnd(jax.random.key(0), 7)
    assert len(state.target.features) > len(state.predictor.features)
    out = state.target.apply(state.target_params, jnp.zeros((3, 7)))
    assert out.shape == (3, 32)


@pytest.mark.parametrize(
    "batch,rate,expected",
    [
        (10, 0.3, 3),
        (10, 0.25, 3),
        (8, 0.3, 2),
        (16, 0.0, 0),
        (16, 1.0, 16),
        (7, 0.5, 4),
    ],
)
def test_num_replaced_is_round_half_up(batch, rate, expected):
    assert synth.num_replaced(batch, rate) == expected


@pytest.mark.parametrize(
    "batch,rate", [(10, 0.3), (8, 0.3), (16, 0.0), (16, 1.0), (33, 0.5)]
)
def test_replacement_uses_exactly_the_top_scoring_candidates(batch, rate):
    rng = np.random.default_rng(batch)
    real = jnp.asarray(rng.normal(size=(batch, 3)), jnp.float32)
    num_candidates = 40
    # Candidates are identified by their first coordinate (1000 + index).
    candidates = np.zeros((num_candidates, 3), np.float32)
    candidates[:, 0] = 1000 + np.arange(num_candidates)
    scores = rng.permutation(num_candidates).astype(np.float32)
    mixed, mask = curiosity_replace(
        real, jnp.asarray(candidates), jnp.asarray(scores), rate=rate
    )
    mixed, mask = np.asarray(mixed), np.asarray(mask)
    k = int(np.floor(rate * batch + 0.5))
    assert mask.sum() == k
    np.testing.assert_array_equal(mixed[~mask], np.asarray(real)[~mask])
    chosen = sorted(int(v) - 1000 for v in mixed[mask, 0])
    assert chosen == sorted(np.argsort(-scores)[:k].tolist())


def test_replacement_validates():
    real, cands, scores = jnp.zeros((10, 2)), jnp.zeros((2, 2)), jnp.zeros((2,))
    with pytest.raises(ValueError, match="candidates"):
        curiosity_replace(real, cands, scores, rate=0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        curiosity_replace(real, cands, scores, rate=1.5)


def test_sample_candidates_without_replacement():
    pool = jnp.arange(50.0)[:, None] * jnp.ones((1, 2))
    scores = jnp.arange(50.0)
    starts = []
    for seed in range(40):
        cands, cand_scores = sample_candidates(
            jax.random.key(seed), pool, scores, num=20
        )
        first = np.asarray(cands[:, 0])
        assert cands.shape == (20, 2)
        assert len(set(first.tolist())) == 20  # distinct rows
        np.testing.assert_array_equal(first, cand_scores)  # scores stay aligned
        # A contiguous window of the pool, wrapping around.
        np.testing.assert_array_equal(first, (first[0] + np.arange(20)) % 50)
        starts.append(first[0])
    assert len(set(starts)) > 20  # the offset is random
    with pytest.raises(ValueError, match="pool size"):
        sample_candidates(jax.random.key(0), pool, scores, num=51)
