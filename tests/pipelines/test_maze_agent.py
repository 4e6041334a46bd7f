"""pipelines.maze_agent: one offline agent on maze2d data it collects itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.pipelines import maze_agent as ma


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["data.env=hopper-medium-v2"], r"data.env='hopper-medium-v2': .*maze2d"),
        (["data.kind=d4rl"], r"data.kind must be 'expert' or 'random'"),
        (["data.size=0"], r"data.size must be an integer in \[1, "),
        (["data.kind=random", "data.action_noise=0.3"], r"the random kind has none"),
        (["train.updates=5001"], r"not a multiple of train.chunk_size=500"),
        (["train.eval_every=10000"], r"at most train.updates=5000"),
        (["train.eval_every=1500"], r"the final evaluation would not be"),
        (["train.algo=sac"], r"train.algo must be"),
        (["train.agent.num_critics=3"], r"unknown config key.*train.agent.num_critics"),
        (["train.algo=edac", "train.agent.hidden_dims=[0]"], r"train.agent \(edac"),
        (["trian.updates=10"], r"unknown config key"),
    ],
)
def test_the_config_refuses_what_would_not_run_as_asked(overrides, match):
    with pytest.raises(ValueError, match=match):
        ma.load("maze_agent/default", overrides)


def test_the_default_config_is_the_legacy_scripts_and_agent_fields_are_typed():
    cfg = ma.load(
        "maze_agent/default",
        ["train.algo=edac", "train.agent.hidden_dims=[64, 64, 64]"],
    )
    assert (cfg.data.kind, cfg.data.size, cfg.data.seed) == ("expert", 100_000, 12345)
    assert (cfg.train.updates, cfg.train.chunk_size, cfg.train.eval_every) == (
        5000,
        500,
        2500,
    )
    assert cfg.train.agent == {"hidden_dims": (64, 64, 64)}


def test_random_data_are_uniform_actions_with_the_tasks_rewards():
    """maze2d-umaze's sparse reward is 1 within 0.5 of the goal (D4RL), read off the
    next position of every row, the episode's final one included."""
    cfg = ma.load("maze_agent/default", ["data.kind=random", "data.size=3000"]).data
    data = ma.collect(cfg)
    assert len(data) == 3000
    a = np.asarray(data.actions)
    assert a.min() >= -1.0 and a.max() <= 1.0 and abs(a.mean()) < 0.05
    _, params = envs.make("maze2d-umaze")
    dist = np.linalg.norm(
        np.asarray(data.next_observations)[:, :2] - np.asarray(params.goal), axis=1
    )
    np.testing.assert_array_equal(np.asarray(data.rewards), dist <= 0.5)
    # 100 streams of 30 steps: no episode (300 steps) ends, none terminates.
    assert float(np.sum(data.timeouts)) == 0.0 and float(np.sum(data.terminals)) == 0.0
    again = ma.collect(cfg)
    np.testing.assert_array_equal(np.asarray(again.actions), a)
    other = ma.collect(
        ma.load(None, ["data.kind=random", "data.size=3000", "data.seed=1"]).data
    )
    assert not np.array_equal(np.asarray(other.actions), a)


def test_a_tiny_run_reports_its_curve_and_refuses_a_used_directory(tmp_path):
    cfg = ma.load(
        "maze_agent/default",
        [
            "data.size=500",
            "train.updates=4",
            "train.chunk_size=2",
            "train.eval_every=2",
            "train.eval_episodes=1",
        ],
    )
    r = ma.run(cfg, tmp_path / "run")
    assert [e["step"] for e in r["curve"]] == [2, 4]
    assert r["final"] == r["curve"][-1]
    assert r["best_score"] == max(e["score_mean"] for e in r["curve"])
    assert r["score_at"] == {
        "2": r["curve"][0]["score_mean"],
        "4": r["final"]["score_mean"],
    }
    assert r["data"]["transitions"] == 500
    stored = json.loads((tmp_path / "run" / "report.json").read_text())
    assert stored["final"] == r["final"] and stored["config"]["train"]["updates"] == 4
    with pytest.raises(ValueError, match="is not empty"):
        ma.run(cfg, tmp_path / "run")
