"""`privrl agent train` end to end on a tiny maze dataset."""

import json
import os

import h5py
import jax
import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from privrl_jax import agents, envs, pipelines
from privrl_jax.cli.main import app
from privrl_jax.data import Transitions, save_hdf5
from privrl_jax.envs._mujoco_eval import MujocoExtraMissing, mujoco_available
from privrl_jax.envs._reference import D4RL_REFERENCE_RETURNS, reference_returns
from privrl_jax.pipelines._rundir import RunLock


@pytest.mark.slow  # ~1 min of compilation on 2 cores (4 min under load 13)
def test_agent_train_writes_result_json_and_learning_curve(tmp_path):
    data = envs.collect_dataset(
        jax.random.key(0), "maze2d-umaze", 500, num_envs=10, chunk_steps=50
    )
    path = tmp_path / "umaze.hdf5"
    save_hdf5(path, data)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "td3bc",
            "--dataset",
            str(path),
            "--env",
            "maze2d-umaze",
            "--steps",
            "20",
            "--chunk",
            "10",
            "--seed",
            "3",
            "--eval-episodes",
            "2",
            "--batch-size",
            "16",
            "--out",
            str(out),
            "--set",
            "agent.hidden_dims=[16,16]",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "result.json").read_text())
    assert payload["config"]["seed"] == 3 and payload["agent_config"][
        "hidden_dims"
    ] == [16, 16]
    assert [c["step"] for c in payload["curve"]] == [10, 20]
    final = payload["final"]
    r_random, r_expert = reference_returns("maze2d-umaze")
    assert (
        abs(
            final["score_mean"]
            - 100 * (final["return_mean"] - r_random) / (r_expert - r_random)
        )
        < 1e-3
    )
    assert payload["dataset_size"] == 500
    assert (out / "learning_curve.png").stat().st_size > 1000


def test_agent_train_rejects_unknown_algo(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "sac",
            "--dataset",
            str(tmp_path / "x.hdf5"),
            "--env",
            "maze2d-umaze",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 2
    assert result.output.startswith(
        "error: algo must be 'td3bc', 'iql' or 'edac'; got 'sac'."
    )


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
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--config",
            str(cfg_file),
            "--out",
            str(tmp_path / "o"),
            "--seed",
            "4",
            "--chunk",
            "500",
            "--set",
            "agent.expectile=0.8",
            "--set",
            "eval_every=1000",
        ],
    )
    assert result.exit_code == 0, result.output
    assert captured["config"] == pipelines.AgentTrainConfig(
        algo="iql",
        dataset="d.hdf5",
        env="maze2d-umaze",
        steps=2000,
        seed=4,
        chunk_size=500,
        eval_every=1000,
        agent={"expectile": 0.8, "hidden_dims": (32, 32)},
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "alpha=2.5",
            "error: unknown config key(s) ['alpha']; valid keys here: ['agent',",
        ),
        ("agent.alpha=x", "error: config key 'agent.alpha' must be a number; got 'x'."),
        ("agent.expectile=0.7", "error: unknown config key(s) ['agent.expectile']"),
        ("steps=1.5", "error: config key 'steps' must be an integer; got 1.5."),
    ],
)
def test_agent_train_bad_set_is_one_line_error(tmp_path, captured, override, message):
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "td3bc",
            "--dataset",
            "d.hdf5",
            "--env",
            "maze2d-umaze",
            "--out",
            str(tmp_path / "o"),
            "--set",
            override,
        ],
    )
    assert result.exit_code == 2 and "config" not in captured
    assert result.output.startswith(message) and result.output.count("\n") == 1


# --- validate, then write -------------------------------------------------------------


def _dataset(path, n=64, obs_dim=4, act_dim=2):
    rng = np.random.default_rng(0)
    z = np.zeros(n, np.float32)
    save_hdf5(
        path,
        Transitions(
            observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
            actions=rng.uniform(-1, 1, size=(n, act_dim)).astype(np.float32),
            rewards=z,
            next_observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
            terminals=z,
            timeouts=z,
        ),
    )
    return path


@pytest.fixture
def trained(monkeypatch):
    """`agents.train` replaced by a fast fake that records that it ran."""
    calls = []

    def fake_train(agent, dataset, *, num_updates, chunk_size, **kwargs):
        calls.append(num_updates)
        steps = np.arange(chunk_size, num_updates + 1, chunk_size)
        metrics = {
            "step": steps,
            "seconds": 0.1 * steps,
            "critic_loss": np.ones(len(steps)),
        }
        evals = [{"step": int(s), "return_mean": 1.0} for s in steps]
        return agents.TrainResult(state=None, metrics=metrics, evals=evals)

    monkeypatch.setattr(agents, "train", fake_train)
    return calls


def train(tmp_path, *extra, dataset=None, out=None):
    dataset = dataset or _dataset(tmp_path / "d.hdf5")
    out = out or tmp_path / "run"
    return CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "td3bc",
            "--dataset",
            str(dataset),
            "--env",
            "maze2d-umaze",
            "--steps",
            "20",
            "--chunk",
            "10",
            "--batch-size",
            "16",
            "--out",
            str(out),
            *extra,
        ],
    )


def assert_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, (
        result.stderr
    )
    assert "Traceback" not in result.output
    for f in fragments:
        assert f in result.stderr, (f, result.stderr)


def test_writes_config_result_and_curve_with_one_mode(tmp_path, trained):
    old = os.umask(0o027)
    try:
        result = train(tmp_path, "--json")
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["final"]["return_mean"] == 1.0
    out = tmp_path / "run"
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "config.yaml",
        "learning_curve.png",
        "result.json",
    ]
    modes = {
        p.name: p.stat().st_mode & 0o777 for p in out.iterdir() if p.name != ".lock"
    }
    assert set(modes.values()) == {0o640}, modes
    assert yaml.safe_load((out / "config.yaml").read_text())["steps"] == 20


def test_dataset_of_another_env_is_refused_before_training(tmp_path, trained):
    bad = _dataset(tmp_path / "six.hdf5", obs_dim=6)
    assert_error(
        train(tmp_path, dataset=bad),
        "observations of dimension 6",
        "'maze2d-umaze' has 4",
        "--env",
    )
    bad = _dataset(tmp_path / "act3.hdf5", act_dim=3)
    assert_error(train(tmp_path, dataset=bad), "actions of dimension 3")
    assert not trained and not (tmp_path / "run").exists()


def test_discrete_env_is_refused(tmp_path, trained):
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "iql",
            "--dataset",
            str(_dataset(tmp_path / "d.hdf5")),
            "--env",
            "CartPole-v1",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert_error(result, "discrete action space")
    assert not trained and not (tmp_path / "run").exists()


def test_batch_larger_than_dataset_is_an_error(tmp_path, trained):
    assert_error(
        train(tmp_path, "--batch-size", "65"),
        "batch_size=65 is larger than the dataset",
        "--batch-size 64",
    )
    assert not trained and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("setup", "fragments"),
    [
        ("missing", ["no dataset file", "check the path"]),
        ("text", ["not a readable HDF5 file"]),
        ("keys", ["missing key(s) ['timeouts']"]),
    ],
)
def test_bad_dataset_file_is_refused(tmp_path, trained, setup, fragments):
    path = tmp_path / "d.hdf5"
    if setup == "text":
        path.write_text("observations,actions\n")
    elif setup == "keys":
        with h5py.File(path, "w") as f:
            for k in ("observations", "actions", "rewards", "terminals"):
                f.create_dataset(k, data=np.zeros((4, 2)))
    assert_error(train(tmp_path, dataset=path), *fragments)
    assert not trained and not (tmp_path / "run").exists()


def test_finished_run_is_kept_without_overwrite(tmp_path, trained):
    assert train(tmp_path).exit_code == 0
    out = tmp_path / "run"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_error(
        train(tmp_path, "--steps", "30"),
        "holds a finished agent train run",
        "--overwrite",
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert len(trained) == 1
    result = train(tmp_path, "--steps", "30", "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "result.json").read_text())["config"]["steps"] == 30


def test_overwrite_removes_the_old_results_before_training(
    tmp_path, trained, monkeypatch
):
    assert train(tmp_path).exit_code == 0
    out = tmp_path / "run"

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the replacing run dies mid-training

    monkeypatch.setattr(agents, "train", crash)
    result = train(tmp_path, "--steps", "30", "--overwrite")
    assert result.exit_code == 130  # Aborted, as on Ctrl-C
    assert sorted(os.listdir(out)) == [".lock", "config.yaml"]
    assert yaml.safe_load((out / "config.yaml").read_text())["steps"] == 30


def test_someone_elses_directory_is_refused(tmp_path, trained):
    out = tmp_path / "run"
    out.mkdir()
    (out / "ledger.json").write_text("{}")
    assert_error(train(tmp_path, out=out), "did not write (ledger.json)")
    assert_error(train(tmp_path, "--overwrite", out=out), "did not write")
    assert os.listdir(out) == ["ledger.json"] and not trained
    (tmp_path / "afile").write_text("x")
    assert_error(train(tmp_path, out=tmp_path / "afile"), "is a file")


def test_read_only_out_is_refused_before_training(tmp_path, trained, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: stand in for a read-only mount
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and str(p) != str(ro))
    else:
        ro.chmod(0o555)
    result = train(tmp_path, out=ro / "run")
    ro.chmod(0o755)
    assert_error(result, "not writable")
    assert not trained and os.listdir(ro) == []


def test_a_second_run_into_a_live_runs_directory_fails_at_once(tmp_path, trained):
    out = tmp_path / "run"
    with RunLock(out):  # a live run holds the directory
        assert_error(train(tmp_path), "another run is using")
    # The live run wrote nothing, so its lock leaves nothing behind either.
    assert not trained and not out.exists()


def test_stale_temp_files_are_cleaned_at_start(tmp_path, trained):
    out = tmp_path / "run"
    out.mkdir()
    for name in (".result.json.x1.txt.tmp", ".learning_curve.png.x2.tmp"):
        (out / name).write_bytes(b"")
    assert train(tmp_path).exit_code == 0
    assert sorted(os.listdir(out)) == [
        ".lock",
        "config.yaml",
        "learning_curve.png",
        "result.json",
    ]


def test_steps_and_chunk_follow_their_help(tmp_path, captured):
    base = [
        "agent",
        "train",
        "--algo",
        "td3bc",
        "--dataset",
        "d.hdf5",
        "--env",
        "maze2d-umaze",
        "--out",
        str(tmp_path / "o"),
    ]
    # Fewer steps than --chunk: one chunk of --steps updates.
    result = CliRunner().invoke(app, [*base, "--steps", "20", "--chunk", "1000"])
    assert result.exit_code == 0 and captured["config"].resolved_chunk() == 20
    result = CliRunner().invoke(app, [*base, "--steps", "1500", "--chunk", "1000"])
    assert result.exit_code == 2
    assert "give --steps as a multiple of --chunk (e.g. 1000)" in result.stderr
    result = CliRunner().invoke(
        app, [*base, "--steps", "2000", "--chunk", "1000", "--eval-every", "1500"]
    )
    assert result.exit_code == 2 and "--eval-every as a multiple of --chunk" in (
        result.stderr
    )


# --- --eval-backend -------------------------------------------------------------------


def v1_train(tmp_path, *extra):
    return CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "td3bc",
            "--dataset",
            str(_dataset(tmp_path / "d.hdf5")),
            "--env",
            "maze2d-umaze-v1",
            "--steps",
            "20",
            "--chunk",
            "10",
            "--batch-size",
            "16",
            "--out",
            str(tmp_path / "run"),
            *extra,
        ],
    )


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (
            ["--eval-backend", "gpu"],
            "eval_backend must be 'jax' or 'mujoco'; got 'gpu'.",
        ),
        (
            ["--set", "eval_backend=gpu"],
            "eval_backend must be 'jax' or 'mujoco'; got 'gpu'.",
        ),
        (["--eval-backend", "mujoco"], "not env 'maze2d-umaze'; choose one of those"),
    ],
)
def test_bad_eval_backend_is_a_one_line_error(tmp_path, trained, extra, fragment):
    assert_error(train(tmp_path, *extra), fragment)  # env maze2d-umaze: legacy
    assert not trained and not (tmp_path / "run").exists()


def test_eval_backend_option_and_set_reach_the_config(tmp_path, captured):
    base = [
        "agent",
        "train",
        "--algo",
        "td3bc",
        "--dataset",
        "d.hdf5",
        "--env",
        "maze2d-umaze-v1",
        "--out",
        str(tmp_path / "o"),
    ]
    assert CliRunner().invoke(app, base).exit_code == 0
    assert captured["config"].eval_backend == "jax"
    for extra in (["--eval-backend", "mujoco"], ["--set", "eval_backend=mujoco"]):
        assert CliRunner().invoke(app, [*base, *extra]).exit_code == 0
        assert captured["config"].eval_backend == "mujoco"


def test_mujoco_backend_without_the_extra_is_refused_before_training(
    tmp_path, trained, monkeypatch
):
    def missing():
        raise MujocoExtraMissing(
            'the MuJoCo evaluation backend needs mujoco: pip install -e ".[mujoco]"'
        )

    monkeypatch.setattr(envs, "require_mujoco", missing)
    assert_error(
        v1_train(tmp_path, "--eval-backend", "mujoco"), 'pip install -e ".[mujoco]"'
    )
    assert not trained and not (tmp_path / "run").exists()


@pytest.mark.slow  # ~9 s: the agent's init and act compile, the plot
def test_mujoco_backend_scores_the_agent_in_mujoco(tmp_path, monkeypatch):
    pytest.importorskip(
        "mujoco", reason='the mujoco extra is not installed: pip install -e ".[mujoco]"'
    )
    seen = []

    def fake_train(agent, dataset, *, key, num_updates, chunk_size, eval_fn, **kwargs):
        # No updates (fast): evaluate the initial policy once, as train would.
        state = agent.init(key, dataset)
        evals = [{"step": num_updates, **eval_fn(state, key)}]
        seen.append(evals[0])
        steps = np.array([num_updates])
        metrics = {"step": steps, "seconds": np.ones(1), "critic_loss": np.ones(1)}
        return agents.TrainResult(state=state, metrics=metrics, evals=evals)

    monkeypatch.setattr(agents, "train", fake_train)
    result = v1_train(
        tmp_path,
        "--eval-backend",
        "mujoco",
        "--eval-episodes",
        "2",
        "--set",
        "agent.hidden_dims=[8,8]",
        "--json",
    )
    assert result.exit_code == 0, result.output
    # gymnasium-robotics' import notice goes to stderr: stdout stays one JSON object.
    assert json.loads(result.stdout)["final"]["return_mean"] == seen[0]["return_mean"]
    (final,) = seen
    assert {"return_mean", "return_std", "score_mean", "score_std"} <= set(final)
    lo, hi = D4RL_REFERENCE_RETURNS["maze2d-umaze-v1"]
    assert final["score_mean"] == pytest.approx(
        100 * (final["return_mean"] - lo) / (hi - lo), rel=1e-5
    )


# --- MuJoCo-only tasks (locomotion, kitchen) ------------------------------------------


def hopper_train(tmp_path, *extra, obs_dim=11, act_dim=3):
    return CliRunner().invoke(
        app,
        [
            "agent",
            "train",
            "--algo",
            "iql",
            "--dataset",
            str(_dataset(tmp_path / "d.hdf5", obs_dim=obs_dim, act_dim=act_dim)),
            "--env",
            "hopper-medium-v2",
            "--steps",
            "20",
            "--chunk",
            "10",
            "--batch-size",
            "16",
            "--out",
            str(tmp_path / "run"),
            *extra,
        ],
    )


def test_mujoco_only_task_needs_the_mujoco_backend(tmp_path, trained):
    assert_error(
        hopper_train(tmp_path),
        "env 'hopper-medium-v2' runs only in MuJoCo",
        "eval_backend='mujoco'",
    )
    assert_error(
        hopper_train(
            tmp_path, "--eval-backend", "mujoco", "--env", "hopper-mediumish-v2"
        ),
        "unknown MuJoCo task",
    )
    assert not trained and not (tmp_path / "run").exists()


def test_dataset_of_another_layout_is_refused_for_a_mujoco_task(tmp_path, trained):
    # The dataset is checked before the extra: it is wrong whether or not mujoco is
    # installed.
    assert_error(
        hopper_train(tmp_path, "--eval-backend", "mujoco", obs_dim=4),
        "observations of dimension 4",
        "'hopper-medium-v2' has 11",
    )
    assert not trained and not (tmp_path / "run").exists()


def test_mujoco_backend_without_the_extra_names_the_install(tmp_path, trained):

    if mujoco_available():
        pytest.skip(
            "the mujoco extra is installed: the missing-extra error cannot happen"
        )
    assert_error(
        hopper_train(tmp_path, "--eval-backend", "mujoco"),
        "the MuJoCo evaluation backend needs",
        'pip install -e ".[mujoco]"',
    )
    assert not trained and not (tmp_path / "run").exists()


@pytest.mark.slow  # ~6 s: the agent's init and act compile, the plot
def test_mujoco_task_scores_the_agent_with_d4rl_references(tmp_path, monkeypatch):
    pytest.importorskip(
        "mujoco", reason='the mujoco extra is not installed: pip install -e ".[mujoco]"'
    )
    seen = []

    def fake_train(agent, dataset, *, key, num_updates, chunk_size, eval_fn, **kwargs):
        state = agent.init(key, dataset)
        evals = [{"step": num_updates, **eval_fn(state, key)}]
        seen.append(evals[0])
        metrics = {
            "step": np.array([num_updates]),
            "seconds": np.ones(1),
            "critic_loss": np.ones(1),
        }
        return agents.TrainResult(state=state, metrics=metrics, evals=evals)

    monkeypatch.setattr(agents, "train", fake_train)
    result = hopper_train(
        tmp_path,
        "--eval-backend",
        "mujoco",
        "--eval-episodes",
        "2",
        "--set",
        "agent.hidden_dims=[8,8]",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (final,) = seen
    assert json.loads(result.stdout)["final"]["return_mean"] == final["return_mean"]
    # D4RL's hopper references (d4rl/infos.py), typed in by hand.
    assert final["score_mean"] == pytest.approx(
        100 * (final["return_mean"] + 20.272305) / (3234.3 + 20.272305), rel=1e-9
    )


def test_a_dataset_collected_in_another_maze_is_refused(tmp_path, trained):
    # umaze and large have the same widths: only the env the file records can tell them
    # apart.
    path = tmp_path / "large.hdf5"
    z = np.zeros(64, np.float32)
    rng = np.random.default_rng(0)
    save_hdf5(
        path,
        Transitions(
            observations=rng.normal(size=(64, 4)).astype(np.float32),
            actions=rng.uniform(-1, 1, size=(64, 2)).astype(np.float32),
            rewards=z,
            next_observations=rng.normal(size=(64, 4)).astype(np.float32),
            terminals=z,
            timeouts=z,
        ),
        metadata={"env": "maze2d-large-v1"},
    )
    assert_error(
        train(tmp_path, dataset=path),
        "was collected in 'maze2d-large-v1', not 'maze2d-umaze'",
        "--env maze2d-large-v1",
    )
    assert not trained and not (tmp_path / "run").exists()
