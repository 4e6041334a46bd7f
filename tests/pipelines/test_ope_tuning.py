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


FIXED = [*SMALL, "tuning=fixed", "gpope_step_size=[0.5]", "lsl_ridge=[1000]"]


def test_fixed_tuning_needs_one_candidate():
    with pytest.raises(ValueError, match="gpope_step_size must hold one value"):
        ope_tuning.load(None, [*SMALL, "tuning=fixed", "method=gpope"])
    with pytest.raises(ValueError, match="lsl_ridge must hold one value"):
        ope_tuning.load(None, [*SMALL, "tuning=fixed", "method=dp_lsl"])
    # DP-LSW has no grid: fixed is its private release.
    assert ope_tuning.load(None, [*SMALL, "tuning=fixed", "method=dp_lsw"])


def test_fixed_dp_lsl_is_one_release_at_the_whole_budget(tmp_path):
    """The release is ope.dp_lsl at (epsilon, delta) with the one lambda and the
    configured alpha, on the cell's data and its first oracle key; nothing is paid for
    a choice."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from privrl_jax import ope

    cfg = ope_tuning.load(None, [*FIXED, "method=dp_lsl", "calibration=exact"])
    report = ope_tuning.run(cfg, tmp_path / "run")
    assert report["epsilon_total"] == 4.0 and report["tuning"] == "fixed"
    assert report["audit"]["gap"] == 0.0
    mdp, pi = (
        ope.medical_chain(5, gamma=0.9),
        ope.treatment_policy((0.9, 0.8, 0.6, 0.4, 0.2)),
    )
    phi = ope.one_hot_features(5)
    col = ope.collect(
        jax.random.key(0), mdp, pi, pi, phi, num_trajectories=100, max_length=10
    )
    visits = ope.first_visits(
        col.states, col.data.transitions.r_t, col.data.mask, 0.9, 5
    )
    key = jax.random.fold_in(
        jax.random.split(jax.random.fold_in(jax.random.key(0), 7))[1], 0
    )
    kwargs = dict(delta=1e-5, return_bounds=(-2.0, 1.0), num_trajectories=100)
    want = ope.dp_lsl(
        key,
        visits,
        phi,
        jnp.full(5, 0.2),
        epsilon=4.0,
        ridge=1000.0,
        calibration="exact",
        **kwargs,
    ).theta
    np.testing.assert_array_equal(report["theta"], np.asarray(want))
    nrs07 = ope.dp_lsl(
        key, visits, phi, jnp.full(5, 0.2), epsilon=4.0, ridge=1000.0, **kwargs
    ).theta
    assert not np.array_equal(np.asarray(want), np.asarray(nrs07))


def test_fixed_gpope_spends_the_whole_budget_on_one_run(tmp_path):
    cfg = ope_tuning.load(None, [*FIXED, "method=gpope"])
    report = ope_tuning.run(cfg, tmp_path / "run")
    sigma = report["accounting"]["noise_multiplier"]
    one_run = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            100, 1, dp_accounting.GaussianDpEvent(sigma)
        ),
        50,
    )
    assert _eps(one_run, 1e-5) == pytest.approx(4.0, rel=1e-3)
    assert report["epsilon_total"] == 4.0
    assert report["audit"]["mse_private"] == report["audit"]["mse_oracle"]


def test_fixed_poisson_gpope_is_calibrated_to_the_replace_one_target(tmp_path):
    """Poisson GPOPE (add/remove-one) at eps / 2, delta / (1 + e^(eps / 2)): by group
    privacy (epsilon, delta)-DP under replace-one, like the baselines."""
    extra = ["gpope_sampler=poisson", "gpope_batch_size=10"]
    cfg = ope_tuning.load(None, [*FIXED, "method=gpope", *extra])
    report = ope_tuning.run(cfg, tmp_path / "run")
    sigma = report["accounting"]["noise_multiplier"]
    steps = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(sigma)),
        50,
    )
    eps = (
        dp_accounting.rdp.RdpAccountant()
        .compose(steps)
        .get_epsilon(1e-5 / (1 + math.exp(2.0)))
    )
    assert eps == pytest.approx(2.0, rel=1e-3)
    assert report["epsilon_total"] == 4.0
    # Private selection repeats a replace-one event: Poisson is refused there.
    with pytest.raises(ValueError, match="needs gpope_sampler: uniform_one"):
        ope_tuning.load(None, [*SMALL, "method=gpope", *extra])


@pytest.mark.slow  # ~40 s: Monte Carlo truth and the Mountain Car collection compile
def test_mountain_car_setting_shares_one_value_class():
    """The baselines' cells: every visited state's tile features are its cell's row,
    so DP-LSW / DP-LSL and GPOPE estimate the same linear value class."""
    import jax
    import numpy as np

    from privrl_jax import ope
    from privrl_jax.pipelines.ope_tuning import _setting

    small = ["env=mountain_car", "num_trajectories=8", "max_length=200"]
    st = _setting.setting(ope_tuning.load(None, small))
    task = _setting._mountain_car_public(8, 200)[1]
    grid = ope.GridDiscretiser.of_tiles(task.features.coders[0])
    obs = jax.random.uniform(
        jax.random.key(3),
        (500, 2),
        minval=jax.numpy.array([-1.2, -0.07]),
        maxval=jax.numpy.array([0.6, 0.07]),
    )
    np.testing.assert_allclose(
        np.asarray(jax.vmap(task.features)(obs)),
        np.asarray(st.cell_phi)[np.asarray(jax.vmap(grid)(obs))],
        atol=1e-6,
    )
    assert st.cell_phi.shape == (36, 33) and st.eval_phi.shape == (64, 33)
    assert float(st.rho.sum()) == pytest.approx(1.0)
    occupancy = _setting.setting(ope_tuning.load(None, [*small, "rho=occupancy"]))
    assert float(occupancy.rho.sum()) == pytest.approx(1.0)
    assert not np.allclose(np.asarray(occupancy.rho), np.asarray(st.rho))
    # The legacy comparison's weighting (benchmarks/results/...onpolicy.json), bit for
    # bit up to float32 round-off: the same public states.
    import json
    from pathlib import Path

    legacy = json.loads(
        (
            Path(__file__).resolve().parents[2]
            / "benchmarks/results/gpope_mountain_car_onpolicy.json"
        ).read_text()
    )["setting"]["rhos"]
    np.testing.assert_allclose(
        np.asarray(occupancy.rho), legacy["occupancy"], rtol=1e-6
    )
    assert st.data.mask.shape == (8, 200)
