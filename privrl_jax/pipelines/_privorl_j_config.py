"""PrivORL-j's configuration: frozen dataclasses that ``configs/privorl_j/*.yaml`` load into."""

from __future__ import annotations

import dataclasses

from privrl_jax import privacy
from privrl_jax.pipelines._config import ConfigSource, load_config
from privrl_jax.pipelines._privorl_n_config import PrivacyConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the public and sensitive trajectories come from, and how they are cut.

    Without files, both are collected from our JAX mazes with D4RL's maze2d protocol (the ``-v1``
    tasks; public = medium + large, sensitive = umaze, as in the paper). ``num_envs`` collector
    streams each run until ``size`` transitions are collected; their episodes are the trajectories.

    ``horizon`` is H; ``max_fragments`` F is public: a sensitive trajectory longer than F H steps
    is truncated to its first F H steps (one trajectory stays one privacy unit). Choose F H at
    least the env's time limit (maze2d-umaze: 300 steps) and nothing is ever cut.
    ``holdout_trajectories`` sensitive trajectories (a seed-fixed choice) are never trained on.
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The synthesizer: ``kind: transformer`` (PrivORL-j's fragment denoiser; paper scale 6 layers,
    4 heads), ``kind: unet`` (the PrivORL-j-U baseline: a 1-D temporal U-Net of width
    ``unet_channels``) or ``kind: dp_transformer`` (the DP-Transformer baseline: a causal
    transformer over transitions, ``synth.StepTransformer``, of ``num_layers`` x ``num_heads`` x
    ``embed_dim``, pre-trained on public fragments without curiosity, DP fine-tuned at trajectory
    level like PrivORL-j, sampled autoregressively; ``fourier_dim``, ``causal``, ``unet_channels``
    and the sampling steps do not apply to it)."""

    kind: str = "transformer"
    unet_channels: int = 32
    num_layers: int = 2
    num_heads: int = 4
    embed_dim: int = 64
    fourier_dim: int = 16
    causal: bool = False
    # Model s' - s rather than s' (as PrivORL-n's default; see `diffusion.TransitionLayout`).
    next_obs_delta: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    """Non-private pre-training on public fragments (``steps = 0`` disables it)."""

    steps: int = 2_000
    batch_size: int = 64
    learning_rate: float = 3e-4
    curiosity_rate: float = 0.3
    pool_size: int = 256
    steps_per_epoch: int = 500
    chunk_steps: int = 250
    num_sampling_steps: int = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """Trajectory-level DP-SGD: ``batch_size`` is the expected number of *trajectories* per step.

    ``clip_method``: ``vmap`` (measured faster than ghost clipping for this transformer on CPU,
    see docs/privorl_j.md) or ``ghost``.
    """

    epochs: float = 5.0
    batch_size: int = 32
    learning_rate: float = 3e-4
    l2_clip_norm: float = 1.0
    microbatch_size: int = 16
    clip_method: str = "vmap"
    checkpoint_every: int = 25


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    """``num_trajectories`` stitched trajectories of ``episode_length`` steps (cut earlier at a
    generated terminal), sampled ``batch_size`` at a time with the EMA weights.

    ``stop_at_terminal: false`` is for tasks without terminal states (maze2d: D4RL's mazes never
    terminate, a public fact about the env): generated d is then ignored and written as 0, and
    every trajectory runs ``episode_length`` steps and ends with a timeout.
    """

    num_trajectories: int = 500
    episode_length: int = 128
    batch_size: int = 250
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    action_bounds: tuple[float, ...] = (-1.0, 1.0)
    stop_at_terminal: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """Agents trained on the release (and, in the audit, on the real trajectories); the
    final-evaluations protocol of PrivORL-n's `EvalConfig`."""

    agents: tuple[str, ...] = ("td3bc",)
    agent_updates: int = 10_000
    agent_chunk: int = 1_000
    agent_seeds: int = 1
    final_evals: int = 1
    eval_episodes: int = 50
    train_real_agents: bool = True
    backend: str = "jax"
    # TrajScore (audit): window = data.horizon steps, MLP autoencoder trained on public windows.
    trajscore: bool = True
    trajscore_steps: int = 2_000

    def __post_init__(self):
        if self.backend not in ("jax", "mujoco"):
            raise ValueError(f"eval.backend={self.backend!r}: expected one of ['jax', 'mujoco']")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLJConfig:
    """Everything a PrivORL-j run needs (``load("privorl_j/test")`` etc.).

    ``privacy.dataset_size``, when given, declares the number of sensitive *trajectories*.
    """

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    pretrain: PretrainConfig = PretrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        p, f, d, s = self.privacy, self.finetune, self.data, self.synthesis
        if not p.epsilon > 0:
            raise ValueError(f"privacy.epsilon must be > 0 (inf for no DP); got {p.epsilon}.")
        privacy.validate_delta(p.delta)
        if p.accountant not in ("rdp", "pld"):
            raise ValueError(f"privacy.accountant must be 'rdp' or 'pld'; got {p.accountant!r}.")
        if p.dataset_size is not None and p.dataset_size < 2:
            raise ValueError(f"privacy.dataset_size must be an int >= 2 or empty; got {p.dataset_size}.")
        for name, value in (("data.horizon", d.horizon), ("data.max_fragments", d.max_fragments),
                            ("synthesis.episode_length", s.episode_length),
                            ("synthesis.num_trajectories", s.num_trajectories),
                            ("synthesis.batch_size", s.batch_size), ("finetune.batch_size", f.batch_size),
                            ("finetune.microbatch_size", f.microbatch_size)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1; got {value}.")
        if f.clip_method not in ("vmap", "ghost"):
            raise ValueError(f"finetune.clip_method must be 'vmap' or 'ghost'; got {f.clip_method!r}.")
        if not 0 <= self.pretrain.curiosity_rate <= 1:
            raise ValueError(f"pretrain.curiosity_rate must be in [0, 1]; got {self.pretrain.curiosity_rate}.")
        if self.pretrain.steps % self.pretrain.chunk_steps or self.pretrain.steps_per_epoch % self.pretrain.chunk_steps:
            raise ValueError("pretrain.steps and pretrain.steps_per_epoch must be multiples of pretrain.chunk_steps.")
        if self.model.kind not in ("transformer", "unet", "dp_transformer"):
            raise ValueError(f"model.kind must be 'transformer', 'unet' or 'dp_transformer'; got {self.model.kind!r}.")
        if self.model.kind == "unet" and d.horizon % 2:
            raise ValueError(f"model.kind=unet needs an even data.horizon; got {d.horizon}.")
        if self.model.embed_dim % self.model.num_heads:
            raise ValueError(f"model.embed_dim={self.model.embed_dim} must be divisible by model.num_heads.")
        bounds = s.action_bounds
        if bounds and (len(bounds) != 2 or not bounds[0] < bounds[1]):
            raise ValueError(f"synthesis.action_bounds must be [low, high] with low < high, or []; got {list(bounds)}.")
        # Lazy: loading a config needs no jax otherwise.
        from privrl_jax.envs import check_eval_backend

        check_eval_backend(self.eval.backend, d.sensitive_env, key="eval.backend")
        if self.eval.agent_updates % self.eval.agent_chunk:
            raise ValueError("eval.agent_updates must be a multiple of eval.agent_chunk.")
        if self.eval.agent_seeds < 1:
            raise ValueError(f"eval.agent_seeds={self.eval.agent_seeds}: expected >= 1.")
        if not 1 <= self.eval.final_evals <= self.eval.agent_updates // self.eval.agent_chunk:
            raise ValueError("eval.final_evals must be between 1 and eval.agent_updates / eval.agent_chunk.")


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PrivORLJConfig:
    """Loads a PrivORL-j config: a YAML file or a shipped name (``"privorl_j/umaze"``) plus
    ``section.key=value`` overrides."""
    return load_config(PrivORLJConfig, path, overrides)
