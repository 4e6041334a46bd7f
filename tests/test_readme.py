"""The README's examples run and do what they say; the CLI lines of docs/cli.md reach
their pipelines."""

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
DP_LOOP_DOC = ROOT / "docs" / "dp_loop.md"


def _block(path: Path, heading: str, lang: str) -> str:
    """The first ``lang`` code block under ``## heading`` in ``path``."""
    pattern = rf"\n## {re.escape(heading)}\n.*?```{lang}\n(.*?)```"
    return re.search(pattern, path.read_text(), re.S).group(1)


def _run(code: str, name: str) -> dict:
    ns: dict = {}
    # The printed value becomes `shown`, so the test reads what a user would see.
    exec(compile(code.replace("print(", "shown = ("), name, "exec"), ns)  # noqa: S102
    return ns


def test_readme_is_short():
    text = README.read_text()
    assert len(text.splitlines()) <= 160
    # What the library is and how to install it come before any result or caveat.
    assert len(text[: text.index("## Install")].split()) <= 150
    # The test command that .ci/run runs, exactly.
    command = 'pip install -e ".[dev]" && python -m pytest'
    assert command in text
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    # .ci/run runs it as its own line (then the slow tests), keeping its exit status.
    assert any(ln == command or ln.startswith(command + " ||") for ln in ci_lines)


def test_readme_dpsgd_with_ghost_clipping_learns_within_its_budget():
    ns = _run(_block(README, "DP-SGD on your own flax model", "python"), "README")
    model, x, y = ns["model"], ns["x"], ns["y"]

    def mse(params):
        pred = np.asarray(model.apply(params, x[:2000]))[:, 0]
        return float(np.mean((pred - y[:2000]) ** 2))

    assert ns["method"].clipped.method == "ghost"
    assert mse(ns["result"].state.params) < 0.5 * mse(ns["params"])
    assert 2.9 <= ns["shown"] <= 3.0
    assert ns["result"].private  # an OS secret and sigma > 0


def test_readme_gpope_estimates_the_true_values():
    ns = _run(
        _block(README, "DP off-policy evaluation on your trajectories", "python"),
        "README",
    )
    # i.i.d. uniform states: E[V] = (1/5) / (1 - gamma) = 0.4,
    # V(s) = 1[s = 0] + gamma E[V].
    true = np.array([1.2, 0.2, 0.2, 0.2, 0.2])
    theta = np.asarray(ns["shown"])
    # Measured error 0.034 at this key and seed (epsilon = 1, m = 2000): 4x headroom.
    assert np.abs(theta - true).max() < 0.15
    assert 0.5 <= ns["plan"].noise_multiplier  # it was noised
    assert ns["plan"].epsilon(1e-5).epsilon <= 1.0


def _commands(path: Path, heading: str, subcommand: str) -> list[list[str]]:
    """The lines of ``privrl SUBCOMMAND`` in a bash block, optional parts in, first
    choices."""
    lines = []
    for line in _block(path, heading, "bash").splitlines():
        line = line.split("  #")[0]
        line = re.sub(r"\{(\w+),[^}]*\}", r"\1", line).replace("[", "").replace("]", "")
        words = shlex.split(line)
        if words[: 1 + len(subcommand.split())] == ["privrl", *subcommand.split()]:
            lines.append(words[1:])
    return lines


@pytest.fixture
def captured(monkeypatch):
    """Stops every job command at its pipeline call and keeps the config it got."""
    from privrl_jax import pipelines, privacy
    from privrl_jax.pipelines import privorl_n

    seen = {}

    def keep(result):
        def fake(cfg, out):
            seen["cfg"], seen["out"] = cfg, str(out)
            return result

        return fake

    def no_ledger(run_dir):
        seen["run_dir"] = str(run_dir)
        raise privacy.LedgerError(f"stub: no ledger in {run_dir}")

    monkeypatch.setattr(pipelines, "run_collect", keep("x.hdf5"))
    agent_result = {"final": {"return_mean": 0}}
    monkeypatch.setattr(pipelines, "run_agent_train", keep(agent_result))
    monkeypatch.setattr(privorl_n, "run", keep({}))
    monkeypatch.setattr(privorl_n, "render_markdown", lambda report: "")
    monkeypatch.setattr(pipelines, "verify_run", no_ledger)
    return seen


def test_readme_synthetic_data_commands_reach_their_pipelines(
    captured, tmp_path, monkeypatch
):
    # The real run takes minutes on 2 busy cores (tests/pipelines run the test config).
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    monkeypatch.chdir(tmp_path)  # the shipped configs, not the source tree's
    heading = "A DP synthetic offline-RL dataset from the command line"
    (synth,) = _commands(README, heading, "synth transitions")
    result = CliRunner().invoke(app, synth)
    assert result.exit_code == 0, result.output
    cfg, out = captured["cfg"], captured["out"]
    assert (cfg.data.sensitive_size, cfg.privacy.epsilon, out) == (
        600,
        10.0,
        "runs/privorl-test",
    )
    (report,) = _commands(README, heading, "privacy report")
    result = CliRunner().invoke(app, report)
    assert result.exit_code == 2 and "stub: no ledger" in result.output
    assert captured["run_dir"] == out  # the report reads the run just written


def test_doc_dpsgd_step_example():
    code = _block(DP_LOOP_DOC, "DP-SGD step by step", "python")
    ns = _run(code, "docs/dp_loop.md")
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
    assert 2.9 <= ns["shown"] <= 3.0


def test_doc_cli_commands_reach_their_pipelines(captured, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    monkeypatch.chdir(tmp_path)  # the shipped configs, not the source tree's
    results = {}
    for sub in ("data collect", "agent train", "synth transitions", "quickstart"):
        (args,) = _commands(CLI_DOC, "Commands", sub)
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
