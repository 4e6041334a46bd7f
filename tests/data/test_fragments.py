"""Trajectories <-> fragments with link transitions (PrivORL-j, Sec. VI-A)."""

import numpy as np
import pytest

from privrl_jax import data
from privrl_jax.data._fragments import fragments_to_trajectories, link_consistency


def _transitions(seed: int, n: int = 200, ends_p: float = 0.03) -> data.Transitions:
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


@pytest.mark.parametrize("horizon", [1, 4, 7, 32])
def test_round_trip_exact(horizon):
    traj = data.transitions_to_trajectories(_transitions(0))
    f_max = -(-int(np.max(traj.lengths)) // horizon)
    frags = data.trajectories_to_fragments(
        traj, horizon=horizon, max_fragments=f_max + 1
    )
    back = fragments_to_trajectories(frags, max_length=traj.max_length)
    for k in data.TRANSITION_FIELDS + ("mask", "lengths"):
        np.testing.assert_array_equal(
            np.asarray(getattr(back, k)), np.asarray(getattr(traj, k)), err_msg=k
        )
    # Links: zero on first fragments, the previous fragment's last step elsewhere,
    # exactly.
    assert link_consistency(frags) == 0.0
    assert not np.asarray(frags.has_link)[:, 0].any()
    for k in data.STEP_FIELDS:
        assert not np.asarray(frags.link[k])[~np.asarray(frags.has_link)].any()
    # ... and the links alone rebuild every step but the last of each trajectory's last
    # fragment.
    num = np.asarray(frags.fragment_mask).sum(1)
    assert np.array_equal(num, -(-np.asarray(traj.lengths) // horizon))
    assert np.array_equal(np.asarray(frags.has_link).sum(1), num - 1)


def test_hand_example_links_and_masks():
    # One trajectory of 5 steps, H = 2 -> fragments [0, 1], [2, 3], [4, pad].
    t = data.Transitions(
        observations=np.arange(5, dtype=np.float32)[:, None],
        actions=np.zeros((5, 1), np.float32),
        rewards=np.arange(5, dtype=np.float32) * 10,
        next_observations=np.arange(1, 6, dtype=np.float32)[:, None],
        terminals=np.array([0, 0, 0, 0, 1], np.float32),
        timeouts=np.zeros(5, np.float32),
    )
    frags = data.trajectories_to_fragments(
        data.transitions_to_trajectories(t), horizon=2, max_fragments=4
    )
    np.testing.assert_array_equal(frags.step_mask[0], [[1, 1], [1, 1], [1, 0], [0, 0]])
    np.testing.assert_array_equal(frags.fragment_mask[0], [1, 1, 1, 0])
    np.testing.assert_array_equal(frags.has_link[0], [0, 1, 1, 0])
    np.testing.assert_array_equal(frags.link["observations"][0, :, 0], [0, 1, 3, 0])
    np.testing.assert_array_equal(
        frags.link["next_observations"][0, :, 0], [0, 2, 4, 0]
    )
    np.testing.assert_array_equal(frags.link["rewards"][0], [0, 10, 30, 0])
    np.testing.assert_array_equal(frags.terminals[0, 2], [1, 0])


def test_truncation_is_data_independent_and_ends_with_timeout():
    t = data.Transitions(
        observations=np.arange(10, dtype=np.float32)[:, None],
        actions=np.zeros((10, 1), np.float32),
        rewards=np.zeros(10, np.float32),
        next_observations=np.arange(1, 11, dtype=np.float32)[:, None],
        terminals=np.zeros(10, np.float32),
        timeouts=np.zeros(10, np.float32),
    )
    traj = data.transitions_to_trajectories(t)
    frags = data.trajectories_to_fragments(traj, horizon=3, max_fragments=2)
    assert int(frags.lengths[0]) == 6  # the first F H = 6 steps, one unit
    back = fragments_to_trajectories(frags)
    np.testing.assert_array_equal(back.observations[0, :, 0], np.arange(6))
    np.testing.assert_array_equal(back.timeouts[0], [0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match="raise max_fragments"):
        data.trajectories_to_fragments(
            traj, horizon=3, max_fragments=2, overflow="error"
        )
    with pytest.raises(ValueError, match="horizon must be an int >= 1"):
        data.trajectories_to_fragments(traj, horizon=0, max_fragments=2)
