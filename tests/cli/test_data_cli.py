"""`privrl data collect` / `privrl data info` end to end on the tiny test config."""

import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import data, pipelines
from privrl_jax.cli.main import app


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_collect_with_test_config_then_info(tmp_path):
    out = tmp_path / "umaze.hdf5"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "data",
            "collect",
            "--config",
            "test",  # the shipped privrl_jax/configs/data/test.yaml
            "--size",
            "1500",
            "--set",
            "num_envs=5",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    t = data.load_hdf5(out)
    assert len(t) == 1500  # the command-line size overrides the config's 2000
    meta = data.read_hdf5_metadata(out)
    assert meta["env"] == "maze2d-umaze-v1" and meta["size"] == 1500
    assert meta["num_envs"] == 5 and meta["chunk_steps"] == 250
    assert np.asarray(t.timeouts).sum() > 0
    info = runner.invoke(app, ["data", "info", str(out)])
    assert info.exit_code == 0 and "transitions      1500" in info.output


def test_config_file_options_and_set_resolve_in_that_order(tmp_path, monkeypatch):
    seen = {}

    def fake_run_collect(cfg, out):
        seen["cfg"] = cfg
        return str(out)

    monkeypatch.setattr(pipelines, "run_collect", fake_run_collect)
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("env: maze2d-medium\nsize: 100\nseed: 4\naction_noise: 0.3\n")
    args = ["data", "collect", "--config", str(cfg_file), "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(
        app, [*args, "--seed", "5", "--size", "7", "--set", "size=9"]
    )
    assert result.exit_code == 0, result.output
    assert seen["cfg"] == pipelines.CollectConfig(
        env="maze2d-medium", size=9, seed=5, action_noise=0.3
    )


def test_bad_options_are_rejected(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "data",
            "collect",
            "--env",
            "CartPole-v1",
            "--size",
            "10",
            "--out",
            str(tmp_path / "x.hdf5"),
        ],
    )
    assert result.exit_code == 2
    assert "maze2d" in result.output
    assert not (tmp_path / "x.hdf5").exists()


def test_bad_set_keys_and_values_get_one_line_errors(tmp_path):
    base = ["data", "collect", "--out", str(tmp_path / "x.hdf5"), "--set"]
    result = CliRunner().invoke(app, [*base, "sise=10"])
    assert result.exit_code == 2
    assert result.output.startswith("error: unknown config key(s) ['sise']; valid keys")
    assert result.output.count("\n") == 1
    result = CliRunner().invoke(app, [*base, "size=ten"])
    assert result.exit_code == 2
    assert result.output == "error: config key 'size' must be an integer; got 'ten'.\n"
    result = CliRunner().invoke(
        app, ["data", "collect", "--config", "nope", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "neither a YAML file nor a shipped" in result.output


def test_paper_configs_load():
    sizes = {}
    for name in ("umaze", "medium", "large"):
        cfg = pipelines.load_config(pipelines.CollectConfig, f"data/maze2d-{name}")
        sizes[name] = cfg.size
        assert cfg.env == f"maze2d-{name}-v1" and cfg.action_noise == 0.5
    assert sizes == {"umaze": 1_000_000, "medium": 2_000_000, "large": 4_000_000}
