"""Help texts: the defaults they show are the configs' defaults; flags are flags."""

import dataclasses
import re

import pytest
import typer
from typer.testing import CliRunner

from privrl_jax import pipelines
from privrl_jax.cli.main import app

# command -> (config class, option name -> config field)
COMMANDS = {
    ("data", "collect"): (pipelines.CollectConfig, {}),
    ("agent", "train"): (pipelines.AgentTrainConfig, {"chunk": "chunk_size"}),
}


def _command(group: str, name: str):
    return typer.main.get_command(app).commands[group].commands[name]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_shown_defaults_are_the_config_defaults(command):
    cls, renamed = COMMANDS[command]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    shown = 0
    for param in _command(*command).params:
        m = re.search(r"\[default: (.*)\]$", param.help or "")
        field = renamed.get(param.name, param.name)
        if field not in defaults or defaults[field] is dataclasses.MISSING:
            continue
        assert m, f"{param.name}: no default in its help"
        if defaults[field] is None:
            continue  # a computed default, described in words
        assert m.group(1) == str(defaults[field]), param.name
        shown += 1
    assert shown >= 5


@pytest.mark.parametrize(
    "command",
    [
        *COMMANDS,
        ("data", "info"),
        ("privacy", "epsilon"),
        ("privacy", "calibrate"),
        ("privacy", "report"),
    ],
)
def test_json_is_a_flag_and_shown_as_one(command):
    (param,) = [p for p in _command(*command).params if p.name == "as_json"]
    assert param.is_flag and param.opts == ["--json"] and not param.secondary_opts
    text = CliRunner().invoke(app, [*command, "--help"]).output
    line = next(x for x in text.splitlines() if "--json" in x)
    assert "<bool>" not in line


def test_help_rendering_keeps_the_defaults():
    text = CliRunner().invoke(app, ["data", "collect", "--help"]).output
    assert "[default: maze2d-umaze-v1]" in text and "--config test" in text


def test_the_install_hint_survives_rich_markup():
    # Help is rendered as rich markup, where an unescaped [mujoco] is a tag and
    # disappears.
    res = CliRunner().invoke(app, ["agent", "train", "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    assert 'pip install -e ".[mujoco]"' in " ".join(res.output.split())


@pytest.mark.parametrize(
    "command, load",
    [
        (("pool", "run"), "pool"),
        (("ope", "run"), "gpope"),
        (("synth", "transitions"), "privorl_n"),
        (("synth", "trajectories"), "privorl_j"),
        (("data", "collect"), "collect"),
    ],
)
def test_set_help_examples_are_keys_the_command_accepts(command, load):
    from privrl_jax.pipelines import gpope, pool, privorl_j, privorl_n

    (param,) = [p for p in _command(*command).params if p.name == "overrides"]
    examples = re.search(r"\(e\.g\. (.*)\)\.", param.help).group(1).split(", ")
    loaders = {
        "pool": pool.load,
        "gpope": gpope.load,
        "privorl_n": privorl_n.load,
        "privorl_j": privorl_j.load,
        "collect": lambda _, o: pipelines.load_config(pipelines.CollectConfig, None, o),
    }
    loaders[load](None, examples)  # raises ValueError on a key the config does not have


def test_synth_transitions_help_lists_every_model():
    """Every --model value the command accepts is named in the option's help (aim was
    not; the command's docstring named it, so the option's own text is read)."""
    from privrl_jax.pipelines import marginal, pategan  # noqa: PLC0415

    (option,) = [
        p for p in _command("synth", "transitions").params if p.name == "model"
    ]
    for name in ("privorl_n", *marginal.MODELS, *pategan.MODELS):
        assert re.search(rf"\b{name}\b", option.help), name
