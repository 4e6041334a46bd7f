"""The white-box one-run audit of privacy.fit: it sees the noise that ran, not the noise
accounted.

One full-batch step is a Gaussian mechanism of known sigma, so the canaries' scores are
N(1, sigma^2) (in) and N(0, sigma^2) (out) in units of C / N: the Gaussian-DP fit must
find mu = 1 / sigma within its standard error, and the one-run bound must stay below the
accounted epsilon, unless the noise that ran is smaller than the plan's (the injected
fault).
"""

import dataclasses
import math

import flax.linen as nn
import jax
import numpy as np
import optax
import pytest

from privrl_jax import privacy
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit import draw_inclusion, one_run_epsilon_from_counts

M, K, DELTA = 10_000, 100, 1e-5
# Standard error of mu_hat = (mean_in - mean_out) / sd with M/2 canaries on each side.
MU_SE = math.sqrt(4 / M)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _HalvedNoisePlan(privacy.DPPlan):
    """The injected fault: the noise that runs is half the noise the plan accounts."""

    @property
    def noise_stds(self):
        return tuple(s / 2 for s in super().noise_stds)


def _problem():
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    model = nn.Dense(1)
    loss = lambda p, item: (model.apply(p, item[0])[0] - item[1]) ** 2  # noqa: E731
    return loss, model.init(jax.random.key(0), x[0]), (x[:, None], x.sum(1)[:, None])


def _audit(plan, *, seed=1, raise_on_violation=True, m=M, k=K):
    loss, params, data = _problem()
    return audit.audit_fit(
        plan,
        loss,
        optax.sgd(0.01),
        params,
        data,
        num_canaries=m,
        k_positive=k,
        delta=DELTA,
        seed=seed,
        secret=privacy.DPSecret.from_seed(seed),
        raise_on_violation=raise_on_violation,
    )


def _full_batch(sigma, cls=privacy.DPPlan):
    sampler = privacy.FullBatchSampler(dataset_size=64, microbatch_size=512)
    return cls(sampler=sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=sigma)


def test_a_correct_gaussian_step_is_audited_below_its_epsilon_and_its_mu_is_one_over_sigma():  # noqa: E501
    res = _audit(_full_batch(2.0))
    assert 0 < res.epsilon_demonstrated <= res.epsilon_accounted
    assert abs(res.gdp.mu - 0.5) < 6 * MU_SE
    assert res.included == int(draw_inclusion(1, M).sum())
    assert "epsilon demonstrated >=" in res.line()


def test_halved_noise_is_caught():
    plan = _HalvedNoisePlan(
        sampler=_full_batch(2.0).sampler,
        l2_clip_norm=1.0,
        steps=1,
        noise_multiplier=2.0,
    )
    assert (
        plan.epsilon(DELTA).epsilon == _full_batch(2.0).epsilon(DELTA).epsilon
    )  # the ledger's view
    with pytest.raises(audit.PrivacyAuditError, match="privacy bug"):
        _audit(plan)
    res = _audit(plan, raise_on_violation=False)
    # What ran is sigma = 1: mu = 1, ten standard errors from the accounted 0.5.
    assert abs(res.gdp.mu - 1.0) < 6 * MU_SE
    assert res.gdp.mu_lower_bound > 0.5 + 4 * MU_SE


def test_without_noise_the_bound_is_the_most_m_canaries_can_show():
    res = _audit(_full_batch(0.0), m=1_000, k=10)
    assert res.epsilon_accounted == math.inf
    assert res.audit.correct == res.audit.guesses == 20
    most = one_run_epsilon_from_counts(1_000, 20, 20, delta=DELTA)
    assert res.epsilon_demonstrated == pytest.approx(most, rel=1e-9)


def test_a_calibrated_multi_step_poisson_run_audits_below_epsilon_one():
    sampler = privacy.PoissonSampler(
        dataset_size=64, sampling_rate=0.25, microbatch_size=512
    )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=10).calibrate(
        1.0, DELTA
    )
    res = _audit(plan, m=2_000, k=20)
    assert res.epsilon_accounted <= 1.0
    assert res.epsilon_demonstrated <= res.epsilon_accounted


def test_privacy_audit_command_audits_every_mechanism_a_ledger_records(tmp_path):
    """`privrl privacy audit RUN_DIR`: each recorded DP-SGD plan and Gaussian mechanism
    is rerun
    with canaries and shown below its accounted epsilon; a non-private entry is listed,
    unaudited."""
    import json

    import dp_accounting
    from typer.testing import CliRunner

    from privrl_jax.cli.main import app

    sampler = privacy.PoissonSampler(
        dataset_size=64, sampling_rate=0.25, microbatch_size=64
    )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=6).calibrate(
        2.0, DELTA
    )
    mech = privacy.GaussianMechanism(l2_sensitivity=3.0, noise_multiplier=1.0)
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="toy",
        dataset_size=64,
        target_epsilon=50.0,
        target_delta=DELTA,
    )
    led.record(plan.step_event(), what="DP-SGD step", count=6, params=plan.describe())
    led.record(mech.event(), what="POOL statistics", params=mech.describe())
    led.record(dp_accounting.NonPrivateDpEvent(), what="non-private", params={})
    two = privacy.DPPlan(sampler=sampler, l2_clip_norm=(1.0, 0.5), steps=6).calibrate(
        2.0, DELTA
    )
    led.record(two.step_event(), what="two blocks", count=6, params=two.describe())
    res = CliRunner().invoke(
        app, ["privacy", "audit", str(tmp_path), "--canaries", "1000"]
    )
    assert res.exit_code == 0, res.output
    assert "epsilon demonstrated >=" in res.output and "not audited" in res.output
    out = json.loads((tmp_path / "audit" / "epsilon_lower_bound.json").read_text())
    sgd, gauss, nonpriv, blocks = out["rows"]
    # Two clipped blocks: canaries in the first block alone, against the whole plan's
    # epsilon.
    assert blocks["audited"] and "block 1 of 2" in blocks["blocks"]
    assert blocks["epsilon_accounted"] == pytest.approx(
        two.epsilon(DELTA).epsilon, rel=1e-9
    )
    assert 0 <= blocks["epsilon_demonstrated"] <= blocks["epsilon_accounted"]
    assert sgd["epsilon_accounted"] == pytest.approx(
        plan.epsilon(DELTA).epsilon, rel=1e-9
    )
    assert gauss["epsilon_accounted"] == pytest.approx(
        mech.epsilon(DELTA).epsilon, rel=1e-9
    )
    for row in (sgd, gauss):
        assert (
            row["audited"]
            and 0 <= row["epsilon_demonstrated"] <= row["epsilon_accounted"]
        )
        assert not row["violation"]
    assert not nonpriv["audited"]
    # The Gaussian mechanism's mu is what its sigma says (1 / sigma), within 6 standard
    # errors.
    assert abs(gauss["gaussian_dp_estimate"]["mu"] - 1.0) < 6 * math.sqrt(4 / 1000)


def test_the_ceiling_is_the_all_right_bound_and_matches_the_issue_numbers():
    # 10,000 canaries, 1% guessed each way: at most 3.91 at delta 1e-5, 1.73 at 1e-4.
    assert audit.one_run_epsilon_ceiling(10_000, 200, delta=1e-5) == pytest.approx(
        3.909, abs=5e-3
    )
    assert audit.one_run_epsilon_ceiling(10_000, 200, delta=1e-4) == pytest.approx(
        1.73, abs=5e-3
    )
    r = audit.one_run_epsilon_lower_bound(
        np.arange(100.0), np.arange(100) >= 50, delta=1e-5, k_positive=5
    )
    assert r.correct == r.guesses == 5
    assert r.epsilon_ceiling == r.epsilon_lower_bound
    assert r.auditable(r.epsilon_ceiling * 0.99) and not r.auditable(r.epsilon_ceiling)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _NoNoisePlan(privacy.DPPlan):
    """A run that adds no noise while its plan accounts sigma."""

    @property
    def noise_stds(self):
        return tuple(0.0 for _ in super().noise_stds)


def test_a_noiseless_run_accounted_above_the_ceiling_is_not_auditable_not_passed():
    # The issue's example: accounted at eps 4, no noise at all; m = 1,000 canaries can
    # show at most ~1.6, so nothing is flagged -- and the audit must say so.
    sampler = _full_batch(1.0).sampler
    sigma = _full_batch(1.0).calibrate(4.0, DELTA).noise_multiplier
    plan = _NoNoisePlan(
        sampler=sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=sigma
    )
    res = _audit(plan, m=1_000, k=10)
    assert res.audit.correct == res.audit.guesses  # every guess right: no noise ran
    assert res.epsilon_demonstrated == pytest.approx(res.epsilon_ceiling, rel=1e-9)
    assert res.epsilon_ceiling < res.epsilon_accounted
    assert not res.auditable and res.status == "not auditable at this size"
    assert "not auditable at this size" in res.line()
    assert res.to_dict()["status"] == "not auditable at this size"
    # the same size passes a plan accounted below its ceiling
    ok = _audit(_full_batch(4.0), m=1_000, k=10)
    assert ok.auditable and ok.status == "passed" and "passed" in ok.line()


def test_audit_fit_refuses_replace_one_plans():
    plan = privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=64),
        l2_clip_norm=1.0,
        steps=2,
        noise_multiplier=1.0,
    )
    with pytest.raises(ValueError, match="replace-one"):
        _audit(plan, m=200, k=2)


def test_audit_ledger_reports_the_runs_accountant_and_the_ceiling(tmp_path):
    sampler = privacy.PoissonSampler(
        dataset_size=64, sampling_rate=0.25, microbatch_size=64
    )
    plan = privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=4).calibrate(
        1.0, DELTA, "pld"
    )
    led = privacy.Ledger.open(
        tmp_path,
        dataset_id="toy",
        dataset_size=64,
        target_epsilon=50.0,
        target_delta=DELTA,
    )
    led.record(plan.step_event(), what="DP-SGD step", count=4, params=plan.describe())
    (row,) = audit.audit_ledger(led, num_canaries=1_000, accountant="pld")
    assert row["accountant"] == "pld"
    assert row["epsilon_accounted"] == pytest.approx(
        plan.epsilon(DELTA, "pld").epsilon, rel=1e-9
    )
    assert row["epsilon_accounted"] < plan.epsilon(DELTA, "rdp").epsilon
    assert row["epsilon_ceiling"] == pytest.approx(
        audit.one_run_epsilon_ceiling(1_000, 20, delta=DELTA), rel=1e-9
    )
    assert row["status"] == "passed" and row["auditable"]


def test_the_likelihood_score_is_the_per_step_log_likelihood_ratio():
    x = np.linspace(-3, 4, 15)
    q, sigma = 0.01, 1.3
    f = audit.canary_step_score("likelihood", sampling_rate=q, noise_multiplier=sigma)
    # naive reference: log of the mixture density ratio (1 - q) N(0) + q N(1) over N(0)
    dens = lambda mu: np.exp(-((x - mu) ** 2) / (2 * sigma**2))  # noqa: E731
    want = np.log(((1 - q) * dens(0.0) + q * dens(1.0)) / dens(0.0))
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5, atol=1e-6)
    # full batch: an affine map of x (the sum's ranking); no noise: the sum itself
    full = audit.canary_step_score("likelihood", sampling_rate=1.0, noise_multiplier=2)
    np.testing.assert_allclose(np.asarray(full(x)), (x - 0.5) / 4, rtol=1e-6)
    plain = audit.canary_step_score("likelihood", sampling_rate=q, noise_multiplier=0)
    np.testing.assert_array_equal(np.asarray(plain(x)), x)
    with pytest.raises(ValueError):
        audit.canary_step_score("max", sampling_rate=q, noise_multiplier=1.0)
