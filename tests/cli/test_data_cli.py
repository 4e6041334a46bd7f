"""`privrl data collect` / `privrl data info` end to end on the tiny test config."""

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from privrl_jax import data, pipelines
from privrl_jax.cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "data"


def test_collect_with_test_config_then_info(tmp_path):
    out = tmp_path / "umaze.hdf5"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "data",
            "collect",
            "--config",
            str(CONFIGS / "test.yaml"),
            "--size",
            "1500",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    t = data.load_hdf5(out)
    assert len(t) == 1500  # the command-line size overrides the config's 2000
    meta = data.read_hdf5_metadata(out)
    assert (
        meta["env"] == "maze2d-umaze" and meta["size"] == 1500 and meta["num_envs"] == 4
    )
    assert np.asarray(t.timeouts).sum() > 0
    info = runner.invoke(app, ["data", "info", str(out)])
    assert info.exit_code == 0 and "transitions      1500" in info.output


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
    assert result.exit_code != 0
    assert "maze2d" in result.output
    assert not (tmp_path / "x.hdf5").exists()


def test_paper_configs_load():
    sizes = {}
    for name in ("umaze", "medium", "large"):
        cfg = pipelines.load_collect_config(CONFIGS / f"maze2d-{name}.yaml")
        sizes[name] = cfg.size
        assert cfg.env == f"maze2d-{name}" and cfg.action_noise == 0.5
    assert sizes == {"umaze": 1_000_000, "medium": 2_000_000, "large": 4_000_000}
