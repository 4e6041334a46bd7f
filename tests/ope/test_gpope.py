"""GPOPE on the DP plan: clipping, noise, sampling, accounting, trials, Theorem 1."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting import rdp

from privrl_jax import ope, privacy
from privrl_jax.ope._gpope import IndexSchedule, replace_one_target, trial_seeds
from privrl_jax.ope._gtd2 import weighted_transition_direction, with_weights

S, M, T = 5, 200, 20
TARGET = ope.treatment_policy([0.9, 0.8, 0.6, 0.4, 0.2])
BEHAVIOUR = ope.treatment_policy([0.3] * S)


@pytest.fixture(scope="module")
def data():
    col = ope.collect(
        jax.random.key(0),
        ope.medical_chain(S),
        BEHAVIOUR,
        TARGET,
        ope.one_hot_features(S),
        num_trajectories=M,
        max_length=T,
    )
    return col.data


def _uniform_plan(sigma=None, h=0.1, steps=50, m=M):
    return privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=m),
        l2_clip_norm=h,
        steps=steps,
        noise_multiplier=sigma,
    )


def _poisson_plan(sigma=None, h=0.1, steps=50, m=M, q=0.05):
    return privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=m, sampling_rate=q, microbatch_size=1
        ),
        l2_clip_norm=h,
        steps=steps,
        noise_multiplier=sigma,
    )


def _long_trajectory(length, n=S, scale=1e3):
    rng = np.random.default_rng(3)
    tr = ope.Transitions(
        phi_tm1=jnp.asarray(rng.normal(size=(1, length, n)), jnp.float32),
        r_t=jnp.asarray(scale * rng.normal(size=(1, length)), jnp.float32),
        discount_t=jnp.full((1, length), 0.9),
        phi_t=jnp.asarray(rng.normal(size=(1, length, n)), jnp.float32),
        rho_tm1=jnp.asarray(rng.uniform(0, 5, size=(1, length)), jnp.float32),
    )
    return tr, jnp.ones((1, length), bool)


@pytest.mark.parametrize("norms", [0.1, (0.1, 0.05)])
def test_one_long_trajectory_moves_the_sum_by_at_most_its_clip_norm(norms):
    length = 1000
    sigma = 1.0 if isinstance(norms, float) else (1.0, 1.0)
    plan = _poisson_plan(sigma=sigma, h=norms)
    fn = plan.clipped_sum(weighted_transition_direction)
    base, base_mask = _long_trajectory(length)
    base = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x * 0.5]), base)
    base_mask = jnp.concatenate([base_mask, base_mask])
    extra, extra_mask = _long_trajectory(length, scale=1e6)
    params = (jnp.ones(S), -jnp.ones(S))

    @jax.jit
    def total(tr, mask):
        out, _ = fn(params, with_weights(tr, mask, "mean"), mask)
        return tuple(out) if plan.num_blocks > 1 else (jnp.concatenate(out),)

    with_extra = total(
        jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), base, extra),
        jnp.concatenate([base_mask, extra_mask]),
    )
    without = total(base, base_mask)
    for got, ref, h in zip(with_extra, without, plan.l2_clip_norms):
        moved = float(jnp.linalg.norm(got - ref))
        # The extra trajectory's direction is huge, so it is clipped to exactly h.
        assert h * (1 - 1e-4) <= moved <= h * (1 + 1e-5)


def test_uniform_one_is_replace_one_sampled_without_replacement():
    plan = _uniform_plan(sigma=1.3)
    event = plan.step_event()
    assert isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent)
    assert (event.source_dataset_size, event.sample_size) == (M, 1)
    assert plan.neighboring is privacy.Neighboring.REPLACE_ONE
    assert plan.sensitivities == (0.2,)
    assert plan.noise_stds == pytest.approx((2 * 1.3 * 0.1,))
    assert event.event == dp_accounting.GaussianDpEvent(1.3)
    # dp-accounting's PLD accountant does not support this event: RDP only.
    with pytest.raises(Exception):  # noqa: B017 (dp-accounting raises its own error types)
        plan.epsilon(1e-5, "pld")
    schedule = ope.sample_schedule(plan, 0)
    assert schedule.indices.shape == (50, 1) and schedule.mask.all()


@pytest.mark.parametrize(
    "plan_fn, sampled, relation",
    [
        (
            _uniform_plan,
            lambda s: dp_accounting.SampledWithoutReplacementDpEvent(M, 1, s),
            dp_accounting.NeighboringRelation.REPLACE_ONE,
        ),
        (
            _poisson_plan,
            lambda s: dp_accounting.PoissonSampledDpEvent(0.05, s),
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        ),
    ],
)
def test_calibrated_sigma_reproduces_epsilon_through_dp_accounting(
    plan_fn, sampled, relation
):
    eps, delta, steps = 1.0, 1e-5, 2000
    plan = plan_fn(steps=steps).calibrate(eps, delta)
    event = dp_accounting.SelfComposedDpEvent(
        sampled(dp_accounting.GaussianDpEvent(plan.noise_multiplier)), steps
    )
    got = (
        rdp.RdpAccountant(neighboring_relation=relation)
        .compose(event)
        .get_epsilon(delta)
    )
    assert 0.97 * eps <= got <= eps


def test_poisson_schedule_keeps_every_batch_whole_and_empty_steps():
    plan = _poisson_plan(sigma=1.0, q=0.01, steps=300)
    schedule = ope.sample_schedule(plan, 7)
    # Row t is the DP loop's batch of step t (privacy.fit draws plan.sample(seed, t)).
    for t in range(plan.steps):
        b = plan.sample(7, t)
        np.testing.assert_array_equal(
            schedule.indices[t][schedule.mask[t]], b.indices[b.mask]
        )
    sizes = schedule.mask.sum(1)
    assert (
        schedule.indices.shape[1] == sizes.max()
    )  # padded to the largest, nothing cut
    assert (
        sizes == 0
    ).sum() > 10  # q m = 2: e^-2 of the steps are empty, and stay steps
    full = ope.sample_schedule(plan, 7, pad_to="dataset")
    assert full.indices.shape == (300, M)
    np.testing.assert_array_equal(full.mask.sum(1), sizes)


@pytest.mark.parametrize("plan", [_uniform_plan(sigma=0.7), _poisson_plan(sigma=0.7)])
def test_gpope_noise_has_the_plans_std(data, plan):
    # Zero rewards and zero start: B = 0, so one step with beta = 1 is -noise / (q m).
    zero = data._replace(
        transitions=data.transitions._replace(r_t=data.transitions.r_t * 0)
    )
    plan = privacy.DPPlan(
        sampler=plan.sampler, l2_clip_norm=0.1, steps=1, noise_multiplier=0.7
    )
    trials = 1000
    schedules = ope.sample_schedule(plan, 0, trials=trials)
    res = ope.gpope_trials(
        plan,
        zero,
        schedules,
        jax.random.split(jax.random.key(0), trials),
        step_size=ope.StepSize(1.0),
    )
    x = np.concatenate([np.asarray(res.theta).ravel(), np.asarray(res.w).ravel()])
    expected = plan.noise_stds[0] / plan.expected_batch_size
    assert abs(x.std() / expected - 1) < 6 / math.sqrt(2 * x.size)


def test_gpope_without_noise_or_clipping_is_gtd2(data):
    plan = _uniform_plan(sigma=0.0, h=1e6, steps=300)
    schedule = ope.sample_schedule(plan, 1)
    step = ope.StepSize(2.0, decay_steps=100.0)
    res = ope.gpope(plan, data, schedule, jax.random.key(0), step_size=step)
    theta, w = ope.gtd2(data, schedule, step_size=step)
    np.testing.assert_allclose(res.theta, theta, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res.w, w, rtol=1e-5, atol=1e-7)
    assert float(res.clipped_fraction) == 0.0
    assert float(jnp.linalg.norm(theta)) > 0.1  # it moved


@pytest.mark.parametrize("plan_fn", [_uniform_plan, _poisson_plan])
def test_vmapped_trials_equal_a_python_loop(data, plan_fn):
    plan = plan_fn(sigma=0.8, steps=40)
    keys = jax.random.split(jax.random.key(5), 3)
    schedules = ope.sample_schedule(plan, 11, trials=3)
    step = ope.StepSize(1.0, decay_steps=10.0, power=0.5)
    batched = ope.gpope_trials(plan, data, schedules, keys, step_size=step)
    for k in range(3):
        one = IndexSchedule(schedules.indices[k], schedules.mask[k])
        res = ope.gpope(plan, data, one, keys[k], step_size=step)
        np.testing.assert_allclose(batched.theta[k], res.theta, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batched.w[k], res.w, rtol=1e-5, atol=1e-6)
    # Different keys and schedules give different trials.
    assert float(jnp.abs(batched.theta[0] - batched.theta[1]).max()) > 1e-3


@pytest.mark.parametrize("plan_fn", [_uniform_plan, _poisson_plan])
def test_trials_with_their_own_data_equal_a_python_loop(data, plan_fn):
    # Trial k runs on its own data set: here the shared one with rewards scaled by
    # k + 1, so a run that read another trial's data would differ.
    plan = plan_fn(sigma=0.8, steps=40)
    keys = jax.random.split(jax.random.key(6), 3)
    schedules = ope.sample_schedule(plan, 12, trials=3)
    step = ope.StepSize(1.0, decay_steps=10.0, power=0.5)
    sets = [
        data._replace(
            transitions=data.transitions._replace(r_t=data.transitions.r_t * (k + 1))
        )
        for k in range(3)
    ]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *sets)
    batched = ope.gpope_trials(
        plan, stacked, schedules, keys, step_size=step, per_trial_data=True
    )
    for k in range(3):
        one = IndexSchedule(schedules.indices[k], schedules.mask[k])
        res = ope.gpope(plan, sets[k], one, keys[k], step_size=step)
        np.testing.assert_allclose(batched.theta[k], res.theta, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batched.w[k], res.w, rtol=1e-5, atol=1e-6)
    shared = ope.gpope_trials(plan, data, schedules, keys, step_size=step)
    assert float(jnp.abs(batched.theta[2] - shared.theta[2]).max()) > 1e-3
    np.testing.assert_allclose(batched.theta[0], shared.theta[0], rtol=1e-5, atol=1e-6)


def test_trials_are_the_schedules_of_their_trial_seeds():
    plan = _poisson_plan(sigma=1.0, steps=6)
    seeds = trial_seeds(11, 3)
    assert len(set(seeds)) == 3 and seeds[0] not in trial_seeds(12, 3)
    both = ope.sample_schedule(plan, 11, trials=3)
    for k, seed in enumerate(seeds):
        one = ope.sample_schedule(plan, seed)
        for t in range(plan.steps):
            np.testing.assert_array_equal(
                both.indices[k, t][both.mask[k, t]], one.indices[t][one.mask[t]]
            )


def test_fit_of_gpope_method_is_gpope_bit_for_bit(data):
    # The DP loop running the library's method, with the secret's seed and key, makes
    # the release of the scan on sample_schedule: one update, one stream. Microbatch
    # size 1 splits every batch (~10 units) into ~10 microbatches, which the scan adds
    # in the loop's order. (The pipeline tests check both samplers end to end.)
    plan = _poisson_plan(sigma=0.8, steps=12)
    step = ope.StepSize(1.0, decay_steps=5.0)
    secret = privacy.DPSecret.from_seed(4)
    fitted = privacy.fit(
        plan,
        ope.gpope_method(plan, step),
        ope.gpope_units(data, "mean"),
        ope.gpope_init(S),
        secret=secret,
        item_mask=data.mask,
    ).state
    schedule = ope.sample_schedule(plan, secret.sampling_seed)
    res = ope.gpope(
        plan, data, schedule, secret.noise_key, step_size=step, normalization="mean"
    )
    assert int(fitted.step) == plan.steps
    np.testing.assert_array_equal(np.asarray(fitted.theta), np.asarray(res.theta))
    np.testing.assert_array_equal(np.asarray(fitted.w), np.asarray(res.w))
    assert float(jnp.abs(res.theta).max()) > 1e-3  # it moved


def test_schedule_length_must_match_the_plan(data):
    plan = _uniform_plan(sigma=1.0, steps=10)
    short = ope.sample_schedule(_uniform_plan(sigma=1.0, steps=5), 0)
    with pytest.raises(ValueError, match="accounts for"):
        ope.gpope(plan, data, short, jax.random.key(0), step_size=ope.StepSize(0.1))


def test_theorem1_sigma_solves_the_moments_bound():
    eps, delta, steps, m = 1.0, 1e-5, 10_000, 1000
    bound = ope.theorem1_sigma(eps, delta, steps=steps, dataset_size=m)
    # delta = min_lambda exp(N 4 lambda (lambda + 1) / (m^2 sigma^2) - lambda eps) at
    # equality.
    lam = np.linspace(0.01, 200, 2_000_001)
    log_delta = np.min(
        steps * 4 * lam * (lam + 1) / (m * bound.paper_sigma) ** 2 - lam * eps
    )
    assert log_delta == pytest.approx(math.log(delta), rel=1e-6)
    assert (
        bound.noise_multiplier == bound.paper_sigma / 2
    )  # sensitivity 2h, noise std sigma h
    # Small epsilon: c2 = 4, sigma -> 4 sqrt(N log(1/delta)) / (m eps).
    tiny = ope.theorem1_sigma(1e-4, delta, steps=steps, dataset_size=m)
    assert tiny.paper_sigma / tiny.asymptotic_paper_sigma == pytest.approx(
        1.0, rel=1e-4
    )
    assert bound.asymptotic_paper_sigma == pytest.approx(
        4 * math.sqrt(steps * math.log(1e5)) / m, rel=1e-12
    )


def test_replace_one_target_is_group_privacy_for_two_steps():
    eps_ar, delta_ar = replace_one_target(2.0, 1e-5)
    assert eps_ar == 1.0 and delta_ar == pytest.approx(1e-5 / (1 + math.e), rel=1e-12)
    # Where replace-one is exact (one Gaussian release of a sum of norm-C units:
    # sensitivity 2C), the group-privacy route asks for at least the exact replace-one
    # noise, never less.
    for eps in (0.5, 1.0, 10.0):
        e2, d2 = replace_one_target(eps, 1e-5)
        via_group = dp_accounting.pld.accountant.get_smallest_gaussian_noise(
            dp_accounting.pld.common.DifferentialPrivacyParameters(e2, d2),
            sensitivity=1.0,
        )
        exact = dp_accounting.pld.accountant.get_smallest_gaussian_noise(
            dp_accounting.pld.common.DifferentialPrivacyParameters(eps, 1e-5),
            sensitivity=2.0,
        )
        assert via_group >= exact
    # A Poisson plan calibrated to the target spends eps' at delta' under add/remove
    # (RDP).
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=1000, sampling_rate=0.05, microbatch_size=64
        ),
        l2_clip_norm=1.0,
        steps=200,
    ).calibrate(eps_ar, delta_ar, "rdp")
    assert plan.neighboring is privacy.Neighboring.ADD_OR_REMOVE_ONE
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            0.05, dp_accounting.GaussianDpEvent(plan.noise_multiplier)
        ),
        200,
    )
    spent = rdp.RdpAccountant().compose(event).get_epsilon(delta_ar)
    assert 0.97 * eps_ar <= spent <= eps_ar
    with pytest.raises(ValueError):
        replace_one_target(0.0, 1e-5)


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
@pytest.mark.parametrize("plan_fn", [_uniform_plan, _poisson_plan])
def test_gpope_jitted_equals_gpope_run_op_by_op(data, plan_fn):
    """The core's pure function gives the same numbers compiled and not (issue 22):
    XLA may fuse and reorder float ops, so equal to float32 rounding, not bitwise."""
    m = 40  # op by op is slow: a few trajectories and steps
    small = jax.tree.map(lambda x: x[:m], data)
    plan = plan_fn(
        sigma=0.8, steps=6, m=m, **({} if plan_fn is _uniform_plan else {"q": 0.1})
    )
    schedule = ope.sample_schedule(plan, 4)
    step = ope.StepSize(1.0, decay_steps=10.0)
    jitted = ope.gpope(plan, small, schedule, jax.random.key(2), step_size=step)
    with jax.disable_jit():
        eager = ope.gpope(plan, small, schedule, jax.random.key(2), step_size=step)
    assert float(jnp.linalg.norm(jitted.theta)) > 0  # it moved
    for a, b in ((jitted.theta, eager.theta), (jitted.w, eager.w)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert float(jitted.clipped_fraction) == pytest.approx(
        float(eager.clipped_fraction), rel=1e-6
    )
