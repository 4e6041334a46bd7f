"""PrivORL-j's configuration: frozen dataclasses that ``configs/privorl_j/*.yaml`` load
into."""

from __future__ import annotations

import dataclasses
from typing import Literal

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import ConfigSource, load_config
from privrl_jax.pipelines._synth_config import PrivacyConfig

ModelKind = Literal["transformer", "unet", "dp_transformer"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the public and sensitive trajectories come from, and how they are cut.

    Without files, both are collected from our JAX mazes with D4RL's maze2d protocol
    (the ``-v1`` tasks; public = medium + large, sensitive = umaze, as in the paper).
    ``num_envs`` collector streams each run until ``size`` transitions are collected;
    their episodes are the trajectories.

    ``horizon`` is H; ``max_fragments`` F is public: a sensitive trajectory longer than
    F H steps is truncated to its first F H steps (one trajectory stays one privacy
    unit). Choose F H at least the env's time limit (maze2d-umaze: 300 steps) and
    nothing is ever cut. ``holdout_trajectories`` sensitive trajectories (a seed-fixed
    choice) are never trained on.
    """

    sensitive_env: str = "maze2d-umaze-v1"
    public_envs: tuple[str, ...] = ("maze2d-medium-v1", "maze2d-large-v1")
    sensitive_size: int = 20_000
    public_size: int = 20_000
    holdout_trajectories: int = 20
    action_noise: float = 0.5
    num_envs: int = 20
    sensitive_file: str | None = None
    public_files: tuple[str, ...] = ()
    horizon: int = 32
    max_fragments: int = 10

    def __post_init__(self):
        _synth_config.check_at_least_one("data", self, "horizon", "max_fragments")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The synthesizer: ``kind: transformer`` (PrivORL-j's fragment denoiser; paper
    scale 6 layers,
    4 heads), ``kind: unet`` (the PrivORL-j-U baseline: a 1-D temporal U-Net of width
    ``unet_channels``) or ``kind: dp_transformer`` (the DP-Transformer baseline: a
    causal transformer over transitions, ``synth.StepTransformer``, of ``num_layers`` x
    ``num_heads`` x ``embed_dim``, pre-trained on public fragments without curiosity, DP
    fine-tuned at trajectory level like PrivORL-j, sampled autoregressively;
    ``fourier_dim``, ``causal``, ``unet_channels`` and the sampling steps do not apply
    to it)."""

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

    def __post_init__(self):
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"model.embed_dim={self.embed_dim} must be divisible by "
                "model.num_heads."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig(_synth_config.PretrainConfig):
    """Non-private pre-training on public fragments (``steps = 0`` disables it)."""

    steps: int = 2_000
    batch_size: int = 64
    pool_size: int = 256
    steps_per_epoch: int = 500


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(_synth_config.FinetuneConfig):
    """Trajectory-level DP-SGD: ``batch_size`` is the expected number of *trajectories*
    per step.

    ``clip_method``: ``vmap`` (measured faster than ghost clipping for this transformer
    on CPU, see docs/privorl_j.md) or ``ghost``.
    """

    batch_size: int = 32
    microbatch_size: int = 16
    clip_method: _synth_config.ClipMethod = "vmap"
    checkpoint_every: int = 25


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    """``num_trajectories`` stitched trajectories of ``episode_length`` steps (cut
    earlier at a
    generated terminal), sampled ``batch_size`` at a time with the EMA weights.

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
    action_bounds: tuple[float, ...] = (-1.0, 1.0)
    stop_at_terminal: bool = True

    def __post_init__(self):
        _synth_config.check_at_least_one(
            "synthesis", self, "episode_length", "num_trajectories", "batch_size"
        )
        _synth_config.check_release_rows(
            "synthesis.num_trajectories x synthesis.episode_length",
            self.num_trajectories * self.episode_length,
        )
        _synth_config.check_action_bounds(self.action_bounds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(_synth_config.EvalConfig):
    """Agents trained on the release (and, in the audit, on the real trajectories): the
    shared
    `EvalConfig`; the audit adds TrajScore and the anchors."""

    backend: _synth_config.EvalBackend = "jax"
    # TrajScore (audit): window = data.horizon steps, MLP autoencoder trained on public
    # windows.
    trajscore: bool = True
    trajscore_steps: int = 2_000
    # The anchors that show whether the fidelity can see the DP fine-tuning at all: the
    # same scores for samples of the pre-trained model alone (no sensitive step) and
    # for the held-out real trajectories (the finite-sample floor).
    anchors: bool = True


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
    """Loads a PrivORL-j config: a YAML file or a shipped name (``"privorl_j/umaze"``)
    plus
    ``section.key=value`` overrides."""
    return load_config(PrivORLJConfig, path, overrides)
