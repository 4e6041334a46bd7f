"""The trajectory-level fine-tune's EMA warm-up: decay_t = min(decay, (1 + t) / (10 +
t))."""

import jax.numpy as jnp
import numpy as np

from privrl_jax import privacy
from privrl_jax.synth._privorl_j import trajectory_dp_finetune


def _fns(ema_decay: float, ema_warmup: bool = True):
    sampler = privacy.PoissonSampler(
        dataset_size=4, sampling_rate=0.5, microbatch_size=4
    )
    plan = privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=1.0
    )
    loss = lambda params, item: jnp.sum(params["w"] * item["x"])
    return trajectory_dp_finetune(
        loss,
        plan,
        learning_rate=0.1,
        ema_decay=ema_decay,
        ema_warmup=ema_warmup,
        uses_key=False,
    )


def test_ema_follows_the_warmup_schedule_then_the_fixed_decay():
    fns = _fns(0.5)
    state = fns.init({"w": jnp.zeros(3)})
    grads = [
        {"w": jnp.array([1.0, -2.0, 0.5])},
        {"w": jnp.array([-1.0, 1.0, 3.0])},
        {"w": jnp.array([0.2, 0.2, -4.0])},
    ]
    ema = np.zeros(3)
    for t, g in enumerate(grads):
        state = fns.update(state, g)
        decay = min(
            0.5, (1 + t) / (10 + t)
        )  # 0.1, 2/11, 0.25: the warm-up binds for these steps
        ema = decay * ema + (1 - decay) * np.asarray(state.params["w"])
        np.testing.assert_allclose(
            np.asarray(state.ema_params["w"]), ema, rtol=1e-6, atol=1e-7
        )
    assert int(state.step) == 3


def test_fixed_decay_binds_once_the_warmup_passes_it():
    fns = _fns(0.15)  # (1 + t) / (10 + t) = 0.1 at t = 0, 0.18 at t = 1 > 0.15
    state = fns.init({"w": jnp.ones(2)})
    state = fns.update(state, {"w": jnp.array([1.0, 1.0])})
    first = np.asarray(state.ema_params["w"])
    np.testing.assert_allclose(
        first, 0.1 * 1.0 + 0.9 * np.asarray(state.params["w"]), rtol=1e-6
    )
    state = fns.update(state, {"w": jnp.array([1.0, 1.0])})
    np.testing.assert_allclose(
        np.asarray(state.ema_params["w"]),
        0.15 * first + 0.85 * np.asarray(state.params["w"]),
        rtol=1e-6,
    )


def test_without_warmup_the_fixed_decay_binds_from_the_first_step():
    fns = _fns(0.9, ema_warmup=False)
    state = fns.init({"w": jnp.ones(2)})
    ema = np.ones(2)
    for g in ([1.0, -1.0], [0.5, 2.0]):
        state = fns.update(state, {"w": jnp.array(g)})
        ema = 0.9 * ema + 0.1 * np.asarray(state.params["w"])
        np.testing.assert_allclose(np.asarray(state.ema_params["w"]), ema, rtol=1e-6)


def test_decay_zero_without_warmup_releases_the_last_iterate():
    fns = _fns(0.0, ema_warmup=False)
    state = fns.init({"w": jnp.zeros(3)})
    for g in ([1.0, -2.0, 0.5], [-1.0, 1.0, 3.0]):
        state = fns.update(state, {"w": jnp.array(g)})
        np.testing.assert_array_equal(
            np.asarray(state.ema_params["w"]), np.asarray(state.params["w"])
        )
