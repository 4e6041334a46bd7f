"""Bad configs that would release or spend are refused before anything happens (issue
47, item 2): exit status 2, one line that names the key, the value and what is allowed,
and no run directory (so no ledger, no lock, no noise). Every case here ran, spent or
crashed before the sections were range-checked."""

import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import data
from privrl_jax.cli.main import app
from privrl_jax.pipelines import _config, marginal, pategan, pool, privorl_n
from privrl_jax.pipelines._pategan_config import check_teachers

# (command, --set overrides, the whole error line)
BAD = [
    pytest.param(
        "synth transitions --config test",
        ["pretrain.steps=-20"],
        "pretrain.steps must be an integer in [0, 10,000,000]; got -20.",
        id="pretrain.steps<0",
    ),
    pytest.param(
        "synth transitions --config test",
        ["synthesis.ema_decay=1.5"],
        "synthesis.ema_decay must be a number in [0, 1); got 1.5.",
        id="privorl_n.ema_decay>1",
    ),
    pytest.param(
        "synth trajectories --config test",
        ["synthesis.ema_decay=1.5"],
        "synthesis.ema_decay must be a number in [0, 1); got 1.5.",
        id="privorl_j.ema_decay>1",
    ),
    pytest.param(
        "synth transitions --model pategan --config test",
        ["model.num_teachers=10000"],
        "model.num_teachers=10000 splits the 600 sensitive transitions into ~0.06 rows "
        "a teacher (teachers without data); use at most 60 teachers (10 rows each on "
        "average).",
        id="pategan.teachers>rows",
    ),
    pytest.param(
        "pool run --config test",
        ["env.num_episodes=1e12"],
        "env.num_episodes must be an integer in [2, 100,000,000]; got 1000000000000.",
        id="pool.num_episodes=1e12",
    ),
    pytest.param(
        "pool run --config test",
        ["env.num_episodes=10000000", "env.horizon=20"],
        "env.num_episodes x env.horizon x env.num_products = 2e+08 steps, more than "
        "100,000,000 (the episodes are held in memory); lower them.",
        id="pool.episodes*horizon",
    ),
    pytest.param(
        "ope run --config test",
        ["gpope.steps=1e12"],
        "gpope.steps must be an integer in [1, 10,000,000]; got 1000000000000.",
        id="gpope.steps=1e12",
    ),
    pytest.param(
        "synth transitions --config test",
        ["data.sensitive_size=1e12"],
        "data.sensitive_size must be an integer in [1, 100,000,000]; got "
        "1000000000000.",
        id="sensitive_size=1e12",
    ),
    pytest.param(
        "synth transitions --config test",
        ["finetune.epochs=1e5", "data.sensitive_size=1e6"],
        "finetune.epochs x data.sensitive_size / finetune.batch_size = 3.12e+09 DP "
        "steps, more than 10,000,000; lower finetune.epochs or raise "
        "finetune.batch_size.",
        id="privorl_n.dp_steps",
    ),
    pytest.param(
        "pool run --config test",
        ["audit.canaries=1e12"],
        "audit.canaries must be an integer in [0, 10,000,000]; got 1000000000000.",
        id="audit.canaries=1e12",
    ),
    pytest.param(
        "synth transitions --config test",
        ["model.width=0"],
        "model.width must be an integer in [1, 65,536]; got 0.",
        id="model.width=0",
    ),
    pytest.param(
        "synth transitions --model mst --config test",
        ["model.mst_split=[0.5, 0.3, 0.1]"],
        "model.mst_split must be three shares of rho that sum to 1; got [0.5, 0.3, "
        "0.1] (sum 0.9).",
        id="mst_split!=1",
    ),
    pytest.param(
        "synth transitions --model mst --config test",
        ["model.mst_split=[1.2, -0.1, -0.1]"],
        "model.mst_split must be a number in (0, 1] each; got (1.2, -0.1, -0.1).",
        id="mst_split<0",
    ),
]


def _refused(args: list[str], out) -> str:
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.count("\n") == 1, result.stderr  # one line, no traceback
    assert not out.exists()  # no run directory: no ledger, no .lock, no noise
    return result.stderr.removeprefix("error: ").rstrip("\n")


@pytest.mark.parametrize("command, overrides, message", BAD)
def test_bad_config_is_refused_in_one_line_before_the_run_directory(
    tmp_path, command, overrides, message
):
    sets = [a for o in overrides for a in ("--set", o)]
    assert _refused([*command.split(), *sets], tmp_path / "run") == message


def _file(path, env: str | None) -> str:
    """A tiny D4RL-format file that records ``env`` as `privrl data collect` does."""
    rng = np.random.default_rng(0)
    n = 300
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    z = np.zeros(n, np.float32)
    data.save_hdf5(
        path,
        data.Transitions(
            observations=obs,
            actions=rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
            rewards=z,
            next_observations=obs + 0.01,
            terminals=z,
            timeouts=z,
        ),
        metadata={} if env is None else {"env": env},
    )
    return str(path)


@pytest.mark.parametrize(
    "command, recorded, task",
    [
        # umaze-v1 (sparse rewards) for PrivORL-n's default umaze-dense-v1.
        ("synth transitions", "maze2d-umaze-v1", "maze2d-umaze-dense-v1"),
        ("synth trajectories", "maze2d-large-v1", "maze2d-umaze-v1"),
        ("synth transitions --model mst", "maze2d-large-v1", "maze2d-umaze-dense-v1"),
    ],
)
def test_a_sensitive_file_of_another_env_is_refused(tmp_path, command, recorded, task):
    f = _file(tmp_path / "sens.hdf5", recorded)
    message = _refused(
        [*command.split(), "--config", "test", "--set", f"data.sensitive_file={f}"],
        tmp_path / "run",
    )
    assert message == (
        f"data.sensitive_file {f} was collected on {recorded}, but the task is "
        f"data.sensitive_env={task}; give a file of {task}, or set "
        f"data.sensitive_env={recorded}."
    )


def test_a_file_of_the_task_or_recording_no_env_passes_the_env_check(tmp_path):
    own = _file(tmp_path / "own.hdf5", "maze2d-umaze-dense-v1")
    d4rl = _file(tmp_path / "d4rl.hdf5", None)  # D4RL's own files record no env
    for f in (own, d4rl):
        cfg = privorl_n.load("privorl_n/test", [f"data.sensitive_file={f}"])
        assert cfg.data.sensitive_file == f


@pytest.mark.parametrize(
    "value, ok",
    [(2, True), (10**8, True), (1, False), (10**8 + 1, False), (-5, False)],
)
def test_pool_episode_bounds_are_inclusive(value, ok):
    overrides = [f"env.num_episodes={value}", "env.horizon=1"]
    if ok:
        assert pool.load("pool/test", overrides).env.num_episodes == value
    else:
        with pytest.raises(ValueError, match=r"env.num_episodes must be an integer"):
            pool.load("pool/test", overrides)


def test_teachers_get_ten_rows_each_on_average_and_a_file_is_counted_when_read():
    # 600 rows: 60 teachers pass, 61 do not (the bound is rows // 10).
    assert pategan.load("pategan/test", ["model.num_teachers=60"])
    with pytest.raises(ValueError, match="use at most 60 teachers"):
        pategan.load("pategan/test", ["model.num_teachers=61"])
    with pytest.raises(ValueError, match="the 599 sensitive transitions"):
        check_teachers(60, 599)


def test_bounds_describe_what_is_allowed():
    assert _config.at_least(1, 10**7).describe(True) == "an integer in [1, 10,000,000]"
    assert _config.positive().describe(False) == "a number > 0"
    assert _config.DECAY.describe(False) == "a number in [0, 1)"
    assert _config.Bound(0.0, 1.0, low_open=True).describe(False) == (
        "a number in (0, 1]"
    )
    assert not _config.positive().contains(float("inf"))
    assert not _config.UNIT.contains(float("nan"))
    assert not _config.at_least(0).contains(True)  # a bool is no number here
    # A section's table and its bases' apply (PrivORL-n's data adds holdout_size).
    with pytest.raises(ValueError, match="data.public_size must be an integer"):
        marginal.load("marginal/test", ["data.public_size=0"])
    with pytest.raises(ValueError, match="data.holdout_size must be an integer"):
        marginal.load("marginal/test", ["data.holdout_size=0"])
