"""The one config loader and `--set` grammar that every `privrl` command uses."""

import dataclasses
import typing

import pytest
import yaml

from privrl_jax import pipelines
from privrl_jax.envs._mujoco_eval import EVAL_BACKENDS
from privrl_jax.pipelines import AgentTrainConfig, CollectConfig, load_config
from privrl_jax.pipelines._config import merge_configs, shipped_configs
from privrl_jax.pipelines._sections import EvalBackend, PrivacyConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Inner:
    rate: float = 0.5
    dims: tuple[int, ...] = (1,)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Outer:
    name: str
    steps: int = 10
    inner: _Inner = _Inner()


def test_yaml_then_values_then_set(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: a\nsteps: 1\ninner: {rate: 0.1, dims: [2, 3]}\n")
    cfg = load_config(_Outer, path, ["inner.rate=1e-3"], values={"steps": 7})
    assert cfg == _Outer(name="a", steps=7, inner=_Inner(rate=1e-3, dims=(2, 3)))
    # --set is applied after the typed values: it wins.
    assert load_config(_Outer, path, ["steps=9"], values={"steps": 7}).steps == 9
    # YAML values: lists become tuples, a scalar for a tuple field becomes a 1-tuple.
    assert load_config(_Outer, path, ["inner.dims=[4,5,6]"]).inner.dims == (4, 5, 6)
    assert load_config(_Outer, path, ["inner.dims=8"]).inner.dims == (8,)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "stepz=1",
            "unknown config key(s) ['stepz']; valid keys here: ['inner', 'name'",
        ),
        (
            "inner.x=1",
            "unknown config key(s) ['inner.x']; valid keys here: ['inner.dims'",
        ),
        ("steps=ten", "config key 'steps' must be an integer; got 'ten'."),
        ("steps=2.5", "config key 'steps' must be an integer; got 2.5."),
        ("steps=1e400", "config key 'steps' must be an integer; got '1e400'."),
        ("steps=true", "config key 'steps' must be an integer; got True."),
        ("inner.rate=[1", "override 'inner.rate=[1': the value is not valid YAML"),
        ("inner=3", "config section 'inner' must be a mapping; got 3."),
        ("name.x=1", "override 'name.x=1': 'name' is not a config section."),
        ("steps.x=1", "config key 'steps' must be an integer; got {'x': 1}."),
        ("steps", "override 'steps' must look like section.key=value."),
        ("inner.=1", "override 'inner.=1' must look like section.key=value."),
    ],
)
def test_bad_overrides_give_one_line_errors(override, message):
    with pytest.raises(ValueError) as e:
        load_config(_Outer, None, ["name=a", override])
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("value", "steps"), [("1e3", 1000), ("1.0e3", 1000), ("2.0", 2), ("-1e2", -100)]
)
def test_an_integer_may_be_spelled_in_exponent_form(value, steps):
    # YAML 1.1 reads 1e3 as a string; a whole number is an integer however spelled,
    # so a size like 1e12 meets its section's range check, not a type error.
    assert load_config(_Outer, None, ["name=a", f"steps={value}"]).steps == steps


def test_missing_required_keys_are_named():
    with pytest.raises(ValueError, match=r"missing config key\(s\) \['name'\]"):
        load_config(_Outer)


def test_missing_and_malformed_config_files(tmp_path):
    with pytest.raises(ValueError, match="neither a YAML file nor a shipped config"):
        load_config(_Outer, tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML") as e:
        load_config(_Outer, bad)
    assert "\n" not in str(e.value)
    bad.write_text("- a list\n")
    with pytest.raises(ValueError, match="mapping at the top level"):
        load_config(_Outer, bad)


def test_shipped_configs_are_listed_and_load_by_name():
    names = shipped_configs()
    assert {"privorl_n/quickstart", "privorl_n/umaze", "data/maze2d-umaze"} <= set(
        names
    )
    text = pipelines.shipped_config("data/maze2d-large.yaml").read_text()
    assert yaml.safe_load(text)["size"] == 4_000_000
    cfg = load_config(CollectConfig, "data/maze2d-medium", ["seed=3"])
    assert (cfg.env, cfg.size, cfg.seed) == ("maze2d-medium-v1", 2_000_000, 3)
    with pytest.raises(ValueError, match=r"no shipped config 'privorl_n/nope'"):
        pipelines.shipped_config("privorl_n/nope")


def test_qualify_config_prefers_files_then_the_commands_group(tmp_path, monkeypatch):
    assert pipelines.qualify_config("quickstart", "privorl_n") == "privorl_n/quickstart"
    assert pipelines.qualify_config("maze2d-umaze.yaml", "data") == "data/maze2d-umaze"
    assert pipelines.qualify_config("data/test", "privorl_n") == "data/test"
    assert pipelines.qualify_config(None, "data") is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").write_text("seed: 1\n")  # a local file wins over a name
    assert pipelines.qualify_config("quickstart", "privorl_n") == "quickstart"


def test_agent_section_is_typed_and_checked_against_the_algorithm():
    base = {"algo": "td3bc", "dataset": "d.hdf5", "env": "maze2d-umaze"}
    cfg = load_config(
        AgentTrainConfig,
        None,
        ["agent.hidden_dims=[16, 16]", "agent.alpha=3"],
        values=base,
    )
    assert cfg.agent == {"hidden_dims": (16, 16), "alpha": 3.0}
    assert cfg.steps == 100_000 and cfg.batch_size == 256
    with pytest.raises(
        ValueError, match=r"unknown config key\(s\) \['agent.expectile'\]"
    ):
        load_config(AgentTrainConfig, None, ["agent.expectile=0.7"], values=base)
    with pytest.raises(ValueError, match=r"agent \(td3bc config\): actor_lr"):
        load_config(AgentTrainConfig, None, ["agent.actor_lr=-1"], values=base)


def _mode_fields(cls, prefix=""):
    """(dotted key, choices) of every Literal-typed field of a nested config class."""
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _mode_fields(tp, f"{prefix}{f.name}.")
        elif typing.get_origin(tp) is typing.Literal:
            yield prefix + f.name, typing.get_args(tp)


def _pipeline_configs():
    from privrl_jax.pipelines import (
        gpope,
        marginal,
        pategan,
        pool,
        privorl_j,
        privorl_n,
    )

    return {
        "privorl_n": (privorl_n.PrivORLNConfig, privorl_n.load),
        "privorl_j": (privorl_j.PrivORLJConfig, privorl_j.load),
        "marginal": (marginal.MarginalConfig, marginal.load),
        "pategan": (pategan.PateGanPipelineConfig, pategan.load),
        "gpope": (gpope.GPOPERunConfig, gpope.load),
        "pool": (pool.PoolRunConfig, pool.load),
    }


def test_every_mode_is_a_literal_checked_by_the_loader_and_in_python():
    """Issue 22: modes are Literal types with one error. Every Literal field of every
    pipeline config refuses a value outside its choices with the same one-line message,
    whether it comes through ``--set`` or is built in Python (where a bad mode would
    otherwise fall to an ``else`` branch and run something else)."""
    expected_modes = {
        "privorl_n": {"privacy.accountant", "finetune.clip_method", "eval.backend"},
        "privorl_j": {
            "privacy.accountant",
            "finetune.clip_method",
            "eval.backend",
            "model.kind",
        },
        "marginal": {"privacy.accountant", "eval.backend", "model.name"},
        "pategan": {"privacy.accountant", "eval.backend", "model.name"},
        "gpope": {
            "privacy.accountant",
            "env.name",
            "gpope.sampler",
            "gpope.normalization",
        },
        "pool": {"env.demand", "pool.method", "pool.zones"},
    }
    for name, (cls, load) in _pipeline_configs().items():
        modes = dict(_mode_fields(cls))
        assert expected_modes[name] <= set(modes), name
        for key, choices in modes.items():
            listed = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
            message = f"{key} must be {listed}; got 'bogus'."
            with pytest.raises(ValueError) as loaded:
                load(None, [f"{key}=bogus"])
            assert str(loaded.value) == message
            section, field = key.rsplit(".", 1)
            default = cls()
            sub = getattr(default, section)
            built = dataclasses.replace(sub, **{field: "bogus"})
            with pytest.raises(ValueError) as in_python:
                dataclasses.replace(default, **{section: built})
            assert str(in_python.value) == message


def test_merge_configs_merges_sections_and_replaces_everything_else():
    base = {"a": 1, "s": {"x": 1, "lst": [1, 2], "t": {"u": 1}}, "m": {"k": 1}}
    top = {"s": {"lst": [3], "t": {"v": 2}}, "m": 5, "n": {"z": 0}}
    merged = merge_configs(base, top)
    assert merged == {
        "a": 1,
        "s": {"x": 1, "lst": [3], "t": {"u": 1, "v": 2}},
        "m": 5,  # a non-mapping replaces a section (the loader then reports it)
        "n": {"z": 0},
    }
    assert base["s"]["t"] == {"u": 1}  # the inputs are not modified


def test_a_methods_defaults_lie_under_every_config_of_it(tmp_path):
    """Issue 22: per-method defaults live in the shipped ``<group>/defaults.yaml``,
    not in subclasses; a config states only what it changes, and wins."""
    from privrl_jax.pipelines import gpope, privorl_j, privorl_n

    # privorl_j/test.yaml names no sensitive env: it gets PrivORL-j's sparse -v1 maze
    # from privorl_j/defaults.yaml, not the shared section's dense default that
    # PrivORL-n uses.
    assert privorl_j.load("privorl_j/test").data.sensitive_env == "maze2d-umaze-v1"
    assert privorl_n.load("privorl_n/test").data.sensitive_env == (
        "maze2d-umaze-dense-v1"
    )
    assert privorl_j.load(None) == privorl_j.load("privorl_j/defaults")
    assert privorl_j.load(None).pretrain.steps == 2_000  # defaults.yaml
    assert privorl_j.load(None).pretrain.learning_rate == 3e-4  # the shared default
    path = tmp_path / "c.yaml"
    path.write_text("pretrain: {steps: 750}\n")
    cfg = privorl_j.load(path)
    assert cfg.pretrain.steps == 750
    assert cfg.pretrain.batch_size == 64  # the other defaults.yaml keys stay
    assert gpope.load(None).privacy.epsilon == 1.0
    assert gpope.load(None, ["privacy.epsilon=2"]).privacy.epsilon == 2.0


def _section_classes(cls, seen=None):
    seen = set() if seen is None else seen
    for f in dataclasses.fields(cls):
        tp = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(tp) and tp not in seen:
            seen.add(tp)
            _section_classes(tp, seen)
    return seen


def test_no_config_section_subclass_only_changes_defaults():
    """Issue 22: a section shared by several methods is declared once. A pipeline may
    derive from it only to add fields of its own, and must keep the shared fields'
    defaults (its own defaults go to its ``defaults.yaml``)."""
    checked = 0
    for name, (cls, _) in _pipeline_configs().items():
        for section in _section_classes(cls):
            for base in section.__mro__[1:]:
                if not dataclasses.is_dataclass(base):
                    continue
                checked += 1
                own = {f.name for f in dataclasses.fields(section)}
                inherited = {f.name: f for f in dataclasses.fields(base)}
                assert own > set(inherited), (name, section, base)
                for f in dataclasses.fields(section):
                    if f.name in inherited:
                        assert f.default == inherited[f.name].default, (
                            name,
                            section.__qualname__,
                            f.name,
                        )
    assert checked >= 5  # data x 2, pretrain, finetune, eval x 2: the test sees them


def test_the_epsilon_budget_section_is_one_class():
    from privrl_jax.pipelines import gpope, marginal, pategan, privorl_j, privorl_n

    classes = {
        typing.get_type_hints(m)["privacy"]
        for m in (
            privorl_n.PrivORLNConfig,
            privorl_j.PrivORLJConfig,
            marginal.MarginalConfig,
            pategan.PateGanPipelineConfig,
            gpope.GPOPERunConfig,
        )
    }
    assert classes == {PrivacyConfig}
    with pytest.raises(ValueError) as e:
        gpope.load("gpope/test", ["privacy.dataset_size=100"])
    assert str(e.value) == (
        "privacy.dataset_size: GPOPE's number of privacy units is "
        "env.num_trajectories (public); leave privacy.dataset_size empty."
    )


def test_agent_training_modes_are_literals_equal_to_the_library():
    """``privrl agent train``'s ``algo`` and ``eval_backend`` are Literal modes like
    every pipeline's, and ``algo``'s choices are the library's agents."""
    from privrl_jax import agents
    from privrl_jax.pipelines import _agent_config

    assert set(typing.get_args(_agent_config.Algo)) == set(agents.ALGORITHMS)
    assert set(typing.get_args(EvalBackend)) == set(EVAL_BACKENDS)
    base = {"dataset": "x.hdf5", "env": "maze2d-umaze-v1"}
    for key, message in (
        ("algo", "algo must be 'td3bc', 'iql' or 'edac'; got 'bogus'."),
        ("eval_backend", "eval_backend must be 'jax' or 'mujoco'; got 'bogus'."),
    ):
        values = {"algo": "iql", **base, key: "bogus"}
        with pytest.raises(ValueError) as e:
            load_config(AgentTrainConfig, None, values=values)
        assert str(e.value) == message
