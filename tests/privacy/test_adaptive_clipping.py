"""Quantile-based adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021).

The update against its closed form, the noise split z_Delta against its formula and
against the noise that fit actually adds, the event and epsilon against the fixed-clip
plan and dp-accounting (bit-equal), convergence to a known quantile with the noise off,
units of several items, the ghost path against the per-unit path, and the refusal.
"""

import dataclasses
import math

import dp_accounting
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from privrl_jax import privacy
from privrl_jax.privacy import _adaptive
from privrl_jax.privacy._aggregation import add_noise_blocks
from privrl_jax.privacy._plan import (
    effective_noise_multiplier,
    event_from_description,
    mechanism_from_description,
)


def _poisson_plan(sigma=1.0, adaptive=None, n=2000, q=0.05, steps=100, mb=32):
    sampler = privacy.PoissonSampler(
        dataset_size=n, sampling_rate=q, microbatch_size=mb
    )
    return privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=1.0,
        steps=steps,
        noise_multiplier=sigma,
        adaptive_clipping=adaptive,
    )


# ------------------------------------------------------------------- pure functions
def test_centred_count_and_update_equal_their_closed_forms():
    norms = jnp.array([0.5, 1.5, 1.0, 3.0, 0.2], jnp.float32)
    mask = jnp.array([True, True, True, False, True])
    # bits of the present units: [1, 0, 1, -, 1] (1.0 <= 1.0 counts as unclipped)
    count = _adaptive.centred_unclipped_count(norms, mask, 1.0)
    assert float(count) == (1 - 0.5) + (0 - 0.5) + (1 - 0.5) + (1 - 0.5)

    config = privacy.AdaptiveClipping(target_quantile=0.3, learning_rate=0.2)
    key = jax.random.key(7)
    new, frac = _adaptive.update_clip_norm(
        jnp.float32(2.0),
        jnp.float32(3.0),
        key,
        config=config,
        count_noise_std=0.7,
        expected_batch_size=10.0,
    )
    z = float(jax.random.normal(key, (), jnp.float32))
    b = (3.0 + 0.7 * z) / 10.0 + 0.5
    assert float(frac) == pytest.approx(b, rel=1e-6)
    assert float(new) == pytest.approx(2.0 * math.exp(-0.2 * (b - 0.3)), rel=1e-6)


def test_count_noise_off_moves_c_by_the_exact_fraction():
    config = privacy.AdaptiveClipping(target_quantile=0.5, learning_rate=0.5)
    # 8 of 8 units unclipped: b = 1, C shrinks by exp(-0.5 * 0.5)
    new, frac = _adaptive.update_clip_norm(
        jnp.float32(1.0),
        jnp.float32(4.0),
        jax.random.key(0),
        config=config,
        count_noise_std=0.0,
        expected_batch_size=8.0,
    )
    assert float(frac) == 1.0
    assert float(new) == pytest.approx(math.exp(-0.25), rel=1e-7)


# ------------------------------------------------------------ noise split, accounting
@pytest.mark.parametrize(
    ("sampler", "sigma_b", "z_b"),
    [
        # add/remove-one: the centred count moves by 1/2, so z_b = 2 sigma_b
        (
            privacy.PoissonSampler(
                dataset_size=2000, sampling_rate=0.05, microbatch_size=32
            ),
            None,  # the default: m / 20 = 100 / 20 = 5
            10.0,
        ),
        # replace-one: a unit's bit flips, the count moves by 1: z_b = sigma_b
        (privacy.FullBatchSampler(dataset_size=50, microbatch_size=10), 4.0, 4.0),
    ],
)
def test_z_delta_is_the_papers_split_and_the_pair_is_one_gaussian_of_z(
    sampler, sigma_b, z_b
):
    relation = (
        privacy.Neighboring.REPLACE_ONE
        if isinstance(sampler, privacy.FullBatchSampler)
        else None
    )
    z, c0 = 1.3, 0.7
    plan = privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=c0,
        steps=10,
        noise_multiplier=z,
        neighboring=relation,
        adaptive_clipping=privacy.AdaptiveClipping(count_noise_std=sigma_b),
    )
    z_delta = (z**-2 - z_b**-2) ** -0.5
    assert plan.gradient_noise_multiplier == pytest.approx(z_delta, rel=1e-14)
    assert plan.count_noise_std == pytest.approx(z_b * plan.sensitivities[0] / c0 / 2)
    assert plan.noise_stds == (pytest.approx(z_delta * plan.sensitivities[0]),)
    # Theorem 1: the gradient (z_Delta) and the count (z_b) together are one z
    assert effective_noise_multiplier(
        (plan.gradient_noise_multiplier, z_b)
    ) == pytest.approx(z, rel=1e-12)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_epsilon_is_bit_equal_to_the_fixed_clip_plans_and_dp_accountings(accountant):
    fixed = _poisson_plan(1.0)
    adaptive = _poisson_plan(1.0, privacy.AdaptiveClipping())
    assert adaptive.step_event() == fixed.step_event()
    assert adaptive.event() == fixed.event()
    eps = adaptive.epsilon(1e-5, accountant).epsilon
    assert eps == fixed.epsilon(1e-5, accountant).epsilon
    # dp-accounting directly: Poisson(q) of Gaussian(z), composed T times
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.0)),
        100,
    )
    acc = (
        dp_accounting.rdp.RdpAccountant()
        if accountant == "rdp"
        else dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    )
    want = acc.compose(event).get_epsilon(1e-5)
    assert eps == pytest.approx(want, rel=1e-2 if accountant == "pld" else 1e-12)
    # calibrated at one target, the two plans get the same z and the same epsilon
    a = _poisson_plan(None, privacy.AdaptiveClipping()).calibrate(2.0, 1e-5)
    f = _poisson_plan(None).calibrate(2.0, 1e-5)
    assert a.noise_multiplier == f.noise_multiplier
    assert a.epsilon(1e-5).epsilon == f.epsilon(1e-5).epsilon


def test_the_ledger_sees_the_plans_event_and_rebuilds_the_adaptive_plan():
    plan = _poisson_plan(1.0, privacy.AdaptiveClipping(target_quantile=0.7))
    params = plan.describe()
    assert params["adaptive_clipping"] == {
        "target_quantile": 0.7,
        "learning_rate": 0.2,
        "count_noise_std": 5.0,
    }
    assert event_from_description(params) == _poisson_plan(1.0).step_event()
    rebuilt = mechanism_from_description(params)
    assert rebuilt.adaptive_clipping == plan.adaptive_clipping
    assert rebuilt.gradient_noise_multiplier == plan.gradient_noise_multiplier


def test_an_impossible_split_is_refused_with_one_clear_error():
    # z_b = 2 sigma_b = 0.8 <= z = 1: the count alone would spend the whole budget
    with pytest.raises(ValueError, match="cannot split the noise"):
        _poisson_plan(1.0, privacy.AdaptiveClipping(count_noise_std=0.4))
    with pytest.raises(ValueError, match="cannot split the noise"):  # z_b == z
        _poisson_plan(1.0, privacy.AdaptiveClipping(count_noise_std=0.5))
    # calibration to a small epsilon (large z) meets the same refusal
    small = privacy.AdaptiveClipping(count_noise_std=1.0)  # z_b = 2
    with pytest.raises(ValueError, match="cannot split the noise"):
        _poisson_plan(None, small).calibrate(0.05, 1e-5)
    # the paths without a clip-norm state refuse an adaptive plan (never silently fixed)
    plan = _poisson_plan(1.0, privacy.AdaptiveClipping())
    with pytest.raises(NotImplementedError, match="privacy.fit"):
        plan._dpsgd(optax.sgd(0.1), key=jax.random.key(0))
    with pytest.raises(NotImplementedError, match="privacy.fit"):
        plan.privatize(jnp.zeros(3), jax.random.key(0))
    with pytest.raises(ValueError, match="target_quantile"):
        privacy.AdaptiveClipping(target_quantile=1.0)
    with pytest.raises(ValueError, match="one clip norm"):
        privacy.DPPlan(
            sampler=privacy.FullBatchSampler(dataset_size=10, microbatch_size=10),
            l2_clip_norm=(1.0, 1.0),
            steps=1,
            adaptive_clipping=privacy.AdaptiveClipping(),
        )


# ----------------------------------------------------------------------- through fit
class _Record:
    """A method state that keeps every released noisy mean (a zero gradient)."""

    @staticmethod
    def method(plan, dim, clip_method="vmap"):
        zero_loss = lambda p, item: 0.0 * jnp.sum(p * item)  # noqa: E731
        clipped = plan.clipped_grad(zero_loss, method=clip_method)

        def update(state, noisy):
            t, buf = state
            return t + 1, buf.at[t].set(noisy)

        init = (jnp.zeros((), jnp.int32), jnp.zeros((plan.steps, dim), jnp.float32))
        return privacy.DPMethod(clipped, lambda s: jnp.zeros(dim), update), init


def test_the_gradient_noise_fit_adds_is_z_delta_times_c_t():
    n, dim, steps = 200, 4000, 4
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=n, sampling_rate=0.5, microbatch_size=50
        ),
        l2_clip_norm=0.8,
        steps=steps,
        noise_multiplier=1.5,
        adaptive_clipping=privacy.AdaptiveClipping(learning_rate=0.5),
    )
    method, init = _Record.method(plan, dim)
    secret = privacy.DPSecret.from_seed(3)
    stats = privacy.LoopStats()
    out = privacy.fit(
        plan, method, jnp.zeros((n, 1, dim)), init, secret=secret, stats=stats
    )
    released = np.asarray(out.state[1]) * plan.expected_batch_size
    norms = [float(c) for c in stats.clip_norms]
    # zero gradients: every sampled unit is unclipped, so C shrinks every step
    assert norms[0] == pytest.approx(0.8) and all(
        b < a for a, b in zip(norms, norms[1:])
    )
    z_b = 2 * plan.count_noise_std
    z_delta = (1.5**-2 - z_b**-2) ** -0.5
    for t, c in enumerate(norms):
        # the clipped sum is 0, so the release is the noise itself: rebuild it exactly
        std = z_delta * c
        want = add_noise_blocks(
            (jnp.zeros(dim),), jax.random.fold_in(secret.noise_key, t), (std,)
        )[0]
        np.testing.assert_allclose(released[t], want, rtol=1e-5, atol=1e-6 * std)
        assert np.std(released[t]) == pytest.approx(std, rel=0.05)


def test_with_the_noise_off_c_converges_to_the_target_quantile():
    # Unit u's gradient is x_u (linear loss), with norms 4 (u + 1/2) / N: the
    # gamma-quantile of the norms is 4 gamma.
    n, gamma = 200, 0.3
    direction = np.random.default_rng(0).normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    x = (direction * (4.0 * (np.arange(n) + 0.5) / n)[:, None]).astype(np.float32)
    plan = privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=n, microbatch_size=n),
        l2_clip_norm=0.1,
        steps=150,
        noise_multiplier=0.0,
        adaptive_clipping=privacy.AdaptiveClipping(
            target_quantile=gamma, learning_rate=0.3
        ),
    )
    assert plan.count_noise_std == 0.0 and plan.noise_stds == (0.0,)
    loss = lambda w, item: jnp.sum(w * item)  # noqa: E731
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.0), jnp.zeros(3))
    stats = privacy.LoopStats()
    privacy.fit(plan, method, x[:, None], state, stats=stats)
    tail = np.array([float(c) for c in stats.clip_norms[-20:]])
    # the fraction at C is #(norms <= C) / N, which crosses gamma between the 60th
    # and 61st norms: C settles within one step (lr / N relative) of that interval
    lo, hi = 4.0 * 59.5 / n, 4.0 * 60.5 / n
    assert np.all(tail > lo * (1 - 0.3 / n) - 1e-6)
    assert np.all(tail < hi * (1 + 0.3 / n) + 1e-6)


def test_the_final_clip_norm_is_the_last_steps_update_in_closed_form(tmp_path):
    # Noise off, every unit's norm 0.1 < C: b = 1 at every step, so each step multiplies
    # C by exp(-lr (1 - gamma)) = exp(-0.25); after 3 steps C = exp(-0.75).
    x = np.full((4, 1, 1), 0.1, np.float32)
    plan = privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=4, microbatch_size=4),
        l2_clip_norm=1.0,
        steps=3,
        noise_multiplier=0.0,
        adaptive_clipping=privacy.AdaptiveClipping(
            target_quantile=0.5, learning_rate=0.5
        ),
    )
    loss = lambda w, item: jnp.sum(w * item)  # noqa: E731
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.0), jnp.zeros(1))
    ledger = privacy.Ledger.open(
        tmp_path, dataset_id="toy", dataset_size=4, target_epsilon=1e9, target_delta=0.1
    )
    rec = privacy.RunRecorder(
        privacy.Checkpoints(tmp_path / "ckpt"), ledger, what="step"
    )
    stats = privacy.LoopStats()
    privacy.fit(plan, method, x, state, recorder=rec, stats=stats)
    want = [1.0, math.exp(-0.25), math.exp(-0.5)]
    np.testing.assert_allclose([float(c) for c in stats.clip_norms], want, rtol=1e-6)
    assert stats.final_l2_clip_norm == pytest.approx(math.exp(-0.75), rel=1e-6)
    # A rerun that finds every step done runs none and still reads the final C (from
    # the checkpoint); a fixed clip norm has none.
    again = privacy.LoopStats()
    rec = privacy.RunRecorder(
        privacy.Checkpoints(tmp_path / "ckpt"), ledger, what="step"
    )
    privacy.fit(plan, method, x, state, recorder=rec, stats=again)
    assert again.steps == 0 and again.final_l2_clip_norm == stats.final_l2_clip_norm
    fixed = privacy.LoopStats()
    privacy.fit(
        dataclasses.replace(plan, adaptive_clipping=None), method, x, state, stats=fixed
    )
    assert fixed.final_l2_clip_norm is None


def test_units_of_several_items_give_one_bit_from_the_units_norm():
    # 6 units x 3 items; unit u's item gradients are v_u / k over its k valid items, so
    # every item norm is < C = 1 but the unit norms are |v_u| = [0.5, 2, 0.9, 3, 1.5,
    # 0.2]: 3 units unclipped of 6 (an item-level bit would count 6).
    unit_norms = np.array([0.5, 2.0, 0.9, 3.0, 1.5, 0.2], np.float32)
    valid = np.array([3, 2, 3, 1, 3, 2])
    item_mask = np.arange(3)[None, :] < valid[:, None]
    x = np.zeros((6, 3, 2), np.float32)
    for u in range(6):
        x[u, : valid[u], 0] = unit_norms[u] / valid[u]
    x[~item_mask] = 50.0  # a padded item would dominate any norm were it counted
    config = privacy.AdaptiveClipping(
        target_quantile=0.25, learning_rate=0.4, count_noise_std=1.0
    )
    plan = privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=6, microbatch_size=6),
        l2_clip_norm=1.0,
        steps=2,
        noise_multiplier=0.0,
        adaptive_clipping=config,
    )
    loss = lambda w, item: jnp.sum(w * item)  # noqa: E731
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.0), jnp.zeros(2))
    stats = privacy.LoopStats()
    privacy.fit(plan, method, x, state, item_mask=jnp.asarray(item_mask), stats=stats)
    b = 3 / 6  # unclipped units at C = 1: norms 0.5, 0.9, 0.2
    want = math.exp(-0.4 * (b - 0.25))
    assert float(stats.clip_norms[1]) == pytest.approx(want, rel=1e-6)


class _MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.tanh(nn.Dense(8)(x)))


def test_the_ghost_path_equals_the_per_unit_path():
    n = 96
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 2, 3)).astype(np.float32)  # units of 2 items
    y = rng.normal(size=(n, 2)).astype(np.float32)
    model = _MLP()
    params = model.init(jax.random.key(0), x[0, 0])
    loss = lambda p, item: (model.apply(p, item[0])[0] - item[1]) ** 2  # noqa: E731
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=n, sampling_rate=0.3, microbatch_size=16
        ),
        l2_clip_norm=0.3,
        steps=6,
        noise_multiplier=0.8,
        adaptive_clipping=privacy.AdaptiveClipping(learning_rate=0.5),
    )
    runs = {}
    for clip_method in ("vmap", "ghost"):
        method, state = privacy.gradient_method(
            plan, loss, optax.sgd(0.05), params, clip_method=clip_method
        )
        stats = privacy.LoopStats()
        out = privacy.fit(
            plan,
            method,
            (x, y),
            state,
            secret=privacy.DPSecret.from_seed(5),
            stats=stats,
        )
        runs[clip_method] = ([float(c) for c in stats.clip_norms], out.state.params)
    (c_vmap, p_vmap), (c_ghost, p_ghost) = runs["vmap"], runs["ghost"]
    assert len(set(c_vmap)) == plan.steps  # C moved at every step
    np.testing.assert_allclose(c_ghost, c_vmap, rtol=1e-6)
    for a, b in zip(
        jax.tree_util.tree_leaves(p_vmap), jax.tree_util.tree_leaves(p_ghost)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_killed_adaptive_run_resumes_with_the_same_clip_norms(tmp_path):
    n = 64
    x = np.random.default_rng(2).normal(size=(n, 1, 3)).astype(np.float32)
    plan = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=n, sampling_rate=0.5, microbatch_size=16
        ),
        l2_clip_norm=0.5,
        steps=6,
        noise_multiplier=1.0,
        adaptive_clipping=privacy.AdaptiveClipping(),
    )
    loss = lambda w, item: jnp.sum((w - item) ** 2)  # noqa: E731
    method, state = privacy.gradient_method(plan, loss, optax.sgd(0.1), jnp.zeros(3))
    secret = privacy.DPSecret.from_seed(9)

    def recorder(d):
        ledger = privacy.Ledger.open(
            d, dataset_id="toy", dataset_size=n, target_epsilon=100.0, target_delta=1e-5
        )
        return privacy.RunRecorder(
            privacy.Checkpoints(d / "ckpt"), ledger, what="step", checkpoint_every=2
        )

    full = privacy.fit(
        plan, method, x, state, secret=secret, recorder=recorder(tmp_path / "a")
    )

    class Kill:
        def on_step(self, info):
            if info["step"] == 3:
                raise RuntimeError("killed")

        def close(self):
            pass

    with pytest.raises(RuntimeError, match="killed"):
        privacy.fit(
            plan,
            method,
            x,
            state,
            secret=secret,
            recorder=recorder(tmp_path / "b"),
            callbacks=[Kill()],
        )
    again = privacy.fit(plan, method, x, state, recorder=recorder(tmp_path / "b"))
    np.testing.assert_array_equal(full.state.params, again.state.params)
    # the ledger records the adaptive config: a rerun under another one is refused
    other = dataclasses.replace(
        plan, adaptive_clipping=privacy.AdaptiveClipping(target_quantile=0.9)
    )
    with pytest.raises(privacy.LedgerError, match="adaptive_clipping"):
        privacy.fit(other, method, x, state, recorder=recorder(tmp_path / "b"))
    ledger = privacy.Ledger.load(tmp_path / "b")
    assert ledger.epsilon().epsilon == pytest.approx(
        _poisson_plan(1.0, n=n, q=0.5, steps=6).epsilon(1e-5).epsilon, rel=1e-9
    )


def test_privorl_finetune_config_opts_in_and_defaults_to_a_fixed_clip():
    from privrl_jax.pipelines import privorl_n
    from privrl_jax.pipelines._synth.train import make_plan

    fixed = make_plan(privorl_n.load("privorl_n/test", []), 600)
    assert fixed.adaptive_clipping is None
    cfg = privorl_n.load("privorl_n/test", ["finetune.adaptive_clip_quantile=0.7"])
    plan = make_plan(cfg, 600)
    assert plan.adaptive_clipping.target_quantile == 0.7
    assert plan.noise_multipliers == fixed.noise_multipliers
    assert plan.epsilon(1e-4).epsilon == fixed.epsilon(1e-4).epsilon
    with pytest.raises(ValueError, match="adaptive_clip_quantile"):
        privorl_n.load("privorl_n/test", ["finetune.adaptive_clip_quantile=1.0"])


def test_the_auditor_accounts_the_plans_epsilon_and_sees_the_larger_gradient_noise():
    from privrl_jax.privacy import audit

    m, delta = 10_000, 1e-5
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    model = nn.Dense(1)
    loss = lambda p, item: (model.apply(p, item[0])[0] - item[1]) ** 2  # noqa: E731
    sampler = privacy.FullBatchSampler(dataset_size=64, microbatch_size=512)
    # z = 2, z_b = 2 x 1.25 = 2.5: the gradient runs at z_Delta = (1/4 - 1/6.25)^-1/2
    plan = privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=1.0,
        steps=1,
        noise_multiplier=2.0,
        adaptive_clipping=privacy.AdaptiveClipping(count_noise_std=1.25),
    )
    z_delta = (0.25 - 0.16) ** -0.5
    fixed = privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=2.0
    )
    res = audit.audit_fit(
        plan,
        loss,
        optax.sgd(0.01),
        model.init(jax.random.key(0), x[0]),
        (x[:, None], x.sum(1)[:, None]),
        num_canaries=m,
        k_positive=100,
        delta=delta,
        seed=1,
        secret=privacy.DPSecret.from_seed(1),
    )
    assert res.epsilon_accounted == fixed.epsilon(delta).epsilon
    assert 0 < res.epsilon_demonstrated <= res.epsilon_accounted
    # the canaries see the gradient's noise alone: mu = 1 / z_Delta (0.33), not 1 / z
    se = math.sqrt(4 / m)
    assert abs(res.gdp.mu - 1 / z_delta) < 5 * se
    assert res.gdp.mu < 0.5 - 5 * se
