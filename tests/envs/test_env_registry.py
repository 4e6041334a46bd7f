"""The registry: maze names, D4RL aliases, gymnax names, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs._base import GymnaxAdapter
from privrl_jax.envs._maze import PointMaze
from privrl_jax.envs._registry import D4RL_MAZE_ENVS, registered_envs


@pytest.mark.parametrize(
    "name, length, dense",
    [
        ("maze2d-umaze", 300, False),
        ("maze2d-medium", 600, False),
        ("maze2d-large", 800, False),
        ("maze2d-umaze-dense", 300, True),
        ("maze2d-large-dense-v1", 800, True),
        ("maze2d-medium-legacy", 600, False),
        ("maze2d-umaze-dense-legacy", 300, True),
    ],
)
def test_make_maze(name, length, dense):
    env, params = envs.make(name)
    assert isinstance(env, PointMaze)
    assert env.name == envs.canonical_name(name) == name
    assert params.max_steps_in_episode == length
    assert bool(params.dense) == dense
    assert params.physics == ("d4rl" if name.endswith("-v1") else "legacy")


def test_maze_names():
    assert len(envs.MAZE_ENVS) == 18 and set(D4RL_MAZE_ENVS) < set(envs.MAZE_ENVS)
    assert all(n.endswith("-v1") for n in D4RL_MAZE_ENVS)
    for bad in ("maze2d-umaze-v0", "maze2d-umaze-v1-dense", "maze2d-umaze-legacy-v1"):
        with pytest.raises(ValueError, match="unknown env name"):
            envs.make(bad)


def test_make_gymnax_env_has_the_five_tuple_step():
    env, params = envs.make("CartPole-v1")
    assert isinstance(env, GymnaxAdapter)
    obs, state = env.reset(jax.random.key(0), params)

    def body(carry, k):
        obs, state = carry
        # Always push right: the pole falls within 100 steps.
        obs, state, _, done, info = env.step(k, state, 1, params)
        return (obs, state), (done, info["terminated"], info["truncated"])

    _, (done, terminated, truncated) = jax.lax.scan(
        body, (obs, state), jax.random.split(jax.random.key(1), 100)
    )
    done, terminated = np.asarray(done), np.asarray(terminated)
    assert terminated.any()  # the pole falls
    np.testing.assert_array_equal(done, terminated | np.asarray(truncated))


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError, match="unknown env name 'maze2d-huge'.*maze2d-umaze.*CartPole-v1"
    ):
        envs.make("maze2d-huge")


def test_param_overrides_are_validated():
    _, params = envs.make("maze2d-umaze", max_steps_in_episode=50, damping=1.0)
    assert params.max_steps_in_episode == 50 and params.damping == 1.0
    with pytest.raises(ValueError, match="unknown params"):
        envs.make("maze2d-umaze", gravity=1.0)
    with pytest.raises(ValueError, match="unknown params"):
        envs.make("MountainCar-v0", not_a_field=1.0)


def test_registered_envs_all_make():
    names = registered_envs()
    assert names[: len(envs.MAZE_ENVS)] == envs.MAZE_ENVS
    assert {"CartPole-v1", "MountainCar-v0", "Pendulum-v1"} <= set(names)
    # (Some gymnax envs, e.g. MNISTBandit-bsuite, download data when made: not here.)
    for name in envs.MAZE_ENVS + ("MountainCar-v0", "Pendulum-v1", "Acrobot-v1"):
        env, params = envs.make(name)
        assert env.name == name or isinstance(env, GymnaxAdapter)
        assert params.max_steps_in_episode >= 1


def test_equal_mazes_share_jit_caches():
    env_a, params = envs.make("maze2d-medium")
    env_b, _ = envs.make("maze2d-medium")
    assert env_a == env_b and hash(env_a) == hash(env_b)
    assert env_a != envs.make("maze2d-medium-dense")[0]
    _, state = env_a.reset(jax.random.key(0), params)
    before = env_a.step._cache_size()
    env_b.step(jax.random.key(1), state, jnp.zeros(2), params)
    env_a.step(jax.random.key(1), state, jnp.ones(2), params)
    assert env_a.step._cache_size() == before + 1  # one compilation for both objects
