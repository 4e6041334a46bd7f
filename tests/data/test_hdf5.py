"""D4RL-format HDF5 I/O: exact round trip, atomic writes, D4RL files, validation."""

import os

import h5py
import jax
import numpy as np
import pytest

from privrl_jax import data


def _transitions(n: int = 40, seed: int = 0) -> data.Transitions:
    rng = np.random.default_rng(seed)
    flags = rng.random(n)
    return data.Transitions(
        observations=rng.normal(size=(n, 4)).astype(np.float32),
        actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
        rewards=rng.normal(size=n).astype(np.float32),
        next_observations=rng.normal(size=(n, 4)).astype(np.float32),
        terminals=(flags < 0.1).astype(np.float32),
        timeouts=(flags > 0.9).astype(np.float32),
    )


def _write_raw(path, arrays):
    with h5py.File(path, "w") as f:
        for k, v in arrays.items():
            f.create_dataset(k, data=v)


def test_round_trip_is_exact(tmp_path):
    t = _transitions()
    path = tmp_path / "sub" / "d.hdf5"
    data.save_hdf5(path, t, metadata={"env": "maze2d-umaze", "seed": 3, "noise": 0.5})
    back = data.load_hdf5(path)
    jax.tree.map(np.testing.assert_array_equal, back, t)
    assert data.read_hdf5_metadata(path) == {
        "env": "maze2d-umaze",
        "seed": 3,
        "noise": 0.5,
    }
    with h5py.File(path) as f:  # D4RL's dtypes on disk
        assert f["terminals"].dtype == bool and f["observations"].dtype == np.float32


def test_write_is_atomic(tmp_path):
    path = tmp_path / "d.hdf5"
    t = _transitions()
    data.save_hdf5(path, t)
    # A failure half-way (bad metadata after the arrays are written) leaves the old
    # file intact and no temporary file behind.
    with pytest.raises(ValueError, match="metadata"):
        data.save_hdf5(path, _transitions(seed=1), metadata={"bad": [1, 2]})
    jax.tree.map(np.testing.assert_array_equal, data.load_hdf5(path), t)
    assert os.listdir(tmp_path) == ["d.hdf5"]
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600


def test_loads_d4rl_file_without_next_observations(tmp_path):
    # Two episodes of an original D4RL file: rows 0-2 end with a timeout, rows 3-5
    # end with a terminal; float64 observations and bool flags as D4RL stores them.
    obs = np.arange(12, dtype=np.float64).reshape(6, 2)
    path = tmp_path / "d4rl.hdf5"
    _write_raw(
        path,
        {
            "observations": obs,
            "actions": np.ones((6, 1)),
            "rewards": np.arange(6.0),
            "terminals": np.array([0, 0, 0, 0, 0, 1], bool),
            "timeouts": np.array([0, 0, 1, 0, 0, 0], bool),
            "infos/goal": np.zeros((6, 2)),
        },
    )
    t = data.load_hdf5(path)
    # The timeout row 2 is dropped (its successor is a new episode), row 1 becomes
    # the timeout; the terminal row is kept with next_observations = observations.
    np.testing.assert_array_equal(t.rewards, [0, 1, 3, 4, 5])
    np.testing.assert_array_equal(
        t.next_observations, obs[[1, 2, 4, 5, 5]].astype(np.float32)
    )
    np.testing.assert_array_equal(t.timeouts, [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(t.terminals, [0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match="next_observations"):
        data.load_hdf5(path, derive_next=False)


def test_missing_file_and_missing_key(tmp_path):
    with pytest.raises(FileNotFoundError):
        data.load_hdf5(tmp_path / "nope.hdf5")
    t = _transitions()
    arrays = {
        k: np.asarray(getattr(t, k)) for k in data.TRANSITION_FIELDS if k != "timeouts"
    }
    _write_raw(tmp_path / "x.hdf5", arrays)
    with pytest.raises(ValueError, match="missing key.*'timeouts'"):
        data.load_hdf5(tmp_path / "x.hdf5")


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("rewards", np.zeros(39, np.float32), "'rewards'.*39 rows"),
        (
            "observations",
            np.full((40, 4), np.nan, np.float32),
            "'observations'.*NaN/inf",
        ),
        (
            "actions",
            np.array(["a"] * 40).reshape(40, 1).astype("S1"),
            "'actions'.*dtype",
        ),
        ("terminals", np.full(40, 2.0, np.float32), "'terminals'.*0/1"),
    ],
)
def test_bad_files_name_the_key(tmp_path, key, value, match):
    t = _transitions()
    arrays = {k: np.asarray(getattr(t, k)) for k in data.TRANSITION_FIELDS}
    arrays[key] = value
    path = tmp_path / "bad.hdf5"
    _write_raw(path, arrays)
    with pytest.raises(ValueError, match=match):
        data.load_hdf5(path)


def test_loads_minari_episodes(tmp_path):
    # Minari's main_data.hdf5: per-episode groups, T + 1 observations (dict-valued
    # for point mazes), terminations / truncations.
    path = tmp_path / "main_data.hdf5"
    rng = np.random.default_rng(0)
    episodes = []
    with h5py.File(path, "w") as f:
        for i, (t, term) in enumerate([(3, False), (2, True)]):
            obs = rng.normal(size=(t + 1, 4)).astype(np.float32)
            ep = f.create_group(f"episode_{i}")
            ep.create_dataset("observations/observation", data=obs)
            ep.create_dataset("observations/desired_goal", data=obs[:, :2])
            ep.create_dataset(
                "actions", data=rng.normal(size=(t, 2)).astype(np.float32)
            )
            ep.create_dataset("rewards", data=np.arange(t, dtype=np.float64))
            ep.create_dataset("terminations", data=np.array([False] * (t - 1) + [term]))
            ep.create_dataset("truncations", data=np.zeros(t, bool))
            episodes.append(obs)
    t = data.load_hdf5(path, observation_key="observation")
    np.testing.assert_array_equal(
        t.observations, np.concatenate([o[:-1] for o in episodes])
    )
    np.testing.assert_array_equal(
        t.next_observations, np.concatenate([o[1:] for o in episodes])
    )
    np.testing.assert_array_equal(t.rewards, [0, 1, 2, 0, 1])
    np.testing.assert_array_equal(t.terminals, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(t.timeouts, [0, 0, 1, 0, 0])  # episode 0 was cut
    with pytest.raises(ValueError, match="desired_goal.*observation_key"):
        data.load_hdf5(path)
