"""The marginal-based baselines' configuration (PGM, MST, AIM, PrivSyn).

Frozen dataclasses the YAML files in ``configs/marginal/`` load into. Data, privacy and
synthesis sizes mean what they mean in PrivORL-n, so the same transitions are released
under the same budget and scored the same way.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import ClassVar, Literal

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import (
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    MAX_WIDTH,
    Bound,
    ConfigSource,
    Section,
    at_least,
    load_config,
    positive,
)
from privrl_jax.pipelines._privorl_n_config import DataConfig
from privrl_jax.pipelines._sections import PrivacyConfig

Model = Literal["pgm", "mst", "privsyn", "aim"]
MODELS = typing.get_args(Model)

DEFAULTS = "marginal/defaults"  # the baseline's own defaults, under every config


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(Section):
    """Which synthesizer, its public discretisation and mbi's estimation.

    ``obs_low`` / ``obs_high`` / ``act_low`` / ``act_high`` are public bounds; left
    empty they are the sensitive env's observation and action spaces (the task's
    declaration, never the data's range). ``reward_range`` is declared (the dense maze
    reward exp(-distance) lies in [0, 1]). ``cliques`` (PGM only) lists the measured
    marginals by column name (``obs0``, ``act1``, ``reward``, ``next_obs2``,
    ``terminal``); empty: `synth.default_transition_cliques`. ``mst_split`` shares the
    budget (as rho) among MST's 1-way, selection and 2-way releases.
    ``update_iterations`` is PrivSyn's number of GUM rounds (``iters`` is mbi's, unused
    by PrivSyn, which fits no graphical model).

    AIM (`synth.fit_aim`): ``aim_max_clique_size`` is k of its workload (every k-way
    marginal; the candidates are every clique of 1..k columns); ``aim_max_model_size``
    caps the junction tree's size in MB (mbi's ``hypothetical_model_size``; the cap
    grows with the share of the budget spent, as in AIM); ``aim_rounds`` is AIM's T:
    a round is first priced at rho / T and the d 1-way marginals count as d rounds'
    measurements, so at most T - 0.9 d selection rounds run (fewer once annealing
    raises a round's rho); ``aim_round_iters`` are mbi's mirror-descent steps of each
    round's warm-started re-estimation (``iters`` those of the final fit). Each round
    costs one mbi compile (~10 s on a 2-core CPU), whatever its iterations.
    """

    name: Model = "pgm"
    obs_bins: int = 32
    act_bins: int = 16
    reward_bins: int = 16
    reward_range: tuple[float, float] = (0.0, 1.0)
    obs_low: tuple[float, ...] = ()
    obs_high: tuple[float, ...] = ()
    act_low: tuple[float, ...] = ()
    act_high: tuple[float, ...] = ()
    cliques: tuple[tuple[str, ...], ...] = ()
    # Bin s' - s on [-b_i, b_i] (b_i declared from the task's physics) instead of s' on
    # the observation space; empty: bin s'. See `synth.transition_discretisation`.
    next_obs_delta_bound: tuple[float, ...] = ()
    iters: int = 1000
    mst_split: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    update_iterations: int = 50
    aim_max_clique_size: int = 2
    aim_max_model_size: float = 20.0
    aim_rounds: int = 24
    aim_round_iters: int = 1000

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "obs_bins": at_least(1, MAX_WIDTH),
        "act_bins": at_least(1, MAX_WIDTH),
        "reward_bins": at_least(1, MAX_WIDTH),
        "iters": at_least(1, MAX_STEPS),
        "mst_split": positive(1.0),
        "update_iterations": at_least(1, MAX_STEPS),
        "aim_max_clique_size": at_least(1, MAX_COUNT),
        "aim_max_model_size": positive(1e6),  # MB
        "aim_rounds": at_least(1, MAX_COUNT),
        "aim_round_iters": at_least(1, MAX_STEPS),
    }

    SECTION = "model"

    def __post_init__(self):
        super().__post_init__()
        # MST's three shares of rho; checked here, before any run directory exists
        # (`synth.fit_mst` checks it again, but only after the ledger was opened).
        if not math.isclose(sum(self.mst_split), 1.0, rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError(
                "model.mst_split must be three shares of rho that sum to 1; got "
                f"{list(self.mst_split)} (sum {sum(self.mst_split):g})."
            )
        lo, hi = self.reward_range
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(
                "model.reward_range must be [low, high] with low < high; got "
                f"{list(self.reward_range)}."
            )
        for a, b in (("obs_low", "obs_high"), ("act_low", "act_high")):
            if len(getattr(self, a)) != len(getattr(self, b)):
                raise ValueError(
                    f"model.{a} and model.{b} must have the same length (or both be "
                    "empty)."
                )
        if any(not b > 0 for b in self.next_obs_delta_bound):
            raise ValueError(
                "model.next_obs_delta_bound must be positive numbers; got "
                f"{list(self.next_obs_delta_bound)}."
            )
        if self.cliques and self.name != "pgm":
            raise ValueError(
                "model.cliques is PGM's fixed marginal set; MST selects its own (leave "
                "it empty)."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig(Section):
    """``num_samples`` rows are sampled from the fitted model with mbi's sampler.

    With a public seed.
    """

    num_samples: int = 20_000
    sample_seed: int = 0

    BOUNDS: ClassVar[dict[str, Bound]] = {"num_samples": at_least(1, MAX_ROWS)}

    SECTION = "synthesis"


# The shared section; the baselines' defaults (no agents) are in
# configs/marginal/defaults.yaml.
EvalConfig = _synth_config.EvalConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class MarginalConfig(_synth_config.SynthPipelineConfig):
    """Everything a PGM / MST / AIM / PrivSyn run needs.

    For example ``load("marginal/pgm_umaze")``.

    ``data`` is PrivORL-n's section: the public data are read only to fit the fidelity
    scores' normaliser in the audit (the synthesizer itself uses none), so scores sit
    beside PrivORL-n's.
    """

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        super().__post_init__()
        if self.model.name == "aim" and self.privacy.accountant == "pld":
            raise ValueError(
                "model.name=aim records its exponential-mechanism selections as "
                "ZCDpEvent, which dp-accounting's PLD accountant does not support; "
                "set privacy.accountant=rdp."
            )


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> MarginalConfig:
    """Load a PGM / MST config.

    A YAML file or a shipped name (``"marginal/pgm_umaze"``) plus ``section.key=value``
    overrides.
    """
    return _synth_config.check_data_sources(
        load_config(MarginalConfig, path, overrides, defaults=DEFAULTS)
    )
