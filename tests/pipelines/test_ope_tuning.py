"""The tuned OPE comparison (issue 51): its accounting against dp-accounting, and one
small cell of each method."""

import math

import dp_accounting
import pytest

from privrl_jax.pipelines import ope_tuning

R1 = dp_accounting.NeighboringRelation.REPLACE_ONE
SMALL = [
    "num_trajectories=100",
    "max_length=10",
    "gpope_steps=50",
    "gpope_clip=[0.1]",
    "gpope_step_size=[0.1, 0.5]",
    "lsl_ridge=[10, 1000]",
    "epsilon=4",
]


def _eps(event, delta):
    return (
        dp_accounting.rdp.RdpAccountant(neighboring_relation=R1)
        .compose(event)
        .get_epsilon(delta)
    )


def test_gpope_sigma_spends_the_whole_budget_on_the_selection():
    sigma = ope_tuning.gpope_selection_sigma(100, 50, 10.0, 3.0, 4.0, 1e-5)
    one_run = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.SampledWithoutReplacementDpEvent(
                    100, 1, dp_accounting.GaussianDpEvent(sigma)
                ),
                50,
            ),
            dp_accounting.GaussianDpEvent(10.0),
        ]
    )
    select = dp_accounting.dp_event.RepeatAndSelectDpEvent(one_run, 3.0, 0.0)
    assert _eps(select, 1e-5) == pytest.approx(4.0, abs=1e-6)
    # A 1% smaller sigma would overspend: the bisection found the least one.
    smaller = dp_accounting.dp_event.RepeatAndSelectDpEvent(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.SelfComposedDpEvent(
                    dp_accounting.SampledWithoutReplacementDpEvent(
                        100, 1, dp_accounting.GaussianDpEvent(0.99 * sigma)
                    ),
                    50,
                ),
                dp_accounting.GaussianDpEvent(10.0),
            ]
        ),
        3.0,
        0.0,
    )
    assert _eps(smaller, 1e-5) > 4.0


def test_lsl_split_adds_up_to_the_budget():
    cfg = ope_tuning.load(None, SMALL)
    split = ope_tuning.lsl_split(cfg)
    scores = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(5.0), 2)
    assert split["scores_epsilon"] == pytest.approx(_eps(scores, 5e-6), rel=1e-12)
    assert 2 * split["run_epsilon"] + split["scores_epsilon"] == pytest.approx(4.0)
    assert 2 * split["run_delta"] + 1e-5 / 2 == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="scores alone"):
        ope_tuning.lsl_split(ope_tuning.load(None, [*SMALL, "epsilon=0.1"]))


@pytest.mark.parametrize(
    "method",
    [pytest.param("gpope", marks=pytest.mark.slow), "dp_lsl", "dp_lsw"],  # gpope ~30 s
)
def test_one_cell_reports_its_accounting_and_the_oracle(tmp_path, method):
    cfg = ope_tuning.load(None, [*SMALL, f"method={method}"])
    report = ope_tuning.run(cfg, tmp_path / "run")
    audit = report["audit"]
    assert report["epsilon_total"] == pytest.approx(4.0, rel=1e-6)
    every = audit["oracle_mse_every_candidate"]
    assert len(every) == len(report["candidates"])
    assert audit["mse_oracle"] == min(every)
    assert audit["gap"] == pytest.approx(audit["mse_private"] - audit["mse_oracle"])
    if method == "dp_lsw":
        assert audit["gap"] == 0.0  # nothing to choose: the oracle is the release
    if method == "gpope":
        assert audit["runs"] >= 1 and "runs" not in report["accounting"]
    assert math.isfinite(audit["mse_private"])
    # A rerun with another config in the same directory is refused.
    with pytest.raises(ValueError, match="different config"):
        ope_tuning.run(ope_tuning.load(None, [*SMALL, "seed=1"]), tmp_path / "run")
