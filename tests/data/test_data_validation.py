"""validate_transitions: each kind of bad input names its key."""

import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import data


def _arrays(n: int = 10) -> dict:
    return {
        "observations": np.zeros((n, 3), np.float32),
        "actions": np.zeros((n, 2), np.float32),
        "rewards": np.zeros(n, np.float32),
        "next_observations": np.zeros((n, 3), np.float32),
        "terminals": np.zeros(n, bool),
        "timeouts": np.zeros(n, bool),
    }


def test_valid_input_is_converted_to_float32():
    arrays = _arrays()
    arrays["observations"] = arrays["observations"].astype(np.float64)
    arrays["actions"] = np.ones((10, 2), np.int64)
    arrays["terminals"][3] = True
    t = data.validate_transitions(arrays)
    for k in data.TRANSITION_FIELDS:
        assert getattr(t, k).dtype == jnp.float32
    assert float(t.terminals[3]) == 1.0 and float(t.actions.sum()) == 20.0
    data.validate_transitions(t)  # a Transitions is accepted too


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda a: a.pop("actions"), r"missing key\(s\) \['actions'\]"),
        (lambda a: a.pop("next_observations"), "'next_observations'.*load_hdf5"),
        (
            lambda a: a.update(rewards=np.zeros(9, np.float32)),
            "'rewards'.* has 9 rows.*10",
        ),
        (lambda a: a.update(timeouts=np.zeros(11, bool)), "'timeouts'.* has 11 rows"),
        (
            lambda a: a.update(actions=np.zeros(10, np.float32)),
            r"'actions'.*\[N, dim\].*reshape",
        ),
        (
            lambda a: a.update(rewards=np.zeros((10, 1), np.float32)),
            r"'rewards'.*\[N\].*flatten",
        ),
        (
            lambda a: a.update(next_observations=np.zeros((10, 4), np.float32)),
            "'next_observations'.*must match",
        ),
        (lambda a: a["rewards"].__setitem__(4, np.inf), "'rewards'.*NaN/inf.*row 4"),
        (
            lambda a: a["actions"].__setitem__((7, 1), np.nan),
            "'actions'.*NaN/inf.*row 7",
        ),
        (
            lambda a: a.update(observations=np.zeros((10, 3), np.complex64)),
            "'observations'.*dtype complex64",
        ),
        (lambda a: a.update(rewards=np.zeros(10, bool)), "'rewards'.*dtype bool"),
        (lambda a: a.update(terminals=np.full(10, 0.5)), "'terminals'.*0/1"),
        (lambda a: a.update(**{k: v[:0] for k, v in _arrays().items()}), "empty"),
    ],
)
def test_errors_name_the_key(mutate, match):
    arrays = _arrays()
    mutate(arrays)
    with pytest.raises(ValueError, match=match):
        data.validate_transitions(arrays, source="my.hdf5")


def test_error_mentions_the_source():
    arrays = _arrays()
    arrays["rewards"][0] = np.nan
    with pytest.raises(ValueError, match="in my.hdf5"):
        data.validate_transitions(arrays, source="my.hdf5")
