"""`privrl select` over a PrivORL-n grid: the DP coverage score and the grid's run.

The score's distances against a naive double loop; its sensitivity (one row added,
removed or replaced moves the clipped sum by at most the clip c) checked row by row,
adversarial rows included; its noise against the mechanism's std. The slow test runs a
tiny selection end to end: the ledger holds dp-accounting's RepeatAndSelectDpEvent of
the PrivORL-n plan composed with the score's Gaussian.
"""

import json

import dp_accounting
import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from privrl_jax import privacy
from privrl_jax.cli.main import app
from privrl_jax.pipelines import privorl_n, select
from privrl_jax.pipelines.select import privorl_n as select_privorl_n

RNG = np.random.default_rng(0)
SENS = RNG.normal(size=(40, 3))
SYN = RNG.normal(size=(25, 3)) + 0.5


def _naive(x, s, clip):
    return np.array([min(clip, min(np.linalg.norm(a - b) for b in s)) for a in x])


@pytest.mark.parametrize("clip", [0.3, 1.0, 100.0])
def test_coverage_distances_are_clipped_nearest_distances(clip):
    got = select_privorl_n.coverage_distances(SENS, SYN, clip)
    np.testing.assert_allclose(got, _naive(SENS, SYN, clip), rtol=1e-9, atol=1e-9)
    assert got.max() <= clip
    with pytest.raises(ValueError, match="positive finite"):
        select_privorl_n.coverage_distances(SENS, SYN, 0.0)


def test_one_row_moves_the_clipped_sum_by_at_most_the_clip():
    clip = 1.0
    full = select_privorl_n.coverage_distances(SENS, SYN, clip).sum()
    far = np.full((1, 3), 1e3)  # the adversary's row: as far as can be
    for i in range(len(SENS)):
        removed = np.delete(SENS, i, axis=0)
        rem = select_privorl_n.coverage_distances(removed, SYN, clip).sum()
        assert abs(full - rem) <= clip + 1e-12
        for new in (far, SYN[:1]):  # the farthest and the nearest replacement
            replaced = np.concatenate([removed, new])
            rep = select_privorl_n.coverage_distances(replaced, SYN, clip).sum()
            assert abs(full - rep) <= clip + 1e-12
    # The bound is attained: add the far row (distance clipped to c) to the data.
    added = select_privorl_n.coverage_distances(np.vstack([SENS, far]), SYN, clip)
    assert added.sum() - full == pytest.approx(clip)


def _cfg(**score):
    return select.load(
        "select/privorl_n_test",
        [f"score.{k}={v}" for k, v in score.items()],
    )


def test_score_mechanism_and_run_event():
    cfg = _cfg(l2_clip_norm=3.0, noise_multiplier=1.5)
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=600, sampling_rate=0.05, microbatch_size=16
        ),
        l2_clip_norm=1.0,
        steps=10,
        noise_multiplier=1.2,
    )
    mech = select_privorl_n.coverage_mechanism(cfg, plan)
    # Sensitivity c under either relation (scalars of one sign: module doc).
    assert mech.l2_sensitivity == 3.0 and mech.noise_std == pytest.approx(4.5)
    event = select_privorl_n.run_event(cfg, plan)
    assert event == dp_accounting.ComposedDpEvent(
        [plan.event(), dp_accounting.GaussianDpEvent(1.5)]
    )


def test_dp_score_is_the_clipped_mean_plus_the_mechanisms_noise():
    mech = privacy.GaussianMechanism(l2_sensitivity=1.0, noise_multiplier=2.0)
    exact = -select_privorl_n.coverage_distances(SENS, SYN, 1.0).mean()
    scores = np.array(
        [
            select_privorl_n.dp_coverage_score(SENS, SYN, mech, jax.random.key(s))
            for s in range(400)
        ]
    )
    # Noise std 2 on the sum, so 2 / 40 = 0.05 on the mean; 400 draws: the mean's
    # sd is 0.0025 and the std's about 0.0018.
    assert scores.mean() == pytest.approx(exact, abs=0.01)
    assert scores.std(ddof=1) == pytest.approx(0.05, abs=0.008)
    key = jax.random.key(7)
    assert select_privorl_n.dp_coverage_score(SENS, SYN, mech, key) == (
        select_privorl_n.dp_coverage_score(SENS, SYN, mech, key)
    )


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["score.kind=td_error"], "privorl_n coverage"),
        (["candidates.grid.data.sensitive_size=[100,200]"], "may not vary data."),
        (["candidates.pipeline=gpope"], "gpope takes td_error or value"),
    ],
)
def test_bad_privorl_n_selections_are_refused(overrides, fragment):
    with pytest.raises(ValueError, match=fragment):
        select.load("select/privorl_n_test", overrides)


@pytest.mark.slow
def test_privorl_n_selection_end_to_end(tmp_path):
    out = tmp_path / "run"
    args = [
        "select", "--config", "privorl_n_test",
        "--set", "candidates.overrides.finetune.epochs=0.5",
        "--set", "candidates.grid.finetune.num_noise=[1]",
        "--set", "audit.every_candidate=false",
        "--set", "repetitions.mean=1.5",
        "--set", "privacy.noise_seed=3",
        "--out", str(out),
    ]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    report = json.loads((out / "report.json").read_text())
    cands = select_privorl_n.candidate_configs(select.load(out / "config.yaml"))
    plan = privorl_n.make_plan(cands[0], 600)
    one_run = dp_accounting.ComposedDpEvent(
        [plan.event(), dp_accounting.GaussianDpEvent(2.0)]
    )
    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(one_run, 1.5, 0.0)
    acc = dp_accounting.rdp.RdpAccountant()
    assert report["epsilon_spent"] == pytest.approx(
        acc.compose(event).get_epsilon(1e-4), rel=1e-9
    )
    assert (out / "synthetic.hdf5").exists()
    chosen = json.loads((out / "selected.json").read_text())
    assert chosen["hyper_parameters"]["finetune.learning_rate"] in (3e-4, 3e-3)
    before = (out / "ledger.json").read_text()
    res = CliRunner().invoke(app, args)  # a rerun charges nothing more
    assert res.exit_code == 0, (res.output, res.exception)
    assert (
        json.loads((out / "ledger.json").read_text())["releases"]
        == json.loads(before)["releases"]
    )


def test_audit_runs_draw_apart_from_the_selections():
    # privacy.select splits its key in two; JAX's split(key)[i] is fold_in(key, i), so
    # an audit keyed by fold_in(key, 1) replayed the selection's runs (both runners).
    from privrl_jax.pipelines.select import runner  # noqa: PLC0415

    key = jax.random.key(11)
    data = jax.random.key_data
    halves = [np.asarray(data(k)) for k in jax.random.split(key)]
    np.testing.assert_array_equal(halves[1], data(jax.random.fold_in(key, 1)))
    audit = np.asarray(data(jax.random.fold_in(key, runner.AUDIT_STREAM)))
    assert all((audit != h).any() for h in halves)


def test_run_names_keep_apart_runs_of_one_key_with_other_configs():
    # Two selections of one key sharing candidates.runs_dir: at E[K] = 2 and 8 the
    # key gives run 0 to different candidates (data set 0 of privorl_n_private_tuning),
    # and the stand-in's run at the total epsilon differs by its epsilon; the run's
    # seed alone named both runs' directory, and PrivORL-n refused the second.
    import dataclasses  # noqa: PLC0415

    from privrl_jax.privacy._selection import _draw_plan  # noqa: PLC0415

    key = privacy.DPSecret.from_seed(1000).noise_key
    plans = [_draw_plan(key, privacy.Repetitions.logarithmic(m), 4) for m in (2, 8)]
    assert plans[0][0][0] != plans[1][0][0]
    np.testing.assert_array_equal(data_of(plans[0][1]), data_of(plans[1][1]))

    cands = select_privorl_n.candidate_configs(_cfg())
    seed = 0x1D74855740323298
    names = {select_privorl_n.run_name(c, seed) for c in cands}
    assert len(names) == len(cands)
    assert all(n.startswith(f"{seed:016x}-") and len(n) == 16 + 1 + 8 for n in names)
    c = cands[0]

    def with_privacy(**kw):
        return dataclasses.replace(c, privacy=dataclasses.replace(c.privacy, **kw))

    name = select_privorl_n.run_name(c, seed)
    # The noise seed is the name's first part, not the tag's; eval may change on resume.
    assert select_privorl_n.run_name(with_privacy(noise_seed=seed), seed) == name
    other_eval = dataclasses.replace(
        c, eval=dataclasses.replace(c.eval, eval_episodes=7)
    )
    assert select_privorl_n.run_name(other_eval, seed) == name
    other_eps = select_privorl_n.run_name(with_privacy(epsilon=12.0), seed)
    assert other_eps != name and other_eps[:16] == name[:16]
    assert select_privorl_n.run_name(c, seed, "total-eps-") == "total-eps-" + name


def data_of(key):
    return np.asarray(jax.random.key_data(key))
