"""DP-SGD on a public toy linear regression: one clip norm, fixed or adaptive.

The task (public, synthetic): ``x ~ N(0, I_d)``, ``y = x.w* + N(0, noise_std^2)``,
``w* ~ N(0, I_d)``, all drawn from ``seed``; the loss of one example is
``(x.w - y)^2 / 2``, whose gradient norm shrinks about 10x from ``w = 0`` to ``w*``
(the situation adaptive clipping is for). One run of :func:`privrl_jax.privacy.fit`
(Poisson sampling, plain SGD from ``w = 0``) at a noise multiplier calibrated to
``privacy.epsilon`` for a FIXED clip norm; with ``train.adaptive_clip_quantile`` set,
the same noise multiplier runs adaptive clipping (Andrew et al. 2021,
:class:`~privrl_jax.privacy.AdaptiveClipping`) from ``train.l2_clip_norm`` as C0, its
count's noise split out of the same z, so every clip choice is accounted the same
epsilon. Utility: the test MSE on ``data.n_test`` held-out points (the noise floor is
``noise_std^2``), beside the closed-form least-squares optimum's.

``run(config, run_dir)`` writes ``config.yaml`` and ``report.json``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_STEPS,
    MAX_WIDTH,
    Bound,
    ConfigSource,
    Section,
    at_least,
    load_config,
    positive,
    to_dict,
)
from privrl_jax.pipelines._rundir import fresh_run_dir, write_report


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(Section):
    """The regression task: ``n`` training and ``n_test`` held-out rows of ``dim``."""

    SECTION: ClassVar[str] = "data"
    n: int = 10_000
    dim: int = 20
    n_test: int = 2_000
    noise_std: float = 0.5

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "n": at_least(2, MAX_BATCH),
        "dim": at_least(1, MAX_WIDTH),
        "n_test": at_least(1, MAX_BATCH),
        "noise_std": Bound(0.0, 1e6),
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig(Section):
    """DP-SGD: Poisson ``sampling_rate``, ``steps``, SGD ``lr``, the clip norm.

    ``adaptive_clip_quantile``: None keeps ``l2_clip_norm`` fixed; a value in (0, 1)
    moves it (from ``l2_clip_norm``) toward that quantile of the per-example gradient
    norms at rate ``adaptive_clip_lr``.
    """

    SECTION: ClassVar[str] = "train"
    sampling_rate: float = 0.01
    steps: int = 500
    lr: float = 0.05
    microbatch_size: int = 128
    l2_clip_norm: float = 1.0
    adaptive_clip_quantile: float | None = None
    adaptive_clip_lr: float = 0.2

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "sampling_rate": positive(1.0),
        "steps": at_least(1, MAX_STEPS),
        "lr": positive(),
        "microbatch_size": at_least(1, MAX_BATCH),
        "l2_clip_norm": positive(),
        "adaptive_clip_quantile": Bound(0.0, 1.0, low_open=True, high_open=True),
        "adaptive_clip_lr": positive(),
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig(Section):
    """The target epsilon (``.inf``: no noise) at ``delta``; the DP noise's seed."""

    SECTION: ClassVar[str] = "privacy"
    epsilon: float = 1.0
    delta: float = 1e-5
    noise_seed: int = 0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "delta": Bound(0.0, 1.0, low_open=True, high_open=True),
        "noise_seed": at_least(0),
    }

    def __post_init__(self) -> None:
        """Check the ranges (one-line ValueError)."""
        super().__post_init__()
        if not self.epsilon > 0:  # .inf allowed: no noise
            raise ValueError(
                f"privacy.epsilon must be > 0 (.inf: no noise); got {self.epsilon}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClipRegressionConfig(Section):
    """A toy regression run's config (module doc); ``seed``: the data and w*."""

    seed: int = 0
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    privacy: PrivacyConfig = dataclasses.field(default_factory=PrivacyConfig)

    BOUNDS: ClassVar[dict[str, Bound]] = {"seed": at_least(0)}


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> ClipRegressionConfig:
    """Load a toy regression run's config.

    Args:
      path: a YAML file or a shipped name (``clip_regression/default``); None: the
        defaults.
      overrides: ``section.key=value`` strings.

    Returns:
      The checked config.

    Raises:
      ValueError: an unknown key or a bad value (one line).
    """
    return load_config(ClipRegressionConfig, path, overrides)


def make_data(cfg: ClipRegressionConfig) -> tuple[Any, Any, Any]:
    """The seed's task: training units ``[n, 1, ...]``, the held-out set, ``w*``.

    Args:
      cfg: the config (its ``seed`` and ``data``).

    Returns:
      ``((x [n, 1, dim], y [n, 1]), (x_test, y_test), w_star)``, float32.
    """
    import numpy as np  # noqa: PLC0415 -- keeps `load` light

    d = cfg.data
    # One stream, drawn in this order (w*, then x, then the label noise).
    rng = np.random.default_rng(cfg.seed)
    w_star = rng.normal(size=d.dim).astype(np.float32)
    total = d.n + d.n_test
    x = rng.normal(size=(total, d.dim)).astype(np.float32)
    y = (x @ w_star + d.noise_std * rng.normal(size=total)).astype(np.float32)
    return (x[: d.n, None], y[: d.n, None]), (x[d.n :], y[d.n :]), w_star


def _plan(cfg: ClipRegressionConfig) -> Any:
    """The plan that runs: z calibrated to the target for a fixed clip norm."""
    from privrl_jax import privacy  # noqa: PLC0415

    t, p = cfg.train, cfg.privacy
    sampler = privacy.PoissonSampler(
        dataset_size=cfg.data.n,
        sampling_rate=t.sampling_rate,
        microbatch_size=t.microbatch_size,
    )
    # z does not depend on the clip norm: calibrated once, as a plain number.
    z = (
        privacy.DPPlan(sampler=sampler, l2_clip_norm=t.l2_clip_norm, steps=t.steps)
        .calibrate(p.epsilon, p.delta)
        .noise_multipliers[0]
    )
    # Adaptive clipping runs the same z (its count's noise is split out of it), so
    # every clip choice is the same accounted event (equal epsilon).
    adaptive = (
        None
        if t.adaptive_clip_quantile is None
        else privacy.AdaptiveClipping(
            target_quantile=t.adaptive_clip_quantile, learning_rate=t.adaptive_clip_lr
        )
    )
    return privacy.DPPlan(
        sampler=sampler,
        l2_clip_norm=t.l2_clip_norm,
        steps=t.steps,
        noise_multiplier=z,
        adaptive_clipping=adaptive,
    )


def run(cfg: ClipRegressionConfig, run_dir: str | Path) -> dict[str, Any]:
    """Train the configured run; write ``config.yaml`` and ``report.json``.

    Args:
      cfg: the config (:func:`load`).
      run_dir: a new or empty directory.

    Returns:
      The report: the config; ``test_mse`` (the DP run's), ``least_squares_test_mse``
      (the closed-form optimum on the same training rows, no DP); ``epsilon``
      (accounted, RDP, at ``privacy.delta``); ``noise_multiplier`` (z), and under
      adaptive clipping ``gradient_noise_multiplier`` and ``count_noise_std``;
      ``initial_clip_norm`` and ``final_clip_norm``.

    Raises:
      ValueError: ``run_dir`` holds files.
    """
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import optax  # noqa: PLC0415

    from privrl_jax import privacy, provenance  # noqa: PLC0415

    resolved = to_dict(cfg)
    run_dir = fresh_run_dir(run_dir, resolved)

    train, (x_test, y_test), _ = make_data(cfg)
    plan = _plan(cfg)

    def per_example_loss(w, item):
        x, y = item
        return 0.5 * (jnp.dot(x, w) - y) ** 2

    method, state = privacy.gradient_method(
        plan,
        per_example_loss,
        optax.sgd(cfg.train.lr),
        jnp.zeros(cfg.data.dim, jnp.float32),
    )
    stats = privacy.LoopStats()
    out = privacy.fit(
        plan,
        method,
        train,
        state,
        secret=privacy.DPSecret.from_seed(cfg.privacy.noise_seed),
        stats=stats,
    )
    w = np.asarray(out.state.params)
    # The training rows' least-squares optimum (float64): the floor DP-SGD aims at.
    x_tr, y_tr = (np.asarray(a, np.float64)[:, 0] for a in train)
    w_ls = np.linalg.lstsq(x_tr, y_tr, rcond=None)[0]
    clips = [float(c) for c in stats.clip_norms]
    adaptive = plan.adaptive_clipping is not None
    report = {
        "config": resolved,
        "test_mse": float(np.mean((x_test @ w - y_test) ** 2)),
        "least_squares_test_mse": float(np.mean((x_test @ w_ls - y_test) ** 2)),
        "epsilon": plan.epsilon(cfg.privacy.delta).epsilon,
        "noise_multiplier": plan.noise_multiplier,
        "gradient_noise_multiplier": plan.gradient_noise_multiplier
        if adaptive
        else None,
        "count_noise_std": plan.count_noise_std if adaptive else None,
        "initial_clip_norm": cfg.train.l2_clip_norm,
        "final_clip_norm": clips[-1] if adaptive else cfg.train.l2_clip_norm,
        "provenance": provenance(),
    }
    write_report(run_dir, report)
    return report
