"""The DP plan: the noise that runs and the epsilon that is reported come from the same
fields."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from dp_accounting import rdp

from privrl_jax import privacy
from privrl_jax.privacy import DPPlan, Neighboring
from privrl_jax.privacy._accounting import dpsgd_epsilon, dpsgd_event
from privrl_jax.privacy._aggregation import add_gaussian_noise, add_noise, dpsgd
from privrl_jax.privacy._clipping import clipped_grad


def _poisson(n=10_000, q=0.01, mb=64, capacity=None):
    return privacy.PoissonSampler(
        dataset_size=n, sampling_rate=q, microbatch_size=mb, capacity=capacity
    )


def _rdp_eps(event, delta, relation):
    acc = rdp.RdpAccountant(neighboring_relation=relation)
    return acc.compose(event).get_epsilon(delta)


def test_replace_one_example_noise_std_two_and_epsilon_as_dp_accounting():
    # The example: sigma = 1, C = 1, one of 1000 uniformly, 10^4 steps.
    plan = DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=1000),
        l2_clip_norm=1.0,
        steps=10_000,
        noise_multiplier=1.0,
    )
    assert plan.neighboring is Neighboring.REPLACE_ONE
    assert plan.sensitivities == (2.0,) and plan.noise_stds == (2.0,)
    # Noise measured on a zero clipped sum of d = 2e6 coordinates: std 2 within 6 /
    # sqrt(2d).
    d = 2_000_000
    noisy = plan.privatize(
        jnp.zeros(d), jax.random.key(0)
    )  # expected batch 1: no rescaling
    assert abs(float(jnp.std(noisy)) / 2.0 - 1) < 6 / math.sqrt(2 * d)
    # The reported epsilon is dp-accounting's for GaussianDpEvent(sigma = std /
    # sensitivity = 1).
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            1000, 1, dp_accounting.GaussianDpEvent(1.0)
        ),
        10_000,
    )
    expected = _rdp_eps(event, 1e-5, dp_accounting.NeighboringRelation.REPLACE_ONE)
    assert plan.epsilon(1e-5).epsilon == pytest.approx(expected, rel=1e-12)
    assert plan.epsilon(1e-5).epsilon == pytest.approx(1.04, abs=0.01)
    # dpsgd_epsilon speaks the same sigma, and the optax noise transform adds the same
    # std.
    assert dpsgd_epsilon(
        1.0, 1e-3, 10_000, 1e-5, sampling="uniform_one", dataset_size=1000
    ).epsilon == pytest.approx(expected, rel=1e-12)
    tx = add_gaussian_noise(
        1.0, 1.0, jax.random.key(1), neighboring=Neighboring.REPLACE_ONE
    )
    upd, _ = tx.update(jnp.zeros(d), tx.init(jnp.zeros(d)))
    assert abs(float(jnp.std(upd)) / 2.0 - 1) < 6 / math.sqrt(2 * d)


@pytest.mark.parametrize(
    "accountant", ["rdp", pytest.param("pld", marks=pytest.mark.slow)]
)
def test_calibration_round_trip(accountant):
    plan = DPPlan(sampler=_poisson(), l2_clip_norm=0.5, steps=500).calibrate(
        2.0, 1e-6, accountant
    )
    eps = plan.epsilon(1e-6, accountant).epsilon
    assert 0.97 * 2.0 <= eps <= 2.0
    # Recomputed independently from the sigma alone with dp-accounting's own event.
    event = dpsgd_event(plan.noise_multiplier, 0.01, 500)
    assert privacy.compute_epsilon(
        event, 1e-6, accountant=accountant
    ).epsilon == pytest.approx(eps, rel=1e-9)
    assert plan.noise_stds == (plan.noise_multiplier * 0.5,)


def test_uniform_one_plan_is_never_accounted_as_poisson():
    sampler = privacy.UniformOneSampler(dataset_size=1000)
    plan = DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=100, noise_multiplier=2.0)
    step = plan.step_event()
    assert isinstance(step, dp_accounting.SampledWithoutReplacementDpEvent)
    assert (step.source_dataset_size, step.sample_size) == (1000, 1)
    with pytest.raises(ValueError, match="replace-one only"):
        DPPlan(
            sampler=sampler,
            l2_clip_norm=1.0,
            steps=100,
            neighboring=Neighboring.ADD_OR_REMOVE_ONE,
        )
    with pytest.raises(ValueError, match="add/remove-one"):
        DPPlan(
            sampler=_poisson(),
            l2_clip_norm=1.0,
            steps=10,
            neighboring=Neighboring.REPLACE_ONE,
        )
    with pytest.raises(ValueError, match="cannot be accounted as Poisson"):
        DPPlan(sampler=object(), l2_clip_norm=1.0, steps=10)
    # Same sigma, same rate: the fixed-size plan's noise is twice the Poisson plan's
    # (sensitivity 2C), and its epsilon is dp-accounting's replace-one analysis of
    # sampling without replacement.
    poisson = DPPlan(
        sampler=_poisson(1000, 1 / 1000, 1),
        l2_clip_norm=1.0,
        steps=100,
        noise_multiplier=2.0,
    )
    assert plan.noise_stds == (4.0,) and poisson.noise_stds == (2.0,)
    expected = _rdp_eps(
        plan.event(), 1e-5, dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    assert plan.epsilon(1e-5).epsilon == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "sampler, event_type, ebs",
    [
        (_poisson(), dp_accounting.PoissonSampledDpEvent, 100.0),
        (
            _poisson(capacity=150),
            dp_accounting.TruncatedSubsampledGaussianDpEvent,
            100.0,
        ),
        (
            privacy.UniformOneSampler(dataset_size=10_000),
            dp_accounting.SampledWithoutReplacementDpEvent,
            1.0,
        ),
        (
            privacy.FullBatchSampler(dataset_size=10_000, microbatch_size=500),
            dp_accounting.GaussianDpEvent,
            10_000.0,
        ),
    ],
)
def test_event_and_normaliser_follow_the_sampler(sampler, event_type, ebs):
    plan = DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=20, noise_multiplier=1.5)
    assert isinstance(plan.step_event(), event_type)
    assert plan.expected_batch_size == pytest.approx(ebs)
    assert plan.event() == dp_accounting.SelfComposedDpEvent(plan.step_event(), 20)
    # The privatized mean is (sum + noise) / expected batch size.
    x = jnp.full(1000, 3.0)
    out = plan.privatize(x, jax.random.key(0))
    noise = add_noise(jnp.zeros(1000), jax.random.key(0), plan.noise_stds[0])
    np.testing.assert_allclose(out, (x + noise) / ebs, rtol=1e-6)


def test_two_blocks_are_one_gaussian_with_the_effective_sigma():
    plan = DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=100, microbatch_size=10),
        l2_clip_norm=(1.0, 3.0),
        steps=1,
        noise_multiplier=(2.0, 4.0),
    )
    sigma_eff = 1 / math.sqrt(2.0**-2 + 4.0**-2)
    assert plan.effective_noise_multiplier == pytest.approx(sigma_eff)
    assert plan.noise_stds == (2.0, 12.0)
    # One unit moving block 1 by C1 and block 2 by C2 is, after whitening the noise, a
    # shift of norm sqrt((C1 / 2)^2 + (C2 / 12)^2) = 1 / sigma_eff under unit noise: one
    # Gaussian.
    shift = math.hypot(1.0 / plan.noise_stds[0], 3.0 / plan.noise_stds[1])
    assert 1 / shift == pytest.approx(sigma_eff)
    assert plan.step_event() == dp_accounting.GaussianDpEvent(pytest.approx(sigma_eff))
    eps = plan.epsilon(1e-5).epsilon
    # Tighter than composing the blocks as two mechanisms, looser than the quieter block
    # alone.
    two = privacy.compute_epsilon(
        dp_accounting.ComposedDpEvent(
            [dp_accounting.GaussianDpEvent(2.0), dp_accounting.GaussianDpEvent(4.0)]
        ),
        1e-5,
    ).epsilon
    one = privacy.compute_epsilon(dp_accounting.GaussianDpEvent(2.0), 1e-5).epsilon
    assert one < eps <= two + 1e-9
    # Calibration keeps the 1:2 ratio and meets the target.
    cal = plan.calibrate(1.0, 1e-5)
    assert cal.noise_multipliers[1] / cal.noise_multipliers[0] == pytest.approx(2.0)
    assert cal.epsilon(1e-5).epsilon <= 1.0
    # The noise of each block has its own std.
    a, b = plan.privatize((jnp.zeros(200_000), jnp.zeros(200_000)), jax.random.key(3))
    assert float(jnp.std(a)) * 100 == pytest.approx(2.0, rel=0.01)
    assert float(jnp.std(b)) * 100 == pytest.approx(12.0, rel=0.01)


def test_blocks_of_a_clipped_sum_move_by_at_most_their_clip_norms():
    plan = DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=8, microbatch_size=8),
        l2_clip_norm=(1.0, 0.5),
        steps=1,
        noise_multiplier=(1.0, 1.0),
    )
    fn = plan.clipped_sum(lambda w, x: (x * w, jnp.stack([x.sum(), -x.sum()])))
    xs = (
        jax.random.normal(jax.random.key(0), (8, 3, 4)) * 10
    )  # 8 units x 3 items x 4 dims
    mask = jnp.ones((8, 3), bool).at[2, 1:].set(False)
    w = jnp.ones(4)
    (a, b), m = fn(w, xs, mask)
    # Naive reference: per unit, sum its valid items, clip each block, sum units.
    ra, rb = np.zeros(4), np.zeros(2)
    for u in range(8):
        va = np.asarray((xs[u] * mask[u][:, None]).sum(0))
        vb = np.array([va.sum(), -va.sum()])
        ra += va * min(1, 1.0 / np.linalg.norm(va))
        rb += vb * min(1, 0.5 / np.linalg.norm(vb))
    np.testing.assert_allclose(a, ra, rtol=1e-5)
    np.testing.assert_allclose(b, rb, rtol=1e-5)
    assert m.per_unit_norms.shape == (8, 2)
    # Removing any one unit moves block i by at most C_i.
    for u in range(8):
        (a2, b2), _ = fn(w, xs, mask.at[u].set(False))
        assert float(jnp.linalg.norm(a - a2)) <= 1.0 * (1 + 1e-5)
        assert float(jnp.linalg.norm(b - b2)) <= 0.5 * (1 + 1e-5)


def test_clipped_fns_take_the_plans_clip_norm_and_a_foreign_one_is_refused():
    plan = DPPlan(sampler=_poisson(), l2_clip_norm=0.7, steps=10, noise_multiplier=1.0)
    loss = lambda w, x: jnp.sum(w * x)  # noqa: E731
    assert plan.clipped_grad(loss).l2_clip_norms == (0.7,)
    plan.check_clipped(plan.clipped_grad(loss))
    with pytest.raises(ValueError, match="plan.clipped_grad"):
        plan.check_clipped(clipped_grad(loss, l2_clip_norm=1.0))


def test_numpy_scalars_are_accepted():
    plan = DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=np.int64(5000),
            sampling_rate=np.float32(0.02),
            microbatch_size=np.int32(50),
        ),
        l2_clip_norm=np.float32(1.0),
        steps=np.int64(100),
        noise_multiplier=np.float64(1.1),
    )
    ref = dpsgd_epsilon(1.1, float(np.float32(0.02)), 100, 1e-5).epsilon
    assert plan.epsilon(np.float64(1e-5)).epsilon == pytest.approx(ref, rel=1e-12)
    assert (
        dpsgd_epsilon(np.float32(1.1), np.float64(0.02), np.int64(100), 1e-5).epsilon
        > 0
    )


def test_non_private_plan_and_bad_sigmas():
    plan = DPPlan(sampler=_poisson(), l2_clip_norm=1.0, steps=10).calibrate(
        math.inf, 1e-5
    )
    assert not plan.private and plan.noise_stds == (0.0,)
    assert isinstance(plan.step_event(), dp_accounting.NonPrivateDpEvent)
    assert plan.epsilon(1e-5).epsilon == math.inf
    with pytest.raises(ValueError, match="calibrate"):
        _ = DPPlan(sampler=_poisson(), l2_clip_norm=1.0, steps=10).noise_stds
    with pytest.raises(ValueError, match="one noise multiplier per block"):
        DPPlan(
            sampler=_poisson(), l2_clip_norm=(1.0, 1.0), steps=10, noise_multiplier=1.0
        )
    with pytest.raises(ValueError, match="one unnoised block"):
        DPPlan(
            sampler=_poisson(),
            l2_clip_norm=(1.0, 1.0),
            steps=10,
            noise_multiplier=(1.0, 0.0),
        )


def test_plan_dpsgd_equals_the_low_level_transform():
    plan = DPPlan(sampler=_poisson(), l2_clip_norm=0.5, steps=10, noise_multiplier=1.3)
    params = {"w": jnp.zeros(5), "b": jnp.zeros(())}
    grads = {"w": jnp.arange(5.0), "b": jnp.ones(())}
    a = plan._dpsgd(optax.sgd(1.0), key=jax.random.key(4))
    b = dpsgd(
        optax.sgd(1.0),
        noise_multiplier=1.3,
        l2_clip_norm=0.5,
        expected_batch_size=100.0,
        key=jax.random.key(4),
    )
    ua, _ = a.update(grads, a.init(params), params)
    ub, _ = b.update(grads, b.init(params), params)
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(x, y), ua, ub)


def test_a_unit_sensitivity_mechanism_releases_with_exactly_its_std():
    # POOL's and GPOPE-Balle's one-shot releases bind their noise std traced as the
    # sigma of a unit-sensitivity mechanism: the very noise of the primitive, bit for
    # bit, concrete (eager), traced (jit) and vmapped.
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones((), jnp.bfloat16)}
    key, std = jax.random.key(7), 0.731

    def via_mechanism(s, k, t):
        return privacy.GaussianMechanism(
            l2_sensitivity=1.0, noise_multiplier=s
        ).release(k, t)

    want = add_noise(tree, key, std)
    got = via_mechanism(std, key, tree)
    jax.tree.map(np.testing.assert_array_equal, got, want)
    traced = jax.jit(via_mechanism)(jnp.float32(std), key, tree)
    want_traced = jax.jit(add_noise)(tree, key, jnp.float32(std))
    jax.tree.map(np.testing.assert_array_equal, traced, want_traced)
    stds = jnp.asarray([0.5, 2.0])
    swept = jax.vmap(via_mechanism, (0, None, None))(stds, key, tree)
    want_swept = jax.vmap(add_noise, (None, None, 0))(tree, key, stds)
    jax.tree.map(np.testing.assert_array_equal, swept, want_swept)
    # And the std is the one asked for: the noise on zeros has that scale.
    zeros = jnp.zeros(200_000)
    noise = via_mechanism(std, jax.random.key(8), zeros)
    assert abs(float(jnp.std(noise)) / std - 1) < 0.01


def test_gaussian_mechanism_event_and_calibration():
    mech = privacy.GaussianMechanism(l2_sensitivity=3.0).calibrate(1.0, 1e-6)
    eps = mech.epsilon(1e-6).epsilon
    assert 0.99 <= eps <= 1.0
    assert mech.event() == dp_accounting.GaussianDpEvent(mech.noise_multiplier)
    assert mech.noise_std == pytest.approx(3.0 * mech.noise_multiplier)
    z = privacy.GaussianMechanism.from_zcdp(0.5, 2.0)
    assert z.noise_std == pytest.approx(2.0) and z.rho == pytest.approx(0.5)
    # Its RDP is exactly rho * alpha: dp-accounting agrees with the zCDP event of the
    # same rho.
    for delta in (1e-5, 1e-8):
        assert z.epsilon(delta).epsilon == pytest.approx(
            privacy.compute_epsilon(dp_accounting.ZCDpEvent(0.5), delta).epsilon,
            rel=0.02,
        )
    out = z.release(jax.random.key(0), {"counts": jnp.zeros(400_000)})
    assert float(jnp.std(out["counts"])) == pytest.approx(2.0, rel=0.01)
