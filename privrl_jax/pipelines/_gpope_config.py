"""GPOPE's configuration: frozen dataclasses that ``configs/gpope/*.yaml`` load into."""

from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar, Literal

from privrl_jax.pipelines._audit_run import AuditConfig
from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    UNIT,
    Bound,
    ConfigSource,
    Section,
    at_least,
    check_modes,
    load_config,
    positive,
)
from privrl_jax.pipelines._sections import PrivacyConfig

# GPOPE's own defaults (epsilon = 1, delta = 1e-5), under every config.
DEFAULTS = "gpope/defaults"

# Modes are Literal types: the one loader checks them (`_config.check_modes`).
Sampler = Literal["uniform_one", "poisson"]
SAMPLERS = typing.get_args(Sampler)
EnvName = Literal["chain", "mountain_car", "hiv"]
ENVS = typing.get_args(EnvName)
Normalization = Literal["horizon", "mean"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainConfig(Section):
    """The environment and its data: the medical chain, Mountain Car or HIV.

    ``name`` is ``chain`` (the medical chain MDP, ``privrl_jax.ope.medical_chain``),
    ``mountain_car`` (gymnax's MountainCar-v0) or ``hiv`` (Adams et al.'s HIV simulator,
    Ernst et al.'s task).

    Shared: ``gamma``, ``num_trajectories`` (m) and ``max_length`` (T, the padded
    length) are public: the plan's dataset size and the per-trajectory weight 1/T come
    from them.

    Chain only: ``num_states``, ``treatment_cost``; ``behaviour_treat`` /
    ``target_treat`` give each health level's probability of treating (one value: the
    same at every level).

    Mountain Car and HIV only: behaviour and target are epsilon-soft versions of one
    hand-coded controller (energy pumping; for HIV both drugs while log10 V >
    ``hiv_threshold_log10``) with ``behaviour_epsilon`` > ``target_epsilon``;
    ``reward_scale`` multiplies rewards (a public unit change that keeps values O(1));
    features are ``num_tilings`` tilings of ``tiles_per_dim`` tiles (Mountain Car: one
    2-D coder; HIV: one 1-D coder per log10 concentration) plus a constant, scaled to
    unit norm; ``hiv_init_log10_spread`` spreads HIV's start state.
    """

    name: EnvName = "chain"
    num_states: int = 5
    gamma: float = 0.9
    treatment_cost: float = 0.1
    behaviour_treat: tuple[float, ...] = (0.3,)
    target_treat: tuple[float, ...] = (0.9, 0.8, 0.6, 0.4, 0.2)
    num_trajectories: int = 1_000
    max_length: int = 20
    behaviour_epsilon: float = 0.5
    target_epsilon: float = 0.1
    reward_scale: float = 1.0
    tiles_per_dim: int = 6
    num_tilings: int = 4
    hiv_threshold_log10: float = 4.0
    hiv_init_log10_spread: float = 0.1

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_states": at_least(1, MAX_BATCH),
        "gamma": Bound(0.0, 1.0, high_open=True),
        "behaviour_treat": UNIT,
        "target_treat": UNIT,
        "num_trajectories": at_least(2, MAX_ROWS),
        "max_length": at_least(1, MAX_STEPS),
        "behaviour_epsilon": Bound(0.0, 1.0, low_open=True),
        "target_epsilon": UNIT,
        "reward_scale": positive(),
        "tiles_per_dim": at_least(1, MAX_COUNT),
        "num_tilings": at_least(1, MAX_COUNT),
        "hiv_init_log10_spread": at_least(0.0, 1e3),
    }

    SECTION = "env"

    def __post_init__(self):
        super().__post_init__()
        # The trajectories are held in memory, [m, T] steps of features.
        steps = self.num_trajectories * self.max_length
        if steps > MAX_ROWS:
            raise ValueError(
                f"env.num_trajectories x env.max_length = {steps:.3g} steps, more "
                f"than {MAX_ROWS:,} (the data are held in memory); lower them."
            )


EnvConfig = ChainConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class TruthConfig(Section):
    """Monte Carlo V^pi for the audit of the continuous envs.

    Public seed, model access.

    ``eval_states`` states from the env's start distribution, each rolled forward under
    the target policy for U[0, ``eval_max_steps``) steps; ``rollouts`` rollouts of
    ``horizon`` steps from each (``privrl_jax.ope._montecarlo``). The chain ignores it
    (exact values by a linear solve).
    """

    eval_states: int = 64
    eval_max_steps: int = 100
    rollouts: int = 32
    horizon: int = 300

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "eval_states": at_least(1, MAX_BATCH),
        "eval_max_steps": at_least(0, MAX_STEPS),
        "rollouts": at_least(1, MAX_BATCH),
        "horizon": at_least(1, MAX_STEPS),
    }

    SECTION = "truth"

    def __post_init__(self):
        super().__post_init__()
        if self.eval_states * self.rollouts > MAX_ROWS:
            raise ValueError(
                "truth.eval_states x truth.rollouts = "
                f"{self.eval_states * self.rollouts:.3g} rollouts, more than "
                f"{MAX_ROWS:,}; lower them."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class GPOPEConfig(Section):
    """Algorithm 1: sampler, clip norm h, N steps, step size beta_j.

    ``sampler``: ``uniform_one`` (the paper's one trajectory per step, replace-one,
    sensitivity 2h) or ``poisson`` (expected ``batch_size`` b trajectories per step,
    add/remove-one, sensitivity h). Step size:
    ``beta_j = step_size / (1 + j / decay_steps) ** decay_power`` (constant when
    ``decay_steps`` is empty).
    """

    sampler: Sampler = "uniform_one"
    batch_size: float = 10.0
    microbatch_size: int = 16
    l2_clip_norm: float = 0.5
    steps: int = 2_000
    step_size: float = 0.5
    decay_steps: float | None = None
    decay_power: float = 1.0
    normalization: Normalization = "horizon"
    checkpoint_every: int = 200

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "batch_size": positive(MAX_BATCH),
        "microbatch_size": at_least(1, MAX_BATCH),
        "l2_clip_norm": positive(),
        "steps": at_least(1, MAX_STEPS),
        "step_size": positive(),
        "decay_steps": positive(),
        "decay_power": at_least(0.0, 1e3),
        "checkpoint_every": at_least(1, MAX_STEPS),
    }

    SECTION = "gpope"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GPOPERunConfig:
    """Everything a GPOPE run needs (``privrl ope run``).

    ``seed`` is public randomness: the simulated data collection. ``plots`` writes
    ``values.png`` (release) and ``audit/values_vs_truth.png`` (audit).
    """

    seed: int = 0
    plots: bool = True
    env: ChainConfig = ChainConfig()
    gpope: GPOPEConfig = GPOPEConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    truth: TruthConfig = TruthConfig()
    audit: AuditConfig = AuditConfig()

    def __post_init__(self):
        check_modes(self)
        e, g, p = self.env, self.gpope, self.privacy
        if not isinstance(self.plots, bool):
            # ValueError like every other key: the CLI reports it on one line.
            raise ValueError(f"plots must be true or false; got {self.plots!r}.")  # noqa: TRY004
        # Each section checked its own ranges (BOUNDS) when it was built; here: what
        # reads several fields or sections.
        for name in ("behaviour_treat", "target_treat"):
            probs = getattr(e, name)
            if len(probs) not in (1, e.num_states) or not all(
                0 <= x <= 1 for x in probs
            ):
                raise ValueError(
                    f"env.{name} must hold 1 or env.num_states={e.num_states} "
                    f"probabilities in [0, 1]; got {list(probs)}."
                )
        beh, tgt = self.treat_probs("behaviour_treat"), self.treat_probs("target_treat")
        # Importance ratios need pi_b(a|s) > 0 wherever pi(a|s) > 0.
        if any((t > 0 and b == 0) or (t < 1 and b == 1) for b, t in zip(beh, tgt)):
            raise ValueError(
                "env.behaviour_treat must give every action the target takes a "
                "probability "
                f"> 0 (behaviour {list(beh)}, target {list(tgt)})."
            )
        if g.sampler == "poisson" and not 0 < g.batch_size <= e.num_trajectories:
            raise ValueError(
                f"gpope.batch_size (expected trajectories per step) must be in (0, "
                f"env.num_trajectories={e.num_trajectories}]; got {g.batch_size}."
            )
        if p.dataset_size is not None:
            raise ValueError(
                "privacy.dataset_size: GPOPE's number of privacy units is "
                "env.num_trajectories (public); leave privacy.dataset_size empty."
            )
        if p.accountant == "pld" and g.sampler == "uniform_one":
            raise ValueError(
                "privacy.accountant=pld cannot account gpope.sampler=uniform_one "
                "(dp-accounting's PLD accountant refuses sampling without "
                "replacement); "
                "use rdp, or the poisson sampler."
            )

    def treat_probs(self, name: str) -> tuple[float, ...]:
        """``env.<name>`` broadcast to one probability per health level."""
        probs = getattr(self.env, name)
        return probs * self.env.num_states if len(probs) == 1 else probs


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> GPOPERunConfig:
    """Load a GPOPE config.

    A YAML file or a shipped name (``"gpope/chain"``) plus ``section.key=value``
    overrides.
    """
    return load_config(GPOPERunConfig, path, overrides, defaults=DEFAULTS)
