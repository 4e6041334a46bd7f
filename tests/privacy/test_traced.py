"""Traced hyper-parameters (issue 47): a DPPlan refuses a traced sigma or clip norm
naming plan.split(), the way that works; a GaussianMechanism takes a traced sigma or rho
for its pure parts (release, noise_std, rho) and refuses it for the accounting."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import privacy


def _plan(sigma=1.0, clip=1.0):
    return privacy.DPPlan(
        sampler=privacy.UniformOneSampler(dataset_size=10),
        l2_clip_norm=clip,
        steps=3,
        noise_multiplier=sigma,
    )


@pytest.mark.parametrize("field", ["sigma", "clip"])
def test_a_traced_plan_number_is_refused_naming_plan_split(field):
    def f(x):
        return _plan(**{field: x}).noise_stds[0]

    with pytest.raises(ValueError, match=r"is traced .*plan\.split\(\)") as err:
        jax.jit(f)(1.0)
    assert "JitTracer" not in str(err.value) and "\n" not in str(err.value)


def test_the_way_the_message_names_sweeps_sigma_under_vmap():
    structure, arrays = _plan().split()
    sigmas = jnp.array([0.5, 1.0, 2.0])

    def noisy(sigma):
        a = arrays._replace(noise_stds=(2.0 * sigma,))  # replace-one: std = 2 sigma C
        return structure.privatize(jnp.zeros(4), jax.random.key(0), a)

    got = jax.vmap(noisy)(sigmas)
    for s, row in zip([0.5, 1.0, 2.0], got):
        want = _plan(sigma=s).privatize(jnp.zeros(4), jax.random.key(0))
        np.testing.assert_allclose(row, want, rtol=1e-6)


def test_a_concrete_jax_scalar_is_a_number():
    plan = _plan(sigma=jnp.float32(0.5), clip=np.float64(2.0))
    assert plan.noise_multiplier == 0.5 and plan.l2_clip_norm == 2.0


def test_gaussian_mechanism_releases_under_vmap_over_sigma_and_rho():
    x = jnp.arange(3.0)
    key = jax.random.key(5)
    sigmas = jnp.array([0.5, 2.0])
    got = jax.vmap(
        lambda s: privacy.GaussianMechanism(
            l2_sensitivity=3.0, noise_multiplier=s
        ).release(key, x)
    )(sigmas)
    for s, row in zip([0.5, 2.0], got):
        want = privacy.GaussianMechanism(
            l2_sensitivity=3.0, noise_multiplier=s
        ).release(key, x)
        np.testing.assert_allclose(row, want, rtol=1e-6)
    rhos = jnp.array([0.5, 8.0])
    stds = jax.vmap(
        lambda r: privacy.GaussianMechanism.from_zcdp(r, l2_sensitivity=2.0).noise_std
    )(rhos)
    # sigma = 1 / sqrt(2 rho): 1 and 0.25; std = sigma * Delta.
    np.testing.assert_allclose(stds, [2.0, 0.5], rtol=1e-6)


def test_gaussian_mechanism_refuses_to_account_a_traced_sigma():
    def f(s):
        return privacy.GaussianMechanism(l2_sensitivity=1.0, noise_multiplier=s).event()

    with pytest.raises(ValueError, match=r"event\(\) needs a concrete sigma"):
        jax.jit(f)(1.0)
