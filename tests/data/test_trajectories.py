"""Transitions <-> Trajectories conversions."""

import jax
import numpy as np
import pytest

from privrl_jax import data


def _random_transitions(
    seed: int, n: int = 50, ends_p: float = 0.15
) -> data.Transitions:
    rng = np.random.default_rng(seed)
    ends = rng.random(n) < ends_p
    kind = rng.random(n) < 0.5
    return data.Transitions(
        observations=rng.normal(size=(n, 3)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rewards=rng.normal(size=n).astype(np.float32),
        next_observations=rng.normal(size=(n, 3)).astype(np.float32),
        terminals=(ends & kind).astype(np.float32),
        timeouts=(ends & ~kind).astype(np.float32),
    )


def test_hand_example():
    t = data.Transitions(
        observations=np.arange(6, dtype=np.float32)[:, None],
        actions=np.zeros((6, 1), np.float32),
        rewards=np.arange(6, dtype=np.float32) * 10,
        next_observations=np.arange(1, 7, dtype=np.float32)[:, None],
        terminals=np.array([0, 1, 0, 0, 0, 0], np.float32),
        timeouts=np.array([0, 0, 0, 0, 1, 0], np.float32),
    )
    tr = data.transitions_to_trajectories(t)
    np.testing.assert_array_equal(tr.lengths, [2, 3, 1])
    np.testing.assert_array_equal(tr.mask, [[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    np.testing.assert_array_equal(tr.rewards, [[0, 10, 0], [20, 30, 40], [50, 0, 0]])
    np.testing.assert_array_equal(tr.terminals[0], [0, 1, 0])
    np.testing.assert_array_equal(tr.timeouts[1], [0, 0, 1])
    assert tr.observations.shape == (3, 3, 1) and tr.max_length == 3 and len(tr) == 3


@pytest.mark.parametrize("seed", range(5))
def test_round_trip_transitions_trajectories_transitions_is_exact(seed):
    t = _random_transitions(seed)
    for max_length in (None, 64):
        back = data.trajectories_to_transitions(
            data.transitions_to_trajectories(t, max_length=max_length)
        )
        jax.tree.map(np.testing.assert_array_equal, back, t)


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_trajectories_transitions_trajectories_is_exact(seed):
    tr = data.transitions_to_trajectories(_random_transitions(seed))
    again = data.transitions_to_trajectories(data.trajectories_to_transitions(tr))
    jax.tree.map(np.testing.assert_array_equal, again, tr)


def test_padding_is_zero_and_lengths_match_boundaries():
    t = _random_transitions(0, n=200)
    tr = data.transitions_to_trajectories(t, max_length=100)
    _, lengths = data.episode_boundaries(t)
    np.testing.assert_array_equal(tr.lengths, lengths)
    assert int(lengths.sum()) == 200
    pad = np.asarray(tr.mask) == 0
    assert (np.asarray(tr.observations)[pad] == 0).all()
    assert (np.asarray(tr.rewards)[pad] == 0).all()
    # Each trajectory but the last ends with exactly one flag, on its last step.
    flags = np.asarray(tr.terminals) + np.asarray(tr.timeouts)
    for b, n in enumerate(lengths[:-1]):
        assert flags[b, n - 1] == 1 and flags[b, : n - 1].sum() == 0


def test_errors():
    t = _random_transitions(1)
    longest = int(data.episode_boundaries(t)[1].max())
    with pytest.raises(ValueError, match="max_length"):
        data.transitions_to_trajectories(t, max_length=longest - 1)
    tr = data.transitions_to_trajectories(t)
    bad = tr.replace(mask=np.ones_like(np.asarray(tr.mask)))
    with pytest.raises(ValueError, match="mask"):
        data.trajectories_to_transitions(bad)
