"""`privrl agent train` end to end on a tiny maze dataset."""

import json

import jax
import pytest
from typer.testing import CliRunner

from privrl_jax import envs, pipelines
from privrl_jax.cli.main import app
from privrl_jax.data import save_hdf5


@pytest.mark.slow  # ~1 min of compilation on 2 cores (4 min under load 13)
def test_agent_train_writes_result_json_and_learning_curve(tmp_path):
    data = envs.collect_dataset(jax.random.key(0), "maze2d-umaze", 500, num_envs=10,
                                chunk_steps=50)
    path = tmp_path / "umaze.hdf5"
    save_hdf5(path, data)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "agent", "train", "--algo", "td3bc", "--dataset", str(path),
        "--env", "maze2d-umaze", "--steps", "20", "--chunk", "10", "--seed", "3",
        "--eval-episodes", "2", "--batch-size", "16", "--out", str(out),
        "--set", "agent.hidden_dims=[16,16]",
    ])
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "result.json").read_text())
    assert payload["config"]["seed"] == 3 and payload["agent_config"]["hidden_dims"] == [16, 16]
    assert [c["step"] for c in payload["curve"]] == [10, 20]
    final = payload["final"]
    r_random, r_expert = envs.reference_returns("maze2d-umaze")
    assert abs(final["score_mean"]
               - 100 * (final["return_mean"] - r_random) / (r_expert - r_random)) < 1e-3
    assert payload["dataset_size"] == 500
    assert (out / "learning_curve.png").stat().st_size > 1000


def test_agent_train_rejects_unknown_algo(tmp_path):
    result = CliRunner().invoke(app, [
        "agent", "train", "--algo", "sac", "--dataset", str(tmp_path / "x.hdf5"),
        "--env", "maze2d-umaze", "--out", str(tmp_path / "o"),
    ])
    assert result.exit_code == 2
    assert result.output.startswith("error: algo='sac': expected one of")


@pytest.fixture
def captured(monkeypatch):
    """Runs `privrl agent train` up to the pipeline call and keeps its config."""
    seen = {}

    def fake_run_agent_train(config, out):
        seen["config"] = config
        return {"final": {"return_mean": 0.0}}

    monkeypatch.setattr(pipelines, "run_agent_train", fake_run_agent_train)
    return seen


def test_agent_train_config_options_and_set(tmp_path, captured):
    cfg_file = tmp_path / "agent.yaml"
    cfg_file.write_text(
        "algo: iql\ndataset: d.hdf5\nenv: maze2d-umaze\nsteps: 2000\n"
        "agent: {expectile: 0.9, hidden_dims: [32, 32]}\n"
    )
    result = CliRunner().invoke(app, [
        "agent", "train", "--config", str(cfg_file), "--out", str(tmp_path / "o"),
        "--seed", "4", "--chunk", "500",
        "--set", "agent.expectile=0.8", "--set", "eval_every=1000",
    ])
    assert result.exit_code == 0, result.output
    assert captured["config"] == pipelines.AgentTrainConfig(
        algo="iql", dataset="d.hdf5", env="maze2d-umaze", steps=2000, seed=4,
        chunk_size=500, eval_every=1000,
        agent={"expectile": 0.8, "hidden_dims": (32, 32)},
    )


@pytest.mark.parametrize(("override", "message"), [
    ("alpha=2.5", "error: unknown config key(s) ['alpha']; valid keys here: ['agent',"),
    ("agent.alpha=x", "error: config key 'agent.alpha' must be a number; got 'x'."),
    ("agent.expectile=0.7", "error: unknown config key(s) ['agent.expectile']"),
    ("steps=1.5", "error: config key 'steps' must be an integer; got 1.5."),
])
def test_agent_train_bad_set_is_one_line_error(tmp_path, captured, override, message):
    result = CliRunner().invoke(app, [
        "agent", "train", "--algo", "td3bc", "--dataset", "d.hdf5", "--env",
        "maze2d-umaze", "--out", str(tmp_path / "o"), "--set", override,
    ])
    assert result.exit_code == 2 and "config" not in captured
    assert result.output.startswith(message) and result.output.count("\n") == 1
