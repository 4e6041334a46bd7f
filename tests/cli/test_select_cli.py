"""`privrl select`: one run directory for a private selection over a GPOPE grid.

The ledger's epsilon is dp-accounting's for the selection event written out by hand;
an over-budget search is refused before any candidate runs; a rerun resumes without
charging twice; bad grids give one line.
"""

import json
import re

import dp_accounting
import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax.cli.main import app
from privrl_jax.pipelines import select

# select/test: gpope/test's chain (m = 200 trajectories, one-of-m sampling, 40 steps,
# each run calibrated to epsilon 2 at delta 1e-4), 4 candidates, score sigma 2, K
# logarithmic with mean 2; the audit's every-candidate runs are left out for speed.
FAST = ["--config", "test", "--set", "audit.every_candidate=false"]
SEEDED = ["--set", "privacy.noise_seed=3"]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, (
        result.stderr
    )
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("select") / "run"
    res = invoke("select", *FAST, *SEEDED, "--out", str(out))
    assert res.exit_code == 0, (res.output, res.exception)
    return out


def _ledger(run_dir):
    return json.loads((run_dir / "ledger.json").read_text())


def test_run_dir_holds_release_ledger_report_and_labelled_audit(run_dir):
    names = {p.name for p in run_dir.iterdir()} - {".lock"}
    assert names == {
        "selected.json",
        "ledger.json",
        "report.json",
        "report.md",
        "config.yaml",
        "audit",
        "checkpoints",
    }
    chosen = json.loads((run_dir / "selected.json").read_text())
    report = json.loads((run_dir / "report.json").read_text())
    audit = json.loads((run_dir / "audit" / "audit.json").read_text())
    grid = [
        {"gpope.l2_clip_norm": h, "gpope.step_size": b}
        for h in (0.1, 0.5)
        for b in (0.1, 0.5)
    ]
    assert report["candidates"] == grid
    assert chosen["hyper_parameters"] == grid[chosen["candidate"]]
    assert len(chosen["release"]["theta"]) == 5  # one-hot features of 5 states
    # The release is the best-scoring run: the audit's history says which that was.
    scores = [r["score"] for r in audit["history"]]
    assert len(scores) == audit["runs"] >= 1
    assert chosen["score"] == max(scores)
    best = audit["history"][scores.index(max(scores))]
    assert best["candidate"] == chosen["candidate"]
    # The release part says nothing of K or the other runs.
    assert "runs" not in report and "history" not in json.dumps(report)
    md = (run_dir / "report.md").read_text()
    assert "## Audit (NOT DP: never publish)" in md
    assert "NOT DP" in (run_dir / "audit" / "NOT_DP_README.txt").read_text()
    assert report["release"]["never_publish"] == ["audit/", "checkpoints/"]


def test_ledger_epsilon_is_dp_accountings_for_the_selection_event(run_dir):
    report = json.loads((run_dir / "report.json").read_text())
    sigma = report["selection"]["run"]["gpope"]["noise_multipliers"][0]
    # One run: 40 one-of-200 Gaussian steps (replace-one), then the score's Gaussian.
    one_run = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.SampledWithoutReplacementDpEvent(
                    200, 1, dp_accounting.GaussianDpEvent(sigma)
                ),
                40,
            ),
            dp_accounting.GaussianDpEvent(2.0),
        ]
    )
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(one_run, 2.0, 0.0)
    acc = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    expected = acc.compose(event).get_epsilon(1e-4)
    ledger = _ledger(run_dir)
    assert len(ledger["releases"]) == 1
    assert ledger["releases"][0]["params"]["mechanism"] == "repeat_and_select"
    assert report["epsilon_spent"] == pytest.approx(expected, rel=1e-9)
    # One run alone and the naive alternatives, from the same accountant.
    single = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    run_eps = single.compose(one_run).get_epsilon(1e-4)
    assert report["selection"]["run_epsilon"] == pytest.approx(run_eps, rel=1e-9)
    assert run_eps < expected < report["naive"]["every_candidate_once"]


def test_a_grid_over_steps_is_accounted_by_the_max_of_its_curves(tmp_path):
    # Candidates at 20 and 40 steps, each calibrated to epsilon 2: different noise,
    # different RDP curves (here the 40-step one is above at every order); one run
    # costs their pointwise max (Papernot-Steinke).
    out = tmp_path / "run"
    res = invoke(
        "select",
        *FAST,
        *SEEDED,
        "--set",
        "candidates.grid.gpope.steps=[20,40]",
        "--out",
        str(out),
    )
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads((out / "report.json").read_text())
    plans = report["selection"]["run"]["gpope"]
    assert report["selection"]["heterogeneous"] and len(plans) == 8
    rel = dp_accounting.NeighboringRelation.REPLACE_ONE
    curves = []
    for steps in (20, 40):
        sigma = next(p for p in plans if p["steps"] == steps)["noise_multipliers"][0]
        acc = dp_accounting.rdp.RdpAccountant(neighboring_relation=rel)
        acc.compose(
            dp_accounting.ComposedDpEvent(
                [
                    dp_accounting.SelfComposedDpEvent(
                        dp_accounting.SampledWithoutReplacementDpEvent(
                            200, 1, dp_accounting.GaussianDpEvent(sigma)
                        ),
                        steps,
                    ),
                    dp_accounting.GaussianDpEvent(2.0),
                ]
            )
        )
        curves.append(acc._rdp)
    assert (curves[0] != curves[1]).any()  # two events: the grid is heterogeneous
    rdp_mod = dp_accounting.rdp.rdp_privacy_accountant
    orders = rdp_mod.DEFAULT_RDP_ORDERS
    sel = rdp_mod._compute_rdp_repeat_and_select(
        np.asarray(orders), np.maximum(*curves), 2.0, 0.0
    )
    expected, _ = rdp_mod.compute_epsilon(orders, sel, 1e-4)
    assert report["epsilon_spent"] == pytest.approx(expected, rel=1e-9)
    assert report["epsilon_spent"] >= max(
        rdp_mod.compute_epsilon(
            orders,
            rdp_mod._compute_rdp_repeat_and_select(np.asarray(orders), c, 2.0, 0.0),
            1e-4,
        )[0]
        for c in curves
    )
    assert "pointwise max" in (out / "report.md").read_text()


def test_rerun_resumes_without_charging_twice(run_dir):
    before = _ledger(run_dir)
    chosen = (run_dir / "selected.json").read_text()
    # A crash after the selection was recorded: the release and report are lost.
    (run_dir / "selected.json").unlink()
    (run_dir / "report.json").unlink()
    res = invoke("select", *FAST, *SEEDED, "--out", str(run_dir))
    assert res.exit_code == 0, (res.output, res.exception)
    after = _ledger(run_dir)
    assert after["releases"] == before["releases"]  # nothing recorded twice
    assert (run_dir / "selected.json").read_text() == chosen


def test_another_config_in_the_same_dir_is_refused(run_dir):
    res = invoke(
        "select", *FAST, *SEEDED, "--set", "repetitions.mean=3", "--out", str(run_dir)
    )
    assert_one_line_error(res, "holds a run with a different config")


def test_over_budget_search_is_refused_before_any_candidate_runs(tmp_path):
    out = tmp_path / "run"
    res = invoke(
        "select", *FAST, *SEEDED, "--set", "privacy.epsilon=3", "--out", str(out)
    )
    assert_one_line_error(
        res, "would bring epsilon to", "> budget 3", "repetitions.mean"
    )
    assert not (out / "selected.json").exists()
    runs = out / "checkpoints" / "select" / "runs"
    assert not runs.exists() or not any(runs.iterdir())
    assert _ledger(out)["releases"] == []


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("candidates.grid.gpope.stepz=[1,2]", ["candidate", "gpope.stepz"]),
        ("candidates.grid.env.num_trajectories=[100]", ["may not vary env."]),
        ("candidates.grid.gpope.step_size=0.5", ["must be a non-empty list"]),
        ("privacy.accountant=pld", ["privacy.accountant must be rdp"]),
        ("repetitions.distribution=uniform", ["repetitions.distribution"]),
    ],
)
def test_bad_input_gives_one_line(tmp_path, override, fragments):
    out = tmp_path / "run"
    res = invoke("select", *FAST, "--set", override, "--out", str(out))
    assert_one_line_error(res, *fragments)
    assert not (out / "ledger.json").exists()


def test_set_help_examples_are_keys_the_command_accepts():
    import typer  # noqa: PLC0415

    command = typer.main.get_command(app).commands["select"]
    (param,) = [p for p in command.params if p.name == "overrides"]
    examples = re.search(r"\(e\.g\. (.*)\)\.", param.help).group(1).split(", ")
    assert select.load("select/test", examples).repetitions.mean == 8


def test_policy_selection_scores_the_value_at_the_start_distribution(tmp_path):
    """score.kind=value over env.target_treat: the score is initial . Phi theta (free:
    post-processing), so the ledger holds the plan's runs alone; the audit's regret is
    the gap in true value to the best candidate policy."""
    import numpy as np  # noqa: PLC0415

    from privrl_jax import ope  # noqa: PLC0415

    out = tmp_path / "run"
    grid = '{"env.target_treat": [[0.9], [0.1], [0.5]], "gpope.step_size": [0.5]}'
    res = invoke(
        "select",
        *FAST,
        *SEEDED,
        "--set",
        "score.kind=value",
        "--set",
        "audit.every_candidate=true",
        "--set",
        f"candidates.grid={grid}",
        "--out",
        str(out),
    )
    assert res.exit_code == 0, (res.output, res.exception)
    chosen = json.loads((out / "selected.json").read_text())
    report = json.loads((out / "report.json").read_text())
    audit = json.loads((out / "audit" / "audit.json").read_text())
    mdp = ope.medical_chain(5, gamma=0.9)
    theta = np.asarray(chosen["release"]["theta"])
    assert chosen["score"] == pytest.approx(float(mdp.initial @ theta), rel=1e-5)
    truth = [
        float(mdp.initial @ ope.exact_values(mdp, ope.treatment_policy([p] * 5)))
        for p in (0.9, 0.1, 0.5)
    ]
    np.testing.assert_allclose(audit["true_values"], truth, rtol=1e-5)
    assert audit["regret"] == pytest.approx(max(truth) - truth[chosen["candidate"]])
    assert audit["random_true_value"] == pytest.approx(np.mean(truth), rel=1e-6)
    assert audit["last_true_value"] == pytest.approx(truth[-1], rel=1e-6)
    # Each candidate once: the best-scoring one's true value (the scorer's quality
    # apart from the number of runs).
    once = [m["score"] for m in audit["every_candidate"]]
    top = audit["every_candidate_choice"]
    assert top["candidate"] == int(np.argmax(once)) and len(once) == 3
    assert top["true_value"] == pytest.approx(truth[top["candidate"]], rel=1e-6)
    sigma = report["selection"]["run"]["gpope"]["noise_multipliers"][0]
    plan_only = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            200, 1, dp_accounting.GaussianDpEvent(sigma)
        ),
        40,
    )
    acc = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(plan_only, 2.0, 0.0)
    assert report["epsilon_spent"] == pytest.approx(
        acc.compose(event).get_epsilon(1e-4), rel=1e-9
    )
