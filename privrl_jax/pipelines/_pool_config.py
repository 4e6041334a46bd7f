"""POOL's configuration: frozen dataclasses that ``configs/pool/*.yaml`` load into."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import ClassVar, Literal

from privrl_jax import privacy
from privrl_jax.pipelines._audit_run import AuditConfig
from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_COUNT,
    MAX_ROWS,
    Bound,
    ConfigSource,
    Section,
    at_least,
    check_modes,
    load_config,
    positive,
)

# Modes are Literal types: the one loader checks them (`_config.check_modes`).
Method = Literal[
    "pool", "grid", "input_perturbation", "output_perturbation", "non_private"
]
METHODS = typing.get_args(Method)
Demand = Literal["synthetic", "rossmann", "uniform", "exponential", "truncnormal"]
DEMANDS = typing.get_args(Demand)
Zones = Literal["paper", "additive"]
ZONES = typing.get_args(Zones)


@dataclasses.dataclass(frozen=True, kw_only=True)
class InventoryEnvConfig(Section):
    """The lost-sales inventory MDP, its demand and the simulated sensitive episodes.

    ``demand``: ``synthetic`` (the shipped weekly series; ``demand_seed`` picks
    its noise, 0 is the shipped one), ``rossmann`` (reads
    ``demand_file``, stores ``stores``), or a parametric law. ``boundary`` is
    lambda_h in every coordinate (above 1: full feedback). The behaviour policy
    (unknown to the learner) is base-stock ``behaviour_level`` plus Gaussian noise
    ``behaviour_noise``.
    """

    num_products: int = 1
    horizon: int = 5
    boundary: float = 0.9
    demand: Demand = "synthetic"
    demand_seed: int = 0  # noise seed of the synthetic series (public)
    demand_file: str | None = None
    stores: tuple[int, ...] = (1,)
    demand_mean: float = 0.4
    demand_scale: float = 0.3
    holding_cost: float = 0.2
    lost_sales_cost: float = 1.0
    order_cost: float = 0.3
    init_high: float = 0.5
    behaviour_level: float = 0.5
    behaviour_noise: float = 0.35
    num_episodes: int = 2000

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_products": at_least(1, MAX_COUNT),
        "horizon": at_least(1, MAX_COUNT),
        "boundary": positive(1e6),
        "demand_mean": at_least(0.0, 1e6),
        "demand_scale": at_least(0.0, 1e6),
        "holding_cost": at_least(0.0, 1e6),
        "lost_sales_cost": at_least(0.0, 1e6),
        "order_cost": at_least(0.0, 1e6),
        "init_high": at_least(0.0, 1e6),
        "behaviour_level": at_least(0.0, 1e6),
        "behaviour_noise": at_least(0.0, 1e6),
        "num_episodes": at_least(2, MAX_ROWS),
    }

    SECTION = "env"

    def __post_init__(self):
        super().__post_init__()
        # The episodes are simulated and held in memory: [episodes, H, products].
        size = self.num_episodes * self.horizon * self.num_products
        if size > MAX_ROWS:
            raise ValueError(
                "env.num_episodes x env.horizon x env.num_products = "
                f"{size:.3g} steps, more than {MAX_ROWS:,} (the episodes are held in "
                "memory); lower them."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoolAlgoConfig(Section):
    """Algorithm 1 and the baselines.

    ``method``: ``pool`` (zones), ``grid`` (``grid_bins`` per dimension, same private
    statistics), ``input_perturbation``, ``output_perturbation``, ``non_private``.
    ``zones`` (methods other than ``grid``): ``paper``, the l2 shells of the whole (w +
    d)-dimensional pair (pool.txt Sec. 3.2, with our affine/limiter fixes), or
    ``additive``, the same shells on each product's (s_i, a_i) plane with Q_bar the sum
    over products (``planning._additive``; identical to ``paper`` for one product).
    ``bonus_scale`` multiplies Gamma (default 0.003, chosen by a rule fixed in advance
    on a public task of another distribution, ``benchmarks/results/pool_fair.md``;
    1: the paper's C1 = sqrt 2, C2 = 16, which zero every Q at these data sizes; see
    docs/pool.md).
    """

    method: Method = "pool"
    zones: Zones = "additive"
    num_zones: int = 10
    radius: float | None = None  # default: |lambda| = ||min(lambda, 1)||_2
    affine: bool = True
    limiter: bool = True
    grid_bins: int = 8
    action_levels: int = 11
    max_actions: int = 256  # above levels^d: diagonal + public random orders
    bonus_scale: float = 0.003
    failure_prob: float = 0.05
    geometry_seed: int = 0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_zones": at_least(1, MAX_COUNT),
        "radius": positive(),
        "grid_bins": at_least(1, MAX_COUNT),
        "action_levels": at_least(2, MAX_COUNT),
        "max_actions": at_least(2, MAX_BATCH),
        "bonus_scale": at_least(0.0, 1e6),
        "failure_prob": Bound(0.0, 1.0, low_open=True, high_open=True),
    }

    SECTION = "pool"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(Section):
    """SAA benchmark (n samples, base-stock grid) and Monte Carlo rollouts."""

    saa_samples: int = 10_000
    saa_levels: int = 101
    eval_episodes: int = 10_000

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "saa_samples": at_least(1, MAX_ROWS),
        "saa_levels": at_least(2, MAX_BATCH),
        "eval_episodes": at_least(1, MAX_ROWS),
    }

    SECTION = "eval"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoolPrivacyConfig:
    """rho-zCDP spent by this run, the run directory's budget, and delta for epsilon.

    ``rho_budget`` (default: ``rho``) is the total the run directory may spend; a
    run that would exceed it is refused before any noise is drawn. ``noise_seed``
    fixes the noise for tests: such a run is NOT PRIVATE and says so.
    """

    rho: float = 1.0
    rho_budget: float | None = None
    delta: float = 1e-5
    noise_seed: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoolRunConfig:
    """Everything a POOL run needs (``privrl pool run``).

    ``seed`` is public randomness: the simulated data collection and the evaluation
    rollouts.
    """

    seed: int = 0
    env: InventoryEnvConfig = InventoryEnvConfig()
    pool: PoolAlgoConfig = PoolAlgoConfig()
    eval: EvalConfig = EvalConfig()
    privacy: PoolPrivacyConfig = PoolPrivacyConfig()
    audit: AuditConfig = AuditConfig()

    def __post_init__(self):
        check_modes(self)
        # Each section checked its own ranges (BOUNDS) when it was built; here: what
        # reads several fields or sections.
        e, a, p = self.env, self.pool, self.privacy
        if e.demand == "rossmann" and not e.demand_file:
            raise ValueError(
                "env.demand=rossmann needs env.demand_file (the path of "
                "Rossmann's train.csv)."
            )
        if (
            a.zones == "additive"
            and a.method == "output_perturbation"
            and e.num_products > 1
        ):
            raise ValueError(
                "pool.method=output_perturbation bounds each released Q entry by "
                "its range [0, H - h]; additive part tables are centred and "
                "leave it. Use pool.zones=paper with output perturbation."
            )
        if a.max_actions < a.action_levels:
            raise ValueError(
                f"pool.max_actions must be >= pool.action_levels; got "
                f"{a.max_actions} < {a.action_levels}."
            )
        if not p.rho > 0:
            raise ValueError(f"privacy.rho must be > 0 (inf for no DP); got {p.rho}.")
        if p.rho_budget is not None and not p.rho_budget > 0:
            raise ValueError(f"privacy.rho_budget must be > 0; got {p.rho_budget}.")
        privacy.validate_delta(p.delta)
        if a.method == "non_private" and not math.isinf(p.rho):
            raise ValueError(
                "pool.method=non_private spends no privacy: set privacy.rho=.inf."
            )
        if math.isinf(p.rho) and a.method != "non_private":
            raise ValueError(
                "privacy.rho=.inf means no noise: use pool.method=non_private."
            )

    @property
    def rho_budget(self) -> float:
        """The run directory's budget (``privacy.rho_budget`` or ``privacy.rho``)."""
        p = self.privacy
        return p.rho if p.rho_budget is None else p.rho_budget


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PoolRunConfig:
    """Load a POOL config.

    A YAML file or a shipped name (``"pool/test"``) plus ``section.key=value``
    overrides.
    """
    return load_config(PoolRunConfig, path, overrides)
