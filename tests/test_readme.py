"""The README's DP-SGD example runs and learns within its budget."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_dpsgd_example():
    code = re.search(
        r"## DP-SGD on a flax model\n\n```python\n(.*?)```", README.read_text(), re.S
    ).group(1)
    ns: dict = {}
    exec(compile(code.replace("print(", "eps = ("), "README", "exec"), ns)  # noqa: S102
    model, params, state, x, y = (
        ns["model"],
        ns["params"],
        ns["state"],
        ns["x"],
        ns["y"],
    )
    before = np.mean((np.asarray(model.apply(params, x[:2000]))[:, 0] - y[:2000]) ** 2)
    after = np.mean(
        (np.asarray(model.apply(state.params, x[:2000]))[:, 0] - y[:2000]) ** 2
    )
    assert after < 0.5 * before
    assert 2.9 <= ns["eps"] <= 3.0


def _readme_commands(subcommand: str) -> list[list[str]]:
    """The README CLI lines of `privrl SUBCOMMAND`, optional parts in, first choices."""
    text = README.read_text()
    block = re.search(r"## The CLI\n\n```bash\n(.*?)```", text, re.DOTALL).group(1)
    lines = []
    for line in block.splitlines():
        line = line.split("  #")[0]
        line = re.sub(r"\{(\w+),[^}]*\}", r"\1", line).replace("[", "").replace("]", "")
        words = shlex.split(line)
        if words[: 1 + len(subcommand.split())] == ["privrl", *subcommand.split()]:
            lines.append(words[1:])
    return lines


@pytest.fixture
def captured(monkeypatch):
    """Stops every job command at its pipeline call and keeps the config it got."""
    from privrl_jax import pipelines
    from privrl_jax.pipelines import privorl_n

    seen = {}

    def keep(result):
        def fake(cfg, out):
            seen["cfg"], seen["out"] = cfg, str(out)
            return result

        return fake

    monkeypatch.setattr(pipelines, "run_collect", keep("x.hdf5"))
    agent_result = {"final": {"return_mean": 0}}
    monkeypatch.setattr(pipelines, "run_agent_train", keep(agent_result))
    monkeypatch.setattr(privorl_n, "run", keep({}))
    monkeypatch.setattr(privorl_n, "render_markdown", lambda report: "")
    return seen


def test_readme_cli_commands_reach_their_pipelines(captured, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    monkeypatch.chdir(tmp_path)  # the shipped configs, not the source tree's
    results = {}
    for sub in ("data collect", "agent train", "synth transitions", "quickstart"):
        (args,) = _readme_commands(sub)
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, f"{args}: {result.output}"
        results[sub] = (captured["cfg"], captured["out"])
    collect, out = results["data collect"]
    assert (collect.env, collect.size, collect.seed, out) == (
        "maze2d-umaze-v1",
        200_000,
        0,
        "data/umaze.hdf5",
    )
    agent, out = results["agent train"]
    assert (agent.algo, agent.steps, agent.agent, out) == (
        "td3bc",
        100_000,
        {"alpha": 2.5},
        "runs/agent",
    )
    synth, out = results["synth transitions"]
    assert (synth.privacy.epsilon, synth.data.sensitive_size, out) == (
        1.0,
        100_000,
        "runs/x",
    )
    quick, out = results["quickstart"]
    assert (quick.privacy.epsilon, quick.eval.agent_seeds, out) == (
        10.0,
        1,
        "runs/quickstart",
    )
