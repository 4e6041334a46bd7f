"""The registry's inventory entry: make("inventory-w<w>-h<H>") is _inventory's MDP."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax.envs import _registry as registry
from privrl_jax.envs._inventory import (
    InventoryControl,
    inventory_stage,
    make_inventory_params,
    sample_demand,
)


def test_make_returns_the_inventory_env_and_its_params():
    env, params = registry.make("inventory-w2-h5", boundary=0.8, holding_cost=0.1)
    assert isinstance(env, InventoryControl) and env == InventoryControl(2, 5)
    assert env.name == "inventory-w2-h5"
    ref = make_inventory_params(2, 5, boundary=0.8, holding_cost=0.1)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(ref)):
        np.testing.assert_array_equal(a, b)
    assert params.boundary.shape == (5, 4) and float(
        params.boundary[0, 0]
    ) == pytest.approx(0.8)
    assert params.max_steps_in_episode == 5
    assert set(registry.INVENTORY_ENVS) <= set(registry.registered_envs())
    for name in registry.INVENTORY_ENVS:
        e, p = registry.make(name)
        assert e.name == name and p.max_steps_in_episode == e.horizon


def test_registry_step_matches_the_stage_dynamics():
    env, params = registry.make("inventory-w2-h3")
    key = jax.random.key(3)
    obs, state = env.reset(jax.random.key(0), params)
    action = jnp.array([0.3, 0.6])
    obs2, state2, reward, done, info = env.step(key, state, action, params)
    # Environment.step splits its key into (step key, reset key); step_env draws the
    # demand of stage 0 from the step key.
    key_step, _ = jax.random.split(key)
    demand = sample_demand(key_step, params, 0)
    out = inventory_stage(obs, action, demand, params)
    np.testing.assert_allclose(obs2, out.next_level, atol=1e-7)
    assert float(reward) == pytest.approx(float(out.reward), abs=1e-7)
    np.testing.assert_allclose(info["sales"], out.sales, atol=1e-7)
    assert not bool(done) and int(state2.time) == 1
    # By hand: y = min(s + a, 1), s' = (y - D)^+.
    y = np.minimum(np.asarray(obs) + np.asarray(action), 1.0)
    np.testing.assert_allclose(obs2, np.maximum(y - np.asarray(demand), 0.0), atol=1e-6)


def test_bad_inventory_names_and_params_fail_with_one_line():
    with pytest.raises(ValueError, match="unknown params"):
        registry.make("inventory-w1-h5", gravity=1.0)
    for bad in ("inventory-w0-h5", "inventory-w1-h0", "inventory-w1", "inventory"):
        with pytest.raises(ValueError, match="unknown env name"):
            registry.make(bad)
