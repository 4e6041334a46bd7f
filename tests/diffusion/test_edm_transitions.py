"""Transition flattening, one-hot round trip and the normaliser."""

import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import data, diffusion
from privrl_jax.data import Normalizer as Normaliser
from privrl_jax.data import Transitions
from privrl_jax.data import normalizer_from_bounds as normaliser_from_bounds
from privrl_jax.diffusion._transitions import DiscreteDim

LAYOUT = diffusion.TransitionLayout(
    obs_dim=3,
    act_dim=2,
    discrete=(
        DiscreteDim("observations", 1, 4),
        DiscreteDim("actions", 0, 3),
        DiscreteDim("rewards", 0, 2),
    ),
)


def _random_transitions(n=50, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    nxt = rng.normal(size=(n, 3)).astype(np.float32)
    obs[:, 1] = rng.integers(0, 4, n)
    nxt[:, 1] = rng.integers(0, 4, n)
    act = rng.normal(size=(n, 2)).astype(np.float32)
    act[:, 0] = rng.integers(0, 3, n)
    return Transitions(
        observations=jnp.asarray(obs),
        actions=jnp.asarray(act),
        rewards=jnp.asarray(rng.integers(0, 2, n).astype(np.float32)),
        next_observations=jnp.asarray(nxt),
        terminals=jnp.asarray(rng.integers(0, 2, n).astype(np.float32)),
        timeouts=jnp.zeros((n,), jnp.float32),
    )


def test_layout_sizes():
    assert LAYOUT.raw_dim == 2 * 3 + 2 + 2
    # obs: 2 + 4 (x2 for s and s'), actions 3 + 1, reward 2, terminal 2.
    assert LAYOUT.encoded_dim == 2 * 6 + 4 + 2 + 2
    mask = LAYOUT.one_hot_mask()
    assert mask.sum() == 2 * 4 + 3 + 2 + 2
    assert mask.shape == (LAYOUT.encoded_dim,)


def test_one_hot_round_trip_is_exact():
    t = _random_transitions()
    enc = diffusion.flatten_transitions(t, LAYOUT)
    assert enc.shape == (50, LAYOUT.encoded_dim)
    # One-hot blocks hold exactly one 1 each.
    mask = LAYOUT.one_hot_mask()
    assert np.all(np.isin(np.asarray(enc)[:, mask], [0.0, 1.0]))
    assert np.asarray(enc)[:, mask].sum(1).tolist() == [5.0] * 50
    back = diffusion.unflatten_transitions(enc, LAYOUT)
    for name in (
        "observations",
        "actions",
        "rewards",
        "next_observations",
        "terminals",
    ):
        np.testing.assert_array_equal(
            getattr(back, name), getattr(t, name), err_msg=name
        )
    np.testing.assert_array_equal(back.timeouts, 0.0)


def test_decoding_takes_the_argmax_of_noisy_blocks():
    t = _random_transitions(n=20, seed=1)
    enc = np.asarray(diffusion.flatten_transitions(t, LAYOUT))
    rng = np.random.default_rng(0)
    noisy = enc + rng.uniform(-0.3, 0.3, enc.shape).astype(np.float32)
    back = diffusion.unflatten_transitions(jnp.asarray(noisy), LAYOUT)
    np.testing.assert_array_equal(back.actions[:, 0], t.actions[:, 0])
    np.testing.assert_array_equal(back.observations[:, 1], t.observations[:, 1])
    np.testing.assert_array_equal(back.terminals, t.terminals)
    # Continuous dims pass through unchanged (with their noise).
    np.testing.assert_allclose(back.actions[:, 1], noisy[:, 2 + 4 + 3], rtol=1e-6)


def test_continuous_terminals_are_thresholded():
    layout = diffusion.TransitionLayout(obs_dim=1, act_dim=1, one_hot_terminals=False)
    enc = jnp.array([[0.0, 0.0, 0.0, 0.0, 0.7], [0.0, 0.0, 0.0, 0.0, 0.2]])
    np.testing.assert_array_equal(
        diffusion.unflatten_transitions(enc, layout).terminals, [1, 0]
    )


@pytest.mark.parametrize(
    "discrete,match",
    [
        ((DiscreteDim("actions", 2, 3),), "index"),
        ((DiscreteDim("actions", 0, 1),), "num_classes"),
        ((DiscreteDim("foo", 0, 2),), "field"),
        ((DiscreteDim("terminals", 0, 2),), "one_hot_terminals"),
        ((DiscreteDim("actions", 0, 2),) * 2, "twice"),
    ],
)
def test_bad_layouts_are_rejected(discrete, match):
    with pytest.raises(ValueError, match=match):
        diffusion.TransitionLayout(obs_dim=3, act_dim=2, discrete=discrete)


def test_mismatched_transitions_are_rejected():
    layout = diffusion.TransitionLayout(obs_dim=4, act_dim=2)
    with pytest.raises(ValueError, match="obs_dim"):
        diffusion.flatten_transitions(_random_transitions(), layout)


def test_normaliser_fitted_on_public_data():
    public = np.array(
        diffusion.flatten_transitions(_random_transitions(500, 2), LAYOUT)
    )
    public[:, 0] = public[:, 0] * 5.0 + 3.0
    mask = LAYOUT.one_hot_mask()
    norm = diffusion.fit_normaliser_on_public(public, one_hot_mask=mask)
    z = np.asarray(diffusion.normalise(norm, jnp.asarray(public)))
    np.testing.assert_allclose(z[:, ~mask].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z[:, ~mask].std(0), 1.0, rtol=1e-4)
    np.testing.assert_array_equal(z[:, mask], public[:, mask])  # one-hot left as {0, 1}
    np.testing.assert_allclose(
        diffusion.denormalise(norm, jnp.asarray(z)), public, atol=1e-4
    )


def test_normaliser_floors_constant_dims_and_validates():
    near_constant = 0.5 + 1e-3 * (np.arange(10) % 2)  # std 5e-4
    public = np.stack([np.ones(10), np.arange(10.0), near_constant], 1)
    norm = diffusion.fit_normaliser_on_public(public, min_scale=1e-2)
    # By hand: std of 0..9 is sqrt(8.25); the constant column and the one of std 5e-4
    # are floored at 1e-2 (not std + 1e-2).
    np.testing.assert_allclose(norm.shift, [1.0, 4.5, 0.5005], rtol=1e-6)
    np.testing.assert_allclose(norm.scale, [1e-2, np.sqrt(8.25), 1e-2], rtol=1e-6)
    x = jnp.array([[1.05, 9.0, 0.5005]])
    z = diffusion.normalise(norm, x)
    expected = [[5.0, 4.5 / np.sqrt(8.25), 0.0]]
    np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(diffusion.denormalise(norm, z), x, rtol=1e-6)
    with pytest.raises(ValueError, match="NaN"):
        diffusion.fit_normaliser_on_public(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="shape"):
        diffusion.fit_normaliser_on_public(np.ones(5))


def test_the_normaliser_is_the_data_packages_class():
    assert Normaliser is data.Normalizer
    norm = diffusion.fit_normaliser_on_public(np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert isinstance(norm, data.Normalizer)
    np.testing.assert_array_equal(
        diffusion.normalise(norm, jnp.ones((1, 2))), norm.normalize(jnp.ones((1, 2)))
    )


def test_normaliser_from_bounds():
    norm = normaliser_from_bounds([0.0, -2.0], [4.0, 2.0])
    x = jnp.array([[0.0, -2.0], [4.0, 2.0], [2.0, 0.0]])
    np.testing.assert_allclose(diffusion.normalise(norm, x), [[-1, -1], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match="high > low"):
        normaliser_from_bounds([0.0], [0.0])


def test_next_obs_delta_encodes_the_step_and_round_trips():
    import dataclasses

    layout = dataclasses.replace(LAYOUT, next_obs_delta=True)
    t = _random_transitions()
    plain = np.asarray(diffusion.flatten_transitions(t, LAYOUT))
    delta = np.asarray(diffusion.flatten_transitions(t, layout))
    # s' block (encoded): continuous obs dims 0 and 2 sit at offsets 0 and 5 of the
    # 6-wide block.
    start = 6 + 4 + 2  # after s (2 + 4), a (3 + 1), r (2)
    obs, nxt = np.asarray(t.observations), np.asarray(t.next_observations)
    np.testing.assert_allclose(delta[:, start], nxt[:, 0] - obs[:, 0], rtol=1e-6)
    np.testing.assert_allclose(delta[:, start + 5], nxt[:, 2] - obs[:, 2], rtol=1e-6)
    # The discrete obs dim stays absolute; everything else is unchanged.
    keep = np.ones(plain.shape[1], bool)
    keep[[start, start + 5]] = False
    np.testing.assert_array_equal(delta[:, keep], plain[:, keep])
    back = diffusion.unflatten_transitions(jnp.asarray(delta), layout)
    np.testing.assert_allclose(back.next_observations, nxt, rtol=1e-5, atol=1e-6)
