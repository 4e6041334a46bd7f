"""A sweep over epsilon (sigma), h, beta_0 or rho compiles once (issue 25, item 2).

Compiles are counted from JAX's own compile log (``jax.log_compiles``): one "Finished
XLA compilation of jit(<name>)" record per executable built. Each sweep also checks that
the bound
numbers really reach the computation: the traced run equals, bit for bit, the run of an
outer jit that closes over the plan (its numbers are then constants of the outer
program, which XLA inlines and may fold), and the noise scales with the plan's std.
"""

import contextlib
import dataclasses
import logging
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from privrl_jax import ope, planning, privacy
from privrl_jax.envs import (
    base_stock_policy,
    collect_inventory_data,
    make_inventory_params,
)
from privrl_jax.planning._pool import noise_bound
from privrl_jax.privacy._aggregation import make_dp_step

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, math.inf)
S, M, T = 4, 60, 10


class _CompileLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        prefix = "Finished XLA compilation of jit("
        if msg.startswith(prefix):
            self.names.append(msg[len(prefix) : msg.index(")")])


@contextlib.contextmanager
def compiles():
    handler = _CompileLog()
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            yield handler.names
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="module")
def data():
    return ope.collect(
        jax.random.key(0),
        ope.medical_chain(S),
        ope.treatment_policy([0.3] * S),
        ope.treatment_policy([0.9, 0.7, 0.4, 0.2]),
        ope.one_hot_features(S),
        num_trajectories=M,
        max_length=T,
    ).data


def _plans(sampler, h=0.2, steps=8):
    base = privacy.DPPlan(sampler=sampler, l2_clip_norm=h, steps=steps)
    return [base.calibrate(eps, 1e-3) for eps in EPSILONS]


SAMPLERS = {
    "uniform": privacy.UniformOneSampler(dataset_size=M),
    "poisson": privacy.PoissonSampler(
        dataset_size=M, sampling_rate=0.1, microbatch_size=1
    ),
}


@pytest.mark.parametrize(
    "sampling",
    # one-of-m's program compiles in ~45 s on 2 cores; Poisson checks the same binding
    [
        pytest.param(s, marks=pytest.mark.slow) if s == "uniform" else s
        for s in sorted(SAMPLERS)
    ],
)
def test_gpope_epsilon_sweep_compiles_once_and_binds_each_sigma(data, sampling):
    plans = _plans(SAMPLERS[sampling])
    sigmas = [p.noise_multiplier for p in plans]
    assert len(set(sigmas)) == 6 and sigmas[-1] == 0.0
    schedule = ope.sample_schedule(plans[0], 1)
    step_size, key = ope.StepSize(0.5), jax.random.key(2)
    with compiles() as names:
        out = [ope.gpope(p, data, schedule, key, step_size=step_size) for p in plans]
        jax.block_until_ready(out)
    assert names.count("_gpope_run") == 1, names
    # One reference (each costs a compile): a noisy plan from the middle of the sweep.
    plan, got = plans[2], out[2]
    folded = jax.jit(lambda d, s, k: ope.gpope(plan, d, s, k, step_size=step_size))
    for a, b in zip(got, folded(data, schedule, key)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # sigma = 0 is still clipped and noise-free: the same run as a plan with no noise at
    # all.
    assert not np.array_equal(np.asarray(out[0].theta), np.asarray(out[-1].theta))


# ~40 s of compiling; the pool sweep checks the same law (std x one z)
@pytest.mark.slow
def test_one_step_noise_is_the_plans_std_times_one_fixed_draw(data):
    # One iteration from zero: theta_1 = -beta (clipped sum + std z) / 1 with the same z
    # for every sigma, so (theta(sigma) - theta(0)) / std is one vector for the whole
    # sweep.
    plans = _plans(SAMPLERS["uniform"], steps=1)
    schedule = ope.sample_schedule(plans[0], 4)
    with compiles() as names:
        thetas = [
            ope.gpope(
                p, data, schedule, jax.random.key(7), step_size=ope.StepSize(1.0)
            ).theta
            for p in plans
        ]
    assert names.count("_gpope_run") == 1, names
    z = [(t - thetas[-1]) / -p.noise_stds[0] for t, p in zip(thetas[:-1], plans[:-1])]
    for zi in z[1:]:
        np.testing.assert_allclose(
            np.asarray(zi), np.asarray(z[0]), rtol=2e-4, atol=2e-4
        )


@pytest.mark.parametrize(
    "sampling",
    # one-of-m's trial program takes ~60 s to compile; the one-run sweep covers it
    ["poisson", pytest.param("uniform", marks=pytest.mark.slow)],
)
@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_gpope_trials_sweep_over_epsilon_h_and_beta_compiles_once(data, sampling):
    sampler = SAMPLERS[sampling]
    plans = _plans(sampler)
    # h and beta_0 vary too: two more sweeps, the same executable.
    plans += [
        privacy.DPPlan(sampler=sampler, l2_clip_norm=h, steps=8, noise_multiplier=1.0)
        for h in (0.05, 0.1, 0.4)
    ]
    step_sizes = [ope.StepSize(0.5)] * 6 + [ope.StepSize(b) for b in (0.1, 0.3, 0.9)]
    schedules = ope.sample_schedule(plans[0], 3, trials=4)
    keys = jax.random.split(jax.random.key(5), 4)
    with compiles() as names:
        out = [
            ope.gpope_trials(p, data, schedules, keys, step_size=s)
            for p, s in zip(plans, step_sizes)
        ]
        jax.block_until_ready(out)
    assert names.count("_gpope_trials_jit") == 1, names
    plan, step_size = plans[7], step_sizes[7]
    ref = jax.jit(
        lambda: ope.gpope_trials(plan, data, schedules, keys, step_size=step_size)
    )()
    for a, b in zip(out[7], ref):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert len({float(r.theta[0, 0]) for r in out}) == len(out)


def test_pool_plan_rho_sweep_compiles_once():
    horizon = 3
    params = make_inventory_params(1, horizon, boundary=0.9)
    episodes = collect_inventory_data(
        jax.random.key(0), params, base_stock_policy(jnp.array([0.5]), 0.3), 200
    )
    geom = planning.make_zone_geometry(params.boundary, 10, radius=0.9 * math.sqrt(2))
    actions = planning.action_grid(1, 5)
    mechanisms = [
        planning.pool_mechanism(rho, horizon)
        for rho in (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
    ]
    with compiles() as names:
        out = [
            planning.pool_plan(jax.random.key(1), episodes, geom, actions, m)
            for m in mechanisms
        ]
        jax.block_until_ready(out)
    assert names.count("_pool_plan_jit") == 1, names
    mech = mechanisms[2]
    ref = jax.jit(lambda k, d: planning.pool_plan(k, d, geom, actions, mech))(
        jax.random.key(1), episodes
    )
    # Equal to 1 ulp, not bitwise: with the std a constant of the outer program XLA
    # fuses value + std * z differently (the traced run is bitwise equal to the
    # static-mechanism version this replaced; checked when the change was made).
    for a, b in zip(out[2], ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-7, atol=1e-6)
    # The count noise is the mechanism's std times one fixed draw.
    exact = planning.pool_plan(jax.random.key(1), episodes, geom, actions, None).counts
    z = [(r.counts - exact) / m.noise_std for r, m in zip(out, mechanisms)]
    for zi in z[1:]:
        np.testing.assert_allclose(
            np.asarray(zi), np.asarray(z[0]), rtol=1e-3, atol=1e-3
        )
    np.testing.assert_allclose(
        [float(r.noise_bound) for r in out],
        [noise_bound(m, horizon, geom.num_cells, 0.05) for m in mechanisms],
        rtol=1e-6,
    )


def test_dp_step_sigma_sweep_compiles_once():
    # The lower-level DP-SGD step (_aggregation.make_dp_step) with the plan's structure
    # static and its numbers traced: one jitted step serves six sigmas, bit-equal to
    # the plan's own (constant) step.
    n = 64
    x = jax.random.normal(jax.random.key(0), (n, 1, 3))
    y = x[..., 0] * 2.0
    plans = _plans(
        privacy.PoissonSampler(dataset_size=n, sampling_rate=0.25, microbatch_size=n),
        h=1.0,
        steps=10,
    )
    structure = plans[0].split()[0]
    opt = optax.sgd(0.1)

    def loss(w, item):
        xi, yi = item
        return (xi @ w - yi) ** 2

    @jax.jit
    def step(arrays, state, batch, mask):
        clip = structure.clipped_grad(loss, arrays)
        tx = structure._dpsgd(opt, key=jax.random.key(0), arrays=arrays)
        return make_dp_step(clip, tx).step(state, batch, mask)[0]

    def init(plan):
        tx = plan._dpsgd(opt, key=jax.random.key(3))
        w = jnp.zeros(3)
        return privacy.DPTrainState(w, tx.init(w)), tx

    mask = jnp.ones((n, 1), bool)
    with compiles() as names:
        out = []
        for plan in plans:
            state, _ = init(plan)
            out.append(step(plan.split()[1], state, (x, y), mask))
        jax.block_until_ready(out)
    assert names.count("step") == 1, names
    # Two references (each a compile): a noisy plan and the sigma = 0 one.
    for plan, got in ((plans[1], out[1]), (plans[-1], out[-1])):
        state, tx = init(plan)
        ref = jax.jit(
            lambda s, b, m, p=plan, tx=tx: make_dp_step(p.clipped_grad(loss), tx).step(
                s, b, m
            )[0]
        )(state, (x, y), mask)
        np.testing.assert_array_equal(np.asarray(got.params), np.asarray(ref.params))
    assert len({float(o.params[0]) for o in out}) == 6


def test_fit_sigma_sweep_compiles_once_and_binds_each_std():
    # Six whole privacy.fit calls, one per sigma, with the same loss and optimizer: the
    # per-unit clipped gradients (clip norm traced) and the release (noise + update,
    # noise std traced) compile once each, and a clip-norm change reuses both.
    n, lr = 32, 0.1
    x = np.asarray(jax.random.normal(jax.random.key(0), (n, 1, 3)))
    data = (x, x[..., 0] * 2.0)
    sampler = privacy.PoissonSampler(
        dataset_size=n, sampling_rate=0.25, microbatch_size=8
    )
    sigmas = (2.0, 1.5, 1.0, 0.8, 0.6, 0.0)
    plans = [
        privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=s)
        for s in sigmas
    ]
    opt = optax.sgd(lr)
    secret = privacy.DPSecret.from_seed(1)

    def loss(w, item):
        return (item[0] @ w - item[1]) ** 2

    def fit(plan, per_item_loss=loss):
        method, state = privacy.gradient_method(plan, per_item_loss, opt, jnp.zeros(3))
        return privacy.fit(plan, method, data, state, secret=secret).state.params

    with compiles() as names:
        out = jax.block_until_ready([fit(p) for p in plans])
        # Another clip norm at sigma = 0: still the same gradient and release programs.
        other = dataclasses.replace(plans[-1], l2_clip_norm=0.3)
        clipped = fit(other)
    assert names.count("_accumulate") == 1, names
    assert names.count("_release") == 1, names
    assert len({float(o[0]) for o in out}) == 6
    # Each plan's std reaches the noise: one step of SGD from zero is
    # w = -lr (S + std z) / (q N), the same batch S for every sigma (one secret), so
    # (w(sigma) - w(0)) / (-lr std / (q N)) is the release's N(0, 1) draw, which is
    # jax.random.normal under the step's key (tests/privacy/test_noise.py: the same
    # bits, and their law). Equal up to float32 rounding of the differences.
    z = jax.random.normal(
        jax.random.split(jax.random.fold_in(secret.noise_key, 0), 1)[0], (3,)
    )
    for plan, w in zip(plans[:-1], out[:-1]):
        std = plan.noise_stds[0]
        assert std == plan.noise_multiplier * plan.l2_clip_norm
        got = (np.asarray(w) - np.asarray(out[-1])) / (
            -lr * std / sampler.expected_batch_size
        )
        np.testing.assert_allclose(got, np.asarray(z), rtol=1e-5, atol=1e-5)
    # The traced clip norm reaches the computation: the same as a run that compiles
    # its own programs (a new loss object), and not the sweep's clip norm.
    fresh = fit(other, lambda w, item: loss(w, item))
    np.testing.assert_array_equal(np.asarray(clipped), np.asarray(fresh))
    assert not np.array_equal(np.asarray(clipped), np.asarray(out[-1]))
