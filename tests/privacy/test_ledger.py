"""The ledger records every release, survives reloads and refuses
over-budget releases."""

import json

import dp_accounting
import pytest

from privrl_jax.privacy import (
    BudgetExceededError,
    DPPlan,
    GaussianMechanism,
    Ledger,
    LedgerError,
    PoissonSampler,
    compute_epsilon,
    event_to_dict,
)
from privrl_jax.privacy._accounting import dpsgd_event
from privrl_jax.privacy._ledger import event_from_dict

STEP = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))


def _open(tmp_path, **kw):
    args = dict(
        dataset_id="umaze-abc",
        dataset_size=10_000,
        target_epsilon=2.0,
        target_delta=1e-6,
    )
    return Ledger.open(tmp_path, **{**args, **kw})


def test_event_round_trip():
    ev = dp_accounting.ComposedDpEvent(
        [
            dpsgd_event(1.1, 0.02, 30),
            dp_accounting.LaplaceDpEvent(0.5),
            dp_accounting.GaussianDpEvent(2.0),
        ]
    )
    assert event_from_dict(json.loads(json.dumps(event_to_dict(ev)))) == ev


def test_records_merge_and_total_epsilon_matches_dp_accounting(tmp_path):
    led = _open(tmp_path)
    for _ in range(3):
        led.record(STEP, what="dpsgd step", count=100)
    led.record(dp_accounting.GaussianDpEvent(10.0), what="noisy count")
    assert led.num_releases == 301
    assert (
        len(led.releases) == 4 and len(led.groups()) == 2
    )  # entries append; accounting groups
    expected = compute_epsilon(
        dp_accounting.ComposedDpEvent(
            [
                dp_accounting.SelfComposedDpEvent(STEP, 300),
                dp_accounting.GaussianDpEvent(10.0),
            ]
        ),
        1e-6,
    ).epsilon
    assert led.epsilon("rdp").epsilon == pytest.approx(expected, rel=1e-12)


def test_survives_reload_and_resume_continues_it(tmp_path):
    led = _open(tmp_path)
    led.record(STEP, what="dpsgd step", count=40)
    again = _open(tmp_path)
    assert again.num_releases == 40
    again.record(STEP, what="dpsgd step", count=60)
    uninterrupted = compute_epsilon(
        dp_accounting.SelfComposedDpEvent(STEP, 100), 1e-6
    ).epsilon
    assert _open(tmp_path).epsilon().epsilon == pytest.approx(uninterrupted, rel=1e-12)
    # Reopening twice does not double anything.
    assert _open(tmp_path).num_releases == 100


def test_refuses_release_that_would_exceed_budget(tmp_path):
    led = _open(tmp_path, target_epsilon=1.0)
    quiet = dp_accounting.PoissonSampledDpEvent(
        0.01, dp_accounting.GaussianDpEvent(3.0)
    )
    assert led.check(quiet, 100) < 1.0
    with pytest.raises(BudgetExceededError, match="budget 1"):
        led.check(quiet, 100_000)
    assert led.num_releases == 0  # nothing recorded by a refused check
    assert _open(tmp_path, target_epsilon=1.0).num_releases == 0


def test_rho_budget_refuses_before_any_release_and_pins_the_epsilon_budget(tmp_path):
    led = _open(tmp_path, target_epsilon=None, rho_budget=1.0)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.ZCDpEvent(1.0))
    assert led.target_epsilon == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)
    half = GaussianMechanism.from_zcdp(0.5, l2_sensitivity=3.0)
    led.record(half.event(), what="noisy statistics", params=half.describe())
    assert led.rho() == pytest.approx(0.5, rel=1e-12)
    # The second half fills the budget exactly: allowed, at the budget's epsilon.
    assert led.check(half.event()) == pytest.approx(led.target_epsilon, rel=1e-9)
    led.record(half.event(), what="noisy statistics", params=half.describe())
    more = GaussianMechanism.from_zcdp(0.1, l2_sensitivity=1.0).event()
    with pytest.raises(BudgetExceededError, match="rho to 1.1 > the rho budget 1 "):
        led.check(more)
    again = _open(tmp_path, target_epsilon=None, rho_budget=1.0)
    assert again.num_releases == 2 and again.rho() == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(BudgetExceededError, match="rho budget"):
        again.check(more)
    # The stored epsilon budget is the rho budget's: another rho budget is refused.
    with pytest.raises(LedgerError, match="budget cannot change"):
        _open(tmp_path, target_epsilon=None, rho_budget=2.0)
    with pytest.raises(ValueError, match="not both"):
        _open(tmp_path / "both", rho_budget=1.0)
    with pytest.raises(ValueError, match="rho_budget must be > 0"):
        _open(tmp_path / "zero", target_epsilon=None, rho_budget=0.0)
    # A subsampled DP-SGD step has no exact zCDP guarantee: no rho to count.
    sgd = _open(tmp_path / "sgd")
    sgd.record(STEP, what="dpsgd step", count=3)
    with pytest.raises(LedgerError, match="cannot account"):
        sgd.rho()


def test_report_shows_rho_beside_the_rho_budget(tmp_path):
    led = _open(tmp_path, target_epsilon=None, rho_budget=1.0)
    half = GaussianMechanism.from_zcdp(0.5, l2_sensitivity=3.0)
    led.record(half.event(), what="noisy statistics", count=2, params=half.describe())
    rep = led.report()
    assert rep["zcdp"]["rho"] == pytest.approx(1.0, rel=1e-12)
    assert rep["zcdp"]["rho_budget"] == 1.0 and not rep["over_budget"]
    # A release recorded past the rho budget (no check: a forced run) is flagged.
    more = GaussianMechanism.from_zcdp(0.1, l2_sensitivity=1.0)
    led.record(more.event(), what="noisy statistics", params=more.describe())
    rep = led.report()
    assert rep["zcdp"]["rho"] == pytest.approx(1.1, rel=1e-12) and rep["over_budget"]
    # An epsilon ledger of Gaussian releases shows their rho, count / (2 sigma^2);
    # one of subsampled steps (no exact rho) keeps its report's shape.
    gauss = _open(tmp_path / "gauss", target_epsilon=100.0)
    gauss.record(dp_accounting.GaussianDpEvent(2.0), what="stat", count=3)
    assert gauss.report()["zcdp"] == {
        "rho": pytest.approx(3 / (2 * 2.0**2), rel=1e-12),
        "rho_budget": None,
    }
    sgd = _open(tmp_path / "sgd")
    sgd.record(STEP, what="dpsgd step", count=3)
    assert "zcdp" not in sgd.report()


def test_corrupt_file_is_an_error(tmp_path):
    _open(tmp_path)
    (tmp_path / "ledger.json").write_text("{not json")
    with pytest.raises(LedgerError, match="corrupt"):
        _open(tmp_path)
    (tmp_path / "ledger.json").write_text(
        json.dumps({"format": "privrl_jax.ledger/1", "dataset_id": "x"})
    )
    with pytest.raises(LedgerError, match="corrupt"):
        Ledger.load(tmp_path)


def test_ledger_of_another_dataset_or_budget_is_refused(tmp_path):
    _open(tmp_path)
    with pytest.raises(LedgerError, match="belongs to dataset"):
        _open(tmp_path, dataset_id="other")
    with pytest.raises(LedgerError, match="budget cannot change"):
        _open(tmp_path, target_epsilon=5.0)
    # Another N (it was silently accepted on reopen before issue 47).
    with pytest.raises(LedgerError, match="dataset_size=10000, now 20000"):
        _open(tmp_path, dataset_size=20_000)


def test_require_plan_names_each_field_that_differs_in_one_line(tmp_path):
    led = _open(tmp_path)

    def plan(steps, sigma):
        return DPPlan(
            sampler=PoissonSampler(
                dataset_size=10_000, sampling_rate=0.01, microbatch_size=8
            ),
            l2_clip_norm=1.0,
            steps=steps,
            noise_multiplier=sigma,
        )

    first = plan(1200, 0.9893)
    led.require_plan("DP-SGD step", first.describe())  # nothing recorded: no check
    led.record(
        first.step_event(), what="DP-SGD step", count=300, params=first.describe()
    )
    led.require_plan("DP-SGD step", first.describe())
    led.require_plan("another phase", plan(5, 2.0).describe())
    with pytest.raises(LedgerError) as err:
        led.require_plan("DP-SGD step", plan(600, 0.8791).describe())
    msg = str(err.value)
    assert "(steps 1200 -> 600, noise_multipliers [0.9893] -> [0.8791])" in msg
    assert "\n" not in msg


def test_bad_budget(tmp_path):
    with pytest.raises(ValueError, match="delta"):
        _open(tmp_path, target_delta=2.0)
    with pytest.raises(ValueError, match="target_epsilon"):
        _open(tmp_path, target_epsilon=0.0)
    with pytest.warns(UserWarning, match="weak"):
        _open(tmp_path, dataset_size=100, target_delta=0.05)


def test_report_has_both_accountants(tmp_path):
    led = _open(tmp_path)
    led.record(STEP, what="dpsgd step", count=10)
    rep = led.report()
    assert rep["num_releases"] == 10
    assert rep["rdp"]["epsilon"] >= rep["pld"]["epsilon"] * (1 - 1e-3)
    assert rep["pld"]["pld_discretization"] == 1e-4


def _plan_entry(led, steps=63):
    from privrl_jax import privacy

    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=10_000, sampling_rate=0.01, microbatch_size=64
        ),
        l2_clip_norm=1.0,
        steps=steps,
        noise_multiplier=1.0,
    )
    led.record(plan.step_event(), what="dp step", count=steps, params=plan.describe())
    return plan


def _edit(tmp_path, fn):
    data = json.loads((tmp_path / "ledger.json").read_text())
    fn(data)
    (tmp_path / "ledger.json").write_text(json.dumps(data))


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda d: d["releases"][0].update(count=10),
            "entry 0 .* does not match its hash",
        ),
        (
            lambda d: d["releases"][0]["event"]["event"].update(noise_multiplier=50.0),
            "does not match its hash",
        ),
        (lambda d: d.update(target_epsilon=100.0), "header"),
        (lambda d: d["releases"].pop(0), "does not follow"),
    ],
)
def test_edits_break_the_chain(tmp_path, edit, match):
    led = _open(tmp_path, target_epsilon=20.0)
    _plan_entry(led)
    led.record(dp_accounting.GaussianDpEvent(10.0), what="noisy count")
    _edit(tmp_path, edit)
    with pytest.raises(LedgerError, match=match):
        Ledger.load(tmp_path)


def test_an_edit_with_recomputed_hashes_is_caught_by_its_parameters_and_by_the_head(
    tmp_path,
):
    import hashlib

    from privrl_jax.privacy import _ledger

    led = _open(tmp_path, target_epsilon=20.0)
    _plan_entry(led)
    head = led.head  # what a checkpoint and the release hold

    def forge(d, field):
        r = d["releases"][0]
        if field == "sigma":
            r["event"]["event"]["noise_multiplier"] = 50.0
        else:
            r["count"] = 10
        payload = {k: r[k] for k in ("event", "count", "what", "params", "time")}
        r["hash"] = _ledger._digest(r["prev"], payload)
        assert len(r["hash"]) == len(hashlib.sha256().hexdigest())

    _edit(tmp_path, lambda d: forge(d, "sigma"))
    with pytest.raises(
        LedgerError, match="its parameters give"
    ):  # event recomputed from params
        Ledger.load(tmp_path)
    (tmp_path / "ledger.json").unlink()  # start again, and forge a count instead
    led = _open(tmp_path, target_epsilon=20.0)
    _plan_entry(led)
    head = led.head
    _edit(tmp_path, lambda d: forge(d, "count"))
    forged = Ledger.load(tmp_path)  # a consistent forgery loads ...
    assert forged.num_releases == 10
    with pytest.raises(
        LedgerError, match="truncated or replaced"
    ):  # ... but lacks the head
        forged.require_head(head, "the checkpoint of DP step 63")


def test_a_missing_ledger_is_never_replaced_while_artifacts_exist(tmp_path):
    led = _open(tmp_path)
    led.record(STEP, what="dpsgd step", count=5)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "ledger.json").unlink()
    with pytest.raises(LedgerError, match="is missing, but this run directory holds"):
        _open(tmp_path, artifacts=[tmp_path / "checkpoints"])
    assert not (tmp_path / "ledger.json").exists()


def test_over_budget_is_flagged(tmp_path):
    led = _open(tmp_path, target_epsilon=0.5)
    led.record(
        STEP, what="dpsgd step", count=2000
    )  # recorded without check: e.g. a forced run
    rep = led.report()
    assert rep["over_budget"] and rep["rdp"]["epsilon"] > 0.5
    assert not _open(tmp_path / "b").report()["over_budget"]


def test_event_and_parameters_must_agree_when_recorded(tmp_path):
    led = _open(tmp_path, target_epsilon=20.0)
    plan = _plan_entry(led)
    with pytest.raises(ValueError, match="does not match its parameters"):
        led.record(
            dp_accounting.PoissonSampledDpEvent(
                0.01, dp_accounting.GaussianDpEvent(2.0)
            ),
            what="dp step",
            params=plan.describe(),
        )
