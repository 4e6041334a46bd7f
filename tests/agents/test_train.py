"""The shared training machinery: chunked scan == Python loop, logging, validation."""

import jax
import numpy as np
import pytest
from agents_testlib import TINY, bandit_dataset

from privrl_jax import agents
from privrl_jax.agents._train import make_train_chunk, make_train_step, sample_batch


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize("algo", ["td3bc", "iql"])
def test_scan_chunk_equals_python_loop_of_jitted_steps(algo):
    data = bandit_dataset(jax.random.key(0), n=128)
    agent = agents.make_agent(algo, **TINY)
    state = agent.init(jax.random.key(1), data)
    key = jax.random.key(2)
    num = 4
    chunk = make_train_chunk(agent, batch_size=16, num_updates=num)
    scanned, metrics = chunk(state, data, key)

    step = jax.jit(make_train_step(agent, batch_size=16))
    looped = state
    losses = []
    for k in jax.random.split(key, num):
        looped, m = step(looped, data, k)
        losses.append(m["critic_loss"])
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        scanned,
        looped,
    )
    np.testing.assert_allclose(metrics["critic_loss"], np.stack(losses), rtol=1e-5)
    assert int(scanned.step) == num


def test_sample_batch_draws_rows_of_the_dataset():
    data = bandit_dataset(jax.random.key(0), n=50)
    batch = jax.device_get(sample_batch(jax.random.key(1), data, 200))
    data = jax.device_get(data)
    assert batch.observations.shape == (200, 2)
    # Every sampled row is an existing (obs, action, reward) row.
    rows = {
        tuple(np.round(np.r_[o, a, r], 5))
        for o, a, r in zip(data.observations, data.actions, data.rewards)
    }
    for o, a, r in zip(batch.observations, batch.actions, batch.rewards):
        assert tuple(np.round(np.r_[o, a, r], 5)) in rows
    # With replacement over 50 rows, 200 draws cover most of them.
    assert len({tuple(np.round(o, 5)) for o in batch.observations}) > 40


def test_train_logs_one_entry_per_chunk_and_evaluates_on_schedule():
    data = bandit_dataset(jax.random.key(0), n=64)
    agent = agents.make_agent("iql", **TINY)
    calls = []

    def eval_fn(state, key):
        calls.append(int(state.step))
        return {"step_seen": int(state.step)}

    result = agents.train(
        agent,
        data,
        key=jax.random.key(0),
        num_updates=30,
        batch_size=8,
        chunk_size=10,
        eval_fn=eval_fn,
        eval_every=20,
        progress=False,
    )
    np.testing.assert_array_equal(result.metrics["step"], [10, 20, 30])
    assert calls == [20, 30]
    assert [e["step"] for e in result.evals] == [20, 30]
    assert result.metrics["critic_loss"].shape == (3,)
    assert int(result.state.step) == 30


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_updates": 15, "chunk_size": 10}, "num_updates=15"),
        ({"num_updates": 0}, "num_updates=0"),
        ({"num_updates": 20, "chunk_size": 10, "eval_every": 15}, "eval_every=15"),
        ({"num_updates": 10, "chunk_size": 10, "batch_size": -1}, "batch_size=-1"),
    ],
)
def test_train_rejects_bad_sizes(kwargs, match):
    data = bandit_dataset(jax.random.key(0), n=16)
    agent = agents.make_agent("td3bc", **TINY)
    with pytest.raises(ValueError, match=match):
        agents.train(
            agent,
            data,
            key=jax.random.key(0),
            progress=False,
            eval_fn=lambda s, k: {},
            **kwargs,
        )
