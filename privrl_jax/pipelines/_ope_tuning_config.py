"""The tuned OPE comparison's configuration.

One method, one total budget, one data seed
(``experiments/gpope_tuned_vs_baselines.yaml`` sweeps them).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import ClassVar, Literal

from privrl_jax.pipelines._config import (
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    Bound,
    ConfigSource,
    at_least,
    check_bounds,
    check_modes,
    load_config,
    positive,
)

Method = Literal["gpope", "dp_lsw", "dp_lsl"]
METHODS = typing.get_args(Method)
# The candidate grid of each method (its one value in ``tuning: fixed``).
GRIDS = {"gpope": ("gpope_clip", "gpope_step_size"), "dp_lsl": ("lsl_ridge",)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class OPETuningConfig:
    """One cell of the tuned OPE comparison: ``method`` at a total budget.

    On-policy evaluation of the chain's target policy (5 levels, gamma 0.9, m
    trajectories of length T, one-hot features) by ``method`` at a total budget
    (``epsilon``, ``delta``) that includes the choice of its hyper-parameters.

    - ``gpope``: one-of-m sampling (replace-one, like the baselines), ``gpope_steps``
      steps, candidates the product of ``gpope_clip`` (h) and ``gpope_step_size``
      (beta_0, decayed over ``gpope_decay_steps``); chosen by private selection (K
      logarithmic with mean ``mean_runs``; every run is GPOPE plus its DP score), the
      noise calibrated so the selection's RDP epsilon is ``epsilon``.
    - ``dp_lsl``: candidates ``lsl_ridge``; no RDP curve (NRS07 smooth sensitivity), so
      every candidate runs once and the scores are composed: basic composition of the
      runs' (epsilon_r, delta / (2 K)) with the K Gaussian scores' RDP epsilon at
      delta / 2 adds up to ``epsilon``.
    - ``dp_lsw``: no hyper-parameter (the paper's LSW): one release at the budget.

    Each run's DP score is ``-||noisy mean of clipped TD directions||^2``
    (``pipelines.select.dp_score``, clip ``score_clip``, sigma ``score_noise``). The
    oracle runs every candidate once at the whole budget and keeps the one of least
    true MSE (NOT private: tuned on the truth, as published comparisons are).
    ``seed`` draws the data and the (public, NOT private) noise: a simulation study.

    ``env: mountain_car`` evaluates on-policy Mountain Car instead of the chain
    (``ope_tuning._setting``: tile features, the baselines on the 6 x 6 grid of cells
    the tiles are constant on, state weighting ``rho``, Monte Carlo truth at public
    evaluation states); ``lsw_ridge`` regularises DP-LSW's solve (the tile features are
    rank-deficient on the cells). ``gpope_sampler: poisson`` samples
    ``gpope_batch_size`` trajectories a step in expectation, accounted under
    add/remove-one and calibrated to ``ope.replace_one_target(epsilon, delta)`` (group
    privacy: replace-one like the baselines); with ``tuning: fixed`` only.

    ``tuning: fixed`` skips the choice: the method's grid holds one candidate (set off
    the data, e.g. a published protocol's choice), released once at the whole budget
    (GPOPE's sigma calibrated for ``epsilon`` alone); no score is drawn, and the
    release is the oracle's. ``calibration`` is the baselines' alpha (NRS07's closed
    form, the authors' choice, or the exact one; ``ope.dp_lsw``).
    """

    method: Method = "gpope"
    seed: int = 0
    epsilon: float = 1.0
    delta: float = 1e-5
    num_trajectories: int = 1000
    max_length: int = 20
    gpope_steps: int = 3000
    gpope_clip: tuple[float, ...] = (0.02, 0.1)
    gpope_step_size: tuple[float, ...] = (0.02, 0.1, 0.5)
    gpope_decay_steps: float = 500.0
    lsl_ridge: tuple[float, ...] = (100.0, 1000.0, 10000.0, 100000.0)
    return_bounds: tuple[float, ...] = (-2.0, 1.0)
    score_clip: float = 1.0
    score_noise: float = 5.0
    mean_runs: float = 3.0
    tuning: Literal["private", "fixed"] = "private"
    calibration: Literal["nrs07", "exact"] = "nrs07"
    env: Literal["chain", "mountain_car"] = "chain"
    gpope_sampler: Literal["uniform_one", "poisson"] = "uniform_one"
    gpope_batch_size: float = 50.0
    rho: Literal["uniform", "occupancy"] = "uniform"
    lsw_ridge: float = 0.0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "epsilon": positive(1e3),
        "delta": Bound(0.0, 1.0, low_open=True, high_open=True),
        "num_trajectories": at_least(2, MAX_ROWS),
        "max_length": at_least(1, MAX_STEPS),
        "gpope_steps": at_least(1, MAX_STEPS),
        "gpope_clip": positive(),
        "gpope_step_size": positive(),
        "gpope_decay_steps": positive(),
        "lsl_ridge": positive(),
        "score_clip": positive(),
        "score_noise": positive(),
        "mean_runs": at_least(1.0, MAX_COUNT),
        "gpope_batch_size": positive(),
        "lsw_ridge": Bound(0.0, math.inf),
    }

    def __post_init__(self):
        check_modes(self)
        check_bounds(self, "")
        lo_hi = self.return_bounds
        if len(lo_hi) != 2 or not (lo_hi[0] <= 0 <= lo_hi[1] and lo_hi[0] < lo_hi[1]):
            raise ValueError(
                f"return_bounds must be [lo, hi] with lo <= 0 <= hi; got {list(lo_hi)}."
            )
        grid = [f for f in GRIDS.get(self.method, ()) if len(getattr(self, f)) != 1]
        if self.tuning == "fixed" and grid:
            raise ValueError(
                f"tuning=fixed runs one candidate: {', '.join(grid)} must hold one "
                "value each."
            )
        if self.method == "gpope" and self.tuning == "private":
            if self.gpope_sampler != "uniform_one":
                raise ValueError(
                    "private selection of GPOPE needs gpope_sampler: uniform_one "
                    "(dp-accounting has no replace-one Poisson event to repeat)."
                )
        if (
            self.gpope_sampler == "poisson"
            and self.gpope_batch_size > self.num_trajectories
        ):
            raise ValueError("gpope_batch_size must be at most num_trajectories.")
        if self.num_trajectories * self.max_length > MAX_ROWS or math.isinf(
            self.epsilon
        ):
            raise ValueError("num_trajectories x max_length too large or epsilon inf.")


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> OPETuningConfig:
    """Loads the comparison's config.

    Args:
      path: a YAML file, or None for the defaults.
      overrides: ``key=value`` overrides, applied last.

    Returns:
      The checked config.

    Raises:
      ValueError: a bad key or value (one line).
    """
    return load_config(OPETuningConfig, path, overrides)
