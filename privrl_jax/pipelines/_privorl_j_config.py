"""PrivORL-j's configuration: frozen dataclasses its YAML configs load into."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import (
    DECAY,
    MAX_BATCH,
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    MAX_WIDTH,
    Bound,
    ConfigSource,
    Section,
    at_least,
    load_config,
)
from privrl_jax.pipelines._sections import PrivacyConfig

DEFAULTS = "privorl_j/defaults"  # PrivORL-j's own defaults, under every config
ModelKind = Literal["transformer", "unet", "dp_transformer"]
FinetuneEMA = Literal["warmup", "fixed", "last"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(_synth_config.DataConfig):
    """The data section: the shared one, and how trajectories are collected and cut.

    The shared section is `_synth_config.DataConfig`; PrivORL-j's defaults, the
    sparse-reward ``-v1`` mazes, are in ``configs/privorl_j/defaults.yaml``.

    ``num_envs`` collector streams each run until ``*_size`` transitions are collected;
    their episodes are the trajectories.

    ``horizon`` is H; ``max_fragments`` F is public: a sensitive trajectory longer than
    F H steps is truncated to its first F H steps (one trajectory stays one privacy
    unit). Choose F H at least the env's time limit (maze2d-umaze: 300 steps) and
    nothing is ever cut. ``holdout_trajectories`` sensitive trajectories (a seed-fixed
    choice) are never trained on.
    """

    holdout_trajectories: int = 20
    num_envs: int = 20
    horizon: int = 32
    max_fragments: int = 10

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "holdout_trajectories": at_least(1, MAX_ROWS),
        "num_envs": at_least(1, MAX_BATCH),
        "horizon": at_least(1, MAX_STEPS),
        "max_fragments": at_least(1, MAX_STEPS),
    }


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(Section):
    """The synthesizer: a fragment transformer, a U-Net, or a DP-Transformer baseline.

    ``kind: transformer`` (PrivORL-j's fragment denoiser; paper scale 6 layers, 4
    heads), ``kind: unet`` (the PrivORL-j-U baseline: a 1-D temporal U-Net of width
    ``unet_channels``) or ``kind: dp_transformer`` (the DP-Transformer baseline: a
    causal transformer over transitions, ``synth.StepTransformer``, of ``num_layers`` x
    ``num_heads`` x ``embed_dim``, pre-trained on public fragments without curiosity, DP
    fine-tuned at trajectory level like PrivORL-j, sampled autoregressively;
    ``fourier_dim``, ``causal``, ``unet_channels`` and the sampling steps do not apply
    to it).
    """

    kind: ModelKind = "transformer"
    unet_channels: int = 32
    num_layers: int = 2
    num_heads: int = 4
    embed_dim: int = 64
    fourier_dim: int = 16
    causal: bool = False
    # Model s' - s rather than s' (as PrivORL-n's default; see
    # `diffusion.TransitionLayout`).
    next_obs_delta: bool = True

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "unet_channels": at_least(1, MAX_WIDTH),
        "num_layers": at_least(1, MAX_COUNT),
        "num_heads": at_least(1, MAX_COUNT),
        "embed_dim": at_least(1, MAX_WIDTH),
        "fourier_dim": at_least(0, MAX_WIDTH),
    }

    SECTION = "model"

    def __post_init__(self):
        super().__post_init__()
        _synth_config.check_even("model.fourier_dim", self.fourier_dim)
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"model.embed_dim={self.embed_dim} must be divisible by "
                "model.num_heads."
            )


# PrivORL-j's pre-training and fine-tuning are the shared sections; its defaults (fewer,
# smaller pre-training steps; 32 trajectories a DP step) are in
# configs/privorl_j/defaults.yaml.
PretrainConfig = _synth_config.PretrainConfig
FinetuneConfig = _synth_config.FinetuneConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig(Section):
    """The synthesis section: how many stitched trajectories are sampled, and how.

    ``num_trajectories`` stitched trajectories of ``episode_length`` steps (cut earlier
    at a generated terminal), sampled ``batch_size`` at a time with the EMA weights.

    ``finetune_ema`` is the EMA schedule of the DP fine-tune, whose EMA is released:
    ``warmup`` (default) decays by min(``ema_decay``, (1 + t) / (10 + t)) at step t,
    TensorFlow's ``num_updates`` warm-up; ``fixed`` by ``ema_decay`` from the first
    step; ``last`` releases the last iterate (no EMA). Pre-training always uses the
    fixed ``ema_decay``. The default was confirmed by a rule fixed in advance on a
    stand-in maze (experiment ``privorl_j_ema_tuning``).

    ``stop_at_terminal: false`` is for tasks without terminal states (maze2d: D4RL's
    mazes never terminate, a public fact about the env): generated d is then ignored and
    written as 0, and every trajectory runs ``episode_length`` steps and ends with a
    timeout.
    """

    num_trajectories: int = 500
    episode_length: int = 128
    batch_size: int = 250
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    finetune_ema: FinetuneEMA = "warmup"
    action_bounds: tuple[float, ...] = (-1.0, 1.0)
    stop_at_terminal: bool = True

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_trajectories": at_least(1, MAX_ROWS),
        "episode_length": at_least(1, MAX_STEPS),
        "batch_size": at_least(1, MAX_BATCH),
        "num_sampling_steps": at_least(1, MAX_COUNT),
        "ema_decay": DECAY,
    }

    SECTION = "synthesis"

    def __post_init__(self):
        super().__post_init__()
        _synth_config.check_release_rows(
            "synthesis.num_trajectories x synthesis.episode_length",
            self.num_trajectories * self.episode_length,
        )
        _synth_config.check_action_bounds(self.action_bounds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(_synth_config.EvalConfig):
    """Agents trained on the release (and, in the audit, on the real trajectories).

    The shared `EvalConfig`, and TrajScore in the audit.
    """

    # TrajScore (audit): window = data.horizon steps, MLP autoencoder trained on public
    # windows.
    trajscore: bool = True
    trajscore_steps: int = 2_000

    BOUNDS: ClassVar[dict[str, Bound]] = {"trajscore_steps": at_least(1, MAX_STEPS)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLJConfig(_synth_config.SynthPipelineConfig):
    """Everything a PrivORL-j run needs (``load("privorl_j/test")`` etc.).

    ``privacy.dataset_size``, when given, declares the number of sensitive
    *trajectories*.
    """

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    pretrain: PretrainConfig = PretrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        if self.model.kind == "unet" and self.data.horizon % 2:
            raise ValueError(
                f"model.kind=unet needs an even data.horizon; got {self.data.horizon}."
            )
        super().__post_init__()


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PrivORLJConfig:
    """Load a PrivORL-j config.

    A YAML file or a shipped name (``"privorl_j/umaze"``) plus ``section.key=value``
    overrides.
    """
    return _synth_config.check_data_sources(
        load_config(PrivORLJConfig, path, overrides, defaults=DEFAULTS)
    )
