"""`privrl agent train` end to end on a tiny maze dataset."""

import json

import jax
import pytest
from typer.testing import CliRunner

from privrl_jax import envs
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
        "--set", "hidden_dims=[16,16]",
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
    assert result.exit_code != 0
    assert "algo='sac'" in str(result.exception)
