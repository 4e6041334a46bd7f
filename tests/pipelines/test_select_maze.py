"""`privrl select` over maze agents: trained on a release, scored privately by GPOPE.

The scorer's error measure against closed forms; the truth rollouts against a Python
loop of env steps; the refusals (a grid that varies the data, a score that is not the
value). The slow test runs a tiny selection end to end: the ledger's epsilon is
dp-accounting's RepeatAndSelectDpEvent over the GPOPE plan's event written out by hand,
and the cached agents (this process's, then the run directory's) give the same runs and
the same choice as fresh training.
"""

import json
import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import envs, pipelines
from privrl_jax.cli.main import app
from privrl_jax.pipelines import select
from privrl_jax.pipelines.select import maze_policies


def test_scorer_error_closed_forms():
    err = maze_policies.scorer_error([1.0, 2.0, 3.0], [1.0, 2.0, 5.0])
    assert err["rmse"] == pytest.approx(math.sqrt(4.0 / 3.0))
    assert err["spearman"] == pytest.approx(1.0)
    # Order reversed, error 0 in the middle: rmse sqrt((4 + 0 + 4) / 3), rank -1.
    err = maze_policies.scorer_error([3.0, 2.0, 1.0], [1.0, 2.0, 3.0])
    assert err["rmse"] == pytest.approx(math.sqrt(8.0 / 3.0))
    assert err["spearman"] == pytest.approx(-1.0)
    # One swap of four: 1 - 6 * 2 / (4 * 15) = 0.8.
    err = maze_policies.scorer_error([1.0, 3.0, 2.0, 4.0], [10.0, 20.0, 30.0, 40.0])
    assert err["spearman"] == pytest.approx(0.8)
    assert math.isnan(maze_policies.scorer_error([1.0, 1.0], [0.0, 2.0])["spearman"])
    with pytest.raises(ValueError, match="K >= 2"):
        maze_policies.scorer_error([1.0], [1.0])


def test_discounted_return_is_the_mean_of_stepped_returns():
    env, params = envs.make("maze2d-umaze")
    gain = jnp.asarray([0.7, -0.4])

    def act(state, obs):  # a linear feedback on the position, toward the goal
        return jnp.clip(state * (params.goal - obs[:2]), -1.0, 1.0)

    key = jax.random.key(4)
    got = maze_policies.discounted_return(
        "maze2d-umaze", act, gain, discount=0.8, episodes=3, steps=6, key=key
    )
    want = []
    for k in jax.random.split(key, 3):
        k_reset, k_steps = jax.random.split(k)
        obs, state = env.reset(k_reset, params)
        total = 0.0
        for t, kt in enumerate(jax.random.split(k_steps, 6)):
            obs, state, r, _, _ = env.step(kt, state, act(gain, obs), params)
            total += 0.8**t * float(r)
        want.append(total)
    assert got == pytest.approx(np.mean(want), rel=1e-5, abs=1e-6)
    with pytest.raises(ValueError, match="time limit"):
        maze_policies.discounted_return(
            "maze2d-umaze", act, gain, discount=0.8, episodes=1, steps=301, key=key
        )


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["candidates.grid.data.seed=[1,2]"], "may not vary data."),
        (["score.kind=td_error"], "scored by their value"),
        (["maze.batch_size=200"], "at most maze.trajectories"),
        (["candidates.pipeline=gpope"], "may not vary seed"),
    ],
)
def test_bad_maze_selections_are_refused(overrides, fragment):
    with pytest.raises(ValueError, match=fragment):
        select.load("select/maze_test", overrides)


def test_only_a_maze_selection_has_the_maze_section():
    # The other selections' resolved configs (their stored rows' hashes) are unchanged.
    assert "maze" not in pipelines.to_dict(select.load("select/test"))
    maze = pipelines.to_dict(select.load("select/maze_test"))
    assert maze["maze"]["trajectories"] == 100
    with pytest.raises(ValueError, match="maze section is for"):
        select.load("select/test", ["maze.seed=3"])
    with pytest.raises(ValueError, match="may not vary data."):  # the base's error
        select.load("select/test", ["candidates.grid.data.seed=[1,2]"])


def test_a_grid_cannot_reach_the_sensitive_data():
    # The sensitive data are the selection's `maze` section, not a candidate's key.
    cfg = select.load("select/maze_test", ["candidates.grid.maze.seed=[1,2]"])
    with pytest.raises(ValueError, match="maze"):
        maze_policies.candidate_configs(cfg)
    # An agent's seed is its training key (public data): a maze grid may vary it,
    # a GPOPE grid (whose seed draws the sensitive data) may not.
    assert len(maze_policies.candidate_configs(select.load("select/maze_test"))) == 2
    with pytest.raises(ValueError, match="may not vary seed"):
        select.load("select/test", ["candidates.grid.seed=[1,2]"])


@pytest.mark.slow
def test_maze_selection_end_to_end_and_its_cache(tmp_path):
    maze_policies._TRAINED.clear()
    args = ["select", "--config", "maze_test", "--set", "privacy.noise_seed=3"]

    def run(out):
        res = CliRunner().invoke(app, [*args, "--out", str(out)])
        assert res.exit_code == 0, (res.output, res.exception)
        return (
            json.loads((out / "report.json").read_text()),
            json.loads((out / "audit" / "audit.json").read_text()),
        )

    first = tmp_path / "fresh"
    report, audit = run(first)
    plan = maze_policies.make_plan(select.load(first / "config.yaml"))
    # The GPOPE plan by hand: Poisson sampling of 8 of the 100 trajectories, 20 steps.
    one_run = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            0.08, dp_accounting.GaussianDpEvent(plan.noise_multiplier)
        ),
        20,
    )
    assert plan.event() == one_run
    acc = dp_accounting.rdp.RdpAccountant()
    want = acc.compose(
        dp_accounting.dp_event.RepeatAndSelectDpEvent(one_run, 2.0, 0.0)
    ).get_epsilon(1e-4)
    assert report["epsilon_spent"] == pytest.approx(want, rel=1e-9)
    assert (first / "policy.msgpack").exists()
    chosen = json.loads((first / "selected.json").read_text())
    assert chosen["candidate"] == report["chosen"]["candidate"] in (0, 1)
    assert len(audit["true_values"]) == 2 and audit["runs"] >= 1
    assert audit["regret"] == pytest.approx(
        max(audit["true_values"]) - audit["true_values"][chosen["candidate"]]
    )

    # The same keys with the agents cached in this process: the same runs, the
    # same choice.
    _, cached = run(tmp_path / "cached")
    assert cached["history"] == audit["history"]
    assert cached["every_candidate"] == audit["every_candidate"]
    # A resume with the process's cache emptied reads the agents back from the run
    # directory: nothing more is charged and the release is the same.
    before = json.loads((first / "ledger.json").read_text())["releases"]
    maze_policies._TRAINED.clear()
    _, resumed = run(first)
    assert resumed["history"] == audit["history"]
    assert json.loads((first / "ledger.json").read_text())["releases"] == before
