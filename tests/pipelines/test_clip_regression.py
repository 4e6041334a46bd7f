"""pipelines.clip_regression: DP-SGD on a public toy regression, fixed or adaptive C."""

from __future__ import annotations

import dataclasses

import dp_accounting
import numpy as np
import pytest

from privrl_jax.pipelines import clip_regression as cr

BASE = "clip_regression/default"
# A small, cheap run: 1,000 rows, 50 steps.
SMALL = ["data.n=1000", "data.n_test=500", "data.dim=5", "train.steps=50"]


@pytest.mark.parametrize(
    "override, key",
    [
        ("data.n=1", "data.n"),
        ("data.dim=0", "data.dim"),
        ("train.sampling_rate=0", "train.sampling_rate"),
        ("train.sampling_rate=1.5", "train.sampling_rate"),
        ("train.l2_clip_norm=0", "train.l2_clip_norm"),
        ("train.adaptive_clip_quantile=1.0", "train.adaptive_clip_quantile"),
        ("train.adaptive_clip_lr=0", "train.adaptive_clip_lr"),
        ("train.steps=0", "train.steps"),
        ("privacy.epsilon=0", "privacy.epsilon"),
        ("privacy.delta=1.0", "privacy.delta"),
        ("seed=-1", "seed"),
        ("train.momentum=0.9", "momentum"),
    ],
)
def test_config_refusals(override, key):
    with pytest.raises(ValueError, match=key) as err:
        cr.load(BASE, [override])
    assert "\n" not in str(err.value)


def test_a_non_empty_run_dir_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        cr.run(cr.load(BASE, SMALL), tmp_path / "run")


def test_the_default_config_is_the_legacy_scripts_setting():
    cfg = cr.load(BASE, [])
    assert (cfg.data.n, cfg.data.dim, cfg.data.n_test, cfg.data.noise_std) == (
        10_000,
        20,
        2_000,
        0.5,
    )
    t = cfg.train
    assert (t.sampling_rate, t.steps, t.lr, t.microbatch_size) == (0.01, 500, 0.05, 128)
    assert t.adaptive_clip_quantile is None and t.adaptive_clip_lr == 0.2


def test_without_noise_or_clipping_sgd_reaches_the_least_squares_optimum(tmp_path):
    """epsilon = inf (z = 0), q = 1 and a clip norm no gradient reaches: full-batch
    gradient descent on the mean loss, which converges to the normal equations'
    solution; both test MSEs are checked against an independent solve."""
    over = ["data.n=200", "data.n_test=300", "data.dim=5", "train.steps=200"]
    over += ["train.sampling_rate=1.0", "train.microbatch_size=200", "train.lr=0.5"]
    over += ["train.l2_clip_norm=1e6", "privacy.epsilon=.inf", "seed=3"]
    cfg = cr.load(BASE, over)
    r = cr.run(cfg, tmp_path / "run")
    (x, y), (xt, yt), w_star = cr.make_data(cfg)
    x, y = np.asarray(x, np.float64)[:, 0], np.asarray(y, np.float64)[:, 0]
    w_ls = np.linalg.solve(x.T @ x, x.T @ y)
    ls_mse = float(np.mean((xt @ w_ls - yt) ** 2))
    assert r["least_squares_test_mse"] == pytest.approx(ls_mse, rel=1e-9)
    assert r["test_mse"] == pytest.approx(ls_mse, rel=1e-4)
    # w* fits to the label noise: the optimum's test MSE is near 0.5^2.
    assert 0.2 < ls_mse < 0.32
    assert r["noise_multiplier"] == 0.0 and r["final_clip_norm"] == 1e6
    assert w_star.shape == (5,)


def test_the_epsilon_is_dp_accountings_and_adaptive_splits_the_same_z(tmp_path):
    """Fixed and adaptive C run the same z, accounted as the Poisson-sampled Gaussian
    over the steps (dp-accounting's RDP); adaptive's gradient multiplier is Andrew et
    al.'s (z^-2 - (2 sigma_b)^-2)^-1/2 with sigma_b = expected batch / 20."""
    fixed = cr.run(cr.load(BASE, [*SMALL, "privacy.epsilon=2.0"]), tmp_path / "f")
    adaptive = cr.run(
        cr.load(
            BASE,
            [*SMALL, "privacy.epsilon=2.0", "train.adaptive_clip_quantile=0.5"],
        ),
        tmp_path / "a",
    )
    z = fixed["noise_multiplier"]
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(z)),
        50,
    )
    want = dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(1e-5)
    assert fixed["epsilon"] == pytest.approx(want, rel=1e-9)
    assert want == pytest.approx(2.0, rel=2e-3)  # calibrated to the target
    assert adaptive["noise_multiplier"] == z
    assert adaptive["epsilon"] == fixed["epsilon"]
    sigma_b = 1000 * 0.01 / 20
    assert adaptive["count_noise_std"] == pytest.approx(sigma_b)
    assert adaptive["gradient_noise_multiplier"] == pytest.approx(
        (z**-2 - (2 * sigma_b) ** -2) ** -0.5, rel=1e-9
    )
    assert fixed["gradient_noise_multiplier"] is None
    assert adaptive["final_clip_norm"] != adaptive["initial_clip_norm"] == 1.0


def test_the_legacy_scripts_first_run_is_reproduced_bit_for_bit(tmp_path):
    """benchmarks/adaptive_clipping.py (removed) stored 6.786889553070068 for seed 0,
    epsilon 0.5, C = 0.3 (benchmarks/results/adaptive_clipping.json)."""
    cfg = cr.load(BASE, ["privacy.epsilon=0.5", "train.l2_clip_norm=0.3"])
    assert dataclasses.asdict(cfg)["privacy"]["noise_seed"] == 0
    r = cr.run(cfg, tmp_path / "run")
    assert r["test_mse"] == 6.786889553070068
    assert r["noise_multiplier"] == 1.935876405182514
