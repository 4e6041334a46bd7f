"""Accounting equals dp-accounting called directly and reproduces published reference
values."""

import itertools
import math

import dp_accounting
import pytest
from dp_accounting import pld, rdp

from privrl_jax.privacy import calibrate_noise_multiplier, compute_epsilon, zcdp_epsilon
from privrl_jax.privacy._accounting import (
    Sampling,
    dpsgd_epsilon,
    dpsgd_event,
    zcdp_noise_std,
    zcdp_rho,
    zcdp_to_epsilon,
)

GRID = list(itertools.product([0.8, 1.5], [0.004, 0.05], [100, 2000], [1e-6, 1e-5]))
# PLD costs seconds per call: compare it directly on a small sub-grid by default.
PLD_GRID = [(0.8, 0.004, 100, 1e-6), (1.5, 0.05, 300, 1e-5)]


def _direct(sigma, q, steps, delta, acc):
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
        steps,
    )
    a = (
        rdp.RdpAccountant()
        if acc == "rdp"
        else pld.PLDAccountant(value_discretization_interval=1e-4)
    )
    return a.compose(event).get_epsilon(delta)


@pytest.mark.parametrize("sigma, q, steps, delta", GRID)
def test_rdp_equals_dp_accounting_directly(sigma, q, steps, delta):
    rep = dpsgd_epsilon(sigma, q, steps, delta)
    assert rep.epsilon == pytest.approx(
        _direct(sigma, q, steps, delta, "rdp"), rel=1e-12
    )


@pytest.mark.parametrize("sigma, q, steps, delta", PLD_GRID)
def test_pld_equals_dp_accounting_directly(sigma, q, steps, delta):
    for acc in ("rdp", "pld"):
        rep = dpsgd_epsilon(sigma, q, steps, delta, accountant=acc)
        assert rep.epsilon == pytest.approx(
            _direct(sigma, q, steps, delta, acc), rel=1e-12
        )
        assert rep.accountant == acc and rep.delta == delta
    # RDP is an upper bound on the tight PLD value (up to PLD's discretisation error).
    assert dpsgd_epsilon(sigma, q, steps, delta).epsilon >= (
        dpsgd_epsilon(sigma, q, steps, delta, accountant="pld").epsilon * (1 - 1e-3)
    )


@pytest.mark.parametrize(
    "n, batch, sigma, epochs, delta, expected",
    [
        # TensorFlow Privacy, compute_dp_sgd_privacy_lib_test.py (RDP, steps =
        # ceil(epochs n / batch)).
        (60000, 150, 1.3, 15, 1e-5, 0.7242234026109595),
        (100000, 100, 1.0, 30, 1e-7, 1.4154988495444845),
    ],
)
def test_tensorflow_privacy_reference_values(n, batch, sigma, epochs, delta, expected):
    steps = math.ceil(epochs * n / batch)
    assert dpsgd_epsilon(sigma, batch / n, steps, delta).epsilon == pytest.approx(
        expected, rel=1e-9
    )


def test_abadi_2016_moments_accountant_bound():
    # Abadi et al. 2016 (arXiv:1607.00133), Sec. 5: q=0.01, sigma=4, delta=1e-5, 10,000
    # steps gives epsilon ~ 1.26 with the moments accountant; RDP with fractional orders
    # is tighter, PLD tighter still.
    eps_rdp = dpsgd_epsilon(4.0, 0.01, 10_000, 1e-5).epsilon
    eps_pld = dpsgd_epsilon(4.0, 0.01, 10_000, 1e-5, accountant="pld").epsilon
    assert 0.8 < eps_pld <= eps_rdp <= 1.26


@pytest.mark.parametrize("acc", ["rdp", pytest.param("pld", marks=pytest.mark.slow)])
def test_monotone_in_every_argument(acc):
    base = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=500, delta=1e-5)

    def eps(**kw):
        return dpsgd_epsilon(**{**base, **kw}, accountant=acc).epsilon

    e0 = eps()
    assert eps(noise_multiplier=1.2) < e0
    assert eps(sampling_rate=0.02) > e0
    assert eps(steps=1000) > e0
    assert eps(delta=1e-4) < e0


@pytest.mark.parametrize(
    "acc, target",
    [("rdp", 1.0), ("rdp", 10.0), pytest.param("pld", 3.0, marks=pytest.mark.slow)],
)
def test_calibrate_then_recompute(acc, target):
    sigma = calibrate_noise_multiplier(target, 1e-6, 0.01, 1000, accountant=acc)
    eps = dpsgd_epsilon(sigma, 0.01, 1000, 1e-6, accountant=acc).epsilon
    assert eps <= target * (1 + 1e-9)
    assert eps >= target * 0.98
    # A slightly smaller sigma must overshoot the target: the calibrated sigma is (near)
    # the smallest.
    assert (
        dpsgd_epsilon(sigma * 0.98, 0.01, 1000, 1e-6, accountant=acc).epsilon > target
    )


@pytest.mark.slow
def test_truncated_poisson_uses_its_own_event():
    ev = dpsgd_event(
        1.0,
        0.01,
        50,
        sampling=Sampling.TRUNCATED_POISSON,
        dataset_size=10_000,
        capacity=150,
    )
    assert isinstance(ev.event, dp_accounting.TruncatedSubsampledGaussianDpEvent)
    truncated = compute_epsilon(ev, 1e-6, accountant="pld").epsilon
    plain = dpsgd_epsilon(1.0, 0.01, 50, 1e-6, accountant="pld").epsilon
    # Truncating far above the mean batch (100) changes epsilon by little, and never
    # makes it smaller than plain Poisson by much (the truncated mechanism is at least
    # as private as its components).
    assert truncated == pytest.approx(plain, rel=0.1)


def test_truncated_poisson_is_refused_by_rdp():
    ev = dpsgd_event(
        1.0,
        0.01,
        50,
        sampling=Sampling.TRUNCATED_POISSON,
        dataset_size=10_000,
        capacity=150,
    )
    assert isinstance(ev.event, dp_accounting.TruncatedSubsampledGaussianDpEvent)
    with pytest.raises(ValueError, match="use accountant='pld'"):
        compute_epsilon(ev, 1e-6, accountant="rdp")


def test_uniform_one_is_replace_one_sampling_without_replacement():
    rep = dpsgd_epsilon(2.0, 0.0, 100, 1e-5, sampling="uniform_one", dataset_size=1000)
    assert rep.neighboring == "REPLACE_ONE"
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(
            1000, 1, dp_accounting.GaussianDpEvent(2.0)
        ),
        100,
    )
    direct = rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    assert rep.epsilon == pytest.approx(
        direct.compose(event).get_epsilon(1e-5), rel=1e-12
    )


def test_zcdp_formulas():
    assert zcdp_noise_std(0.5, 2.0) == pytest.approx(2.0)  # Delta / sqrt(2 rho)
    rho, delta = 0.1, 1e-6
    assert zcdp_to_epsilon(rho, delta) == pytest.approx(
        rho + 2 * math.sqrt(rho * math.log(1 / delta))
    )
    # A Gaussian of std zcdp_noise_std(rho, 1) is rho-zCDP: dp-accounting's RDP of that
    # Gaussian (alpha * rho at every order) converts to an epsilon no larger than the
    # classic conversion.
    sigma = zcdp_noise_std(rho, 1.0)
    eps_rdp = compute_epsilon(dp_accounting.GaussianDpEvent(sigma), delta).epsilon
    assert eps_rdp <= zcdp_to_epsilon(rho, delta)
    zc = compute_epsilon(dp_accounting.ZCDpEvent(rho), delta).epsilon
    assert zc == pytest.approx(eps_rdp, rel=0.02)


def test_zcdp_rho_of_gaussian_releases_is_dp_accountings_rdp_curve():
    std, sensitivity = 3.0, 1.5  # a Gaussian release: rho = Delta^2 / (2 std^2)
    gauss = dp_accounting.GaussianDpEvent(std / sensitivity)
    assert zcdp_rho(gauss) == sensitivity**2 / (2 * std**2) == 0.125
    mixed = dp_accounting.ComposedDpEvent(
        [
            dp_accounting.SelfComposedDpEvent(gauss, 4),
            dp_accounting.GaussianDpEvent(0.5),
            dp_accounting.NoOpDpEvent(),
        ]
    )
    assert zcdp_rho(mixed) == 4 * 0.125 + 2.0
    # dp-accounting's RDP of a Gaussian is alpha * rho at every order, the curve of
    # ZCDpEvent(rho): the same epsilon, composed or not.
    for event in (gauss, mixed):
        for delta in (1e-5, 1e-9):
            acc = rdp.RdpAccountant()
            acc.compose(event)
            eps = zcdp_epsilon(zcdp_rho(event), delta)
            assert eps == pytest.approx(acc.get_epsilon(delta), rel=1e-12)
            assert eps <= zcdp_to_epsilon(zcdp_rho(event), delta)
    assert zcdp_rho(dp_accounting.NonPrivateDpEvent()) == math.inf
    assert zcdp_epsilon(math.inf, 1e-5) == math.inf
    for no_zcdp in (dpsgd_event(1.0, 0.01, 10), dp_accounting.ZCDpEvent(0.1, 0.2)):
        with pytest.raises(ValueError, match="no exact zCDP guarantee"):
            zcdp_rho(no_zcdp)


def test_heterogeneous_composition():
    a = dpsgd_event(1.0, 0.01, 300)
    b = dp_accounting.GaussianDpEvent(5.0)
    both = compute_epsilon(dp_accounting.ComposedDpEvent([a, b]), 1e-5).epsilon
    assert both > compute_epsilon(a, 1e-5).epsilon
    assert both > compute_epsilon(b, 1e-5).epsilon


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"delta": float("nan")}, "delta"),
        ({"delta": 1.5}, "delta"),
        ({"delta": 0.0}, "delta"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"sampling_rate": 1.5}, "sampling_rate"),
        ({"steps": 0}, "steps"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1e-5)
    with pytest.raises(ValueError, match=match):
        dpsgd_epsilon(**{**args, **kwargs})


def test_calibrate_bad_target():
    with pytest.raises(ValueError, match="target_epsilon"):
        calibrate_noise_multiplier(0.0, 1e-5, 0.01, 10)
