"""`privrl quickstart` and `privrl synth transitions` load the package's configs."""

from importlib import resources

import pytest
import yaml
from typer.testing import CliRunner

from privrl_jax.cli import synth
from privrl_jax.cli.main import app
from privrl_jax.pipelines import privorl_n, to_dict


def shipped_yaml(name: str) -> dict:
    configs = resources.files("privrl_jax").joinpath("configs")
    path = configs.joinpath("privorl_n", f"{name}.yaml")
    return yaml.safe_load(path.read_text())


def assert_has_values(resolved: dict, expected: dict, where: str = "") -> None:
    """Every value the YAML sets is the resolved config's value (lists == tuples)."""
    for key, value in expected.items():
        if isinstance(value, dict):
            assert_has_values(resolved[key], value, f"{where}{key}.")
        else:
            assert resolved[key] == value, f"{where}{key}"


@pytest.fixture
def captured(monkeypatch):
    """Stops each command at `privorl_n.run` and keeps the config it would run."""
    seen = {}

    def fake_run(cfg, out):
        seen["cfg"] = cfg
        return {}

    monkeypatch.setattr(privorl_n, "run", fake_run)
    monkeypatch.setattr(privorl_n, "render_markdown", lambda report: "")
    return seen


def test_quickstart_runs_the_shipped_config(tmp_path, captured, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no source tree around: the package's copy is used
    result = CliRunner().invoke(app, ["quickstart", "--set", "privacy.epsilon=2"])
    assert result.exit_code == 0, result.output
    expected = shipped_yaml("quickstart")
    resolved = to_dict(captured["cfg"])
    assert resolved["privacy"]["epsilon"] == 2.0
    expected["privacy"]["epsilon"] = 2.0
    assert_has_values(resolved, expected)
    assert resolved["data"]["sensitive_size"] == 100_000  # not the dataclass default


def test_missing_shipped_quickstart_is_an_error(tmp_path, captured, monkeypatch):
    monkeypatch.setattr(synth, "QUICKSTART_CONFIG", "privorl_n/removed")
    result = CliRunner().invoke(app, ["quickstart", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "cfg" not in captured
    assert result.output.startswith("error: no shipped config 'privorl_n/removed'")


@pytest.mark.parametrize("spec", ["test", "privorl_n/test", "privorl_n/test.yaml"])
def test_transitions_takes_a_shipped_name(tmp_path, captured, spec):
    args = ["synth", "transitions", "--config", spec, "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert_has_values(to_dict(captured["cfg"]), shipped_yaml("test"))


def test_transitions_takes_a_path_and_set(tmp_path, captured):
    path = tmp_path / "mine.yaml"
    path.write_text("seed: 3\nfinetune: {epochs: 2}\n")
    args = ["synth", "transitions", "--config", str(path), "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*args, "--set", "model.width=64"])
    assert result.exit_code == 0, result.output
    cfg = captured["cfg"]
    assert (cfg.seed, cfg.finetune.epochs, cfg.model.width) == (3, 2.0, 64)


def test_transitions_bad_set_is_a_one_line_error(tmp_path, captured):
    args = ["synth", "transitions", "--config", "test", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*args, "--set", "model.widht=64"])
    assert result.exit_code == 2 and "cfg" not in captured
    assert result.output.startswith("error: unknown config key(s) ['model.widht']")
    assert result.output.count("\n") == 1
