"""PrivORL-n's configuration: frozen dataclasses that the YAML files in ``configs/``
load into."""

from __future__ import annotations

import dataclasses

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import ConfigSource, load_config
from privrl_jax.pipelines._synth_config import PrivacyConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the public and sensitive transitions come from.

    Without files, both are collected from our JAX mazes (the ``-v1`` tasks: D4RL's
    MuJoCo point mass, task settings and data protocol) with the noisy waypoint expert
    (public = medium + large, sensitive = umaze, as in the paper). The ``-legacy`` mazes
    keep the first round's physics.
    """

    sensitive_env: str = "maze2d-umaze-dense-v1"
    public_envs: tuple[str, ...] = ("maze2d-medium-dense-v1", "maze2d-large-dense-v1")
    sensitive_size: int = 20_000
    public_size: int = 20_000
    holdout_size: int = 2_000
    action_noise: float = 0.5
    sensitive_file: str | None = None
    public_files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Residual-MLP denoiser (paper scale: width 1024, depth 6)."""

    width: int = 256
    depth: int = 3
    fourier_dim: int = 16
    layer_norm: bool = False
    # Model s' - s rather than s' (see `diffusion.TransitionLayout`). Not in the paper;
    # on umaze, at equal training, it cut the synthetic transitions' position error
    # 4.6-6x non-private (2.6x under DP at eps = 10) and their velocity error 1.3-1.7x.
    next_obs_delta: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig(_synth_config.PretrainConfig):
    """Non-private pre-training on public data (``steps = 0`` disables it: the DPDM
    ablation).

    ``reuse_from`` names a PrivORL-n run directory whose finished pre-training this run
    starts from instead of pre-training again. Pre-training reads public data only, so
    one pre-trained model serves every epsilon of a sweep (PrivORL pre-trains once and
    fine-tunes per budget); the source run's seed, model, public data,
    ``synthesis.ema_decay`` and this section (but ``reuse_from``) must equal this run's,
    so the model is the one this run would have trained.
    """

    steps: int = 4_000
    batch_size: int = 256
    pool_size: int = 4_096
    steps_per_epoch: int = 1_000
    reuse_from: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(_synth_config.FinetuneConfig):
    """DP-SGD fine-tuning on the sensitive transitions (paper: 5 epochs, C = 1, Opacus
    defaults)."""

    batch_size: int = 256
    microbatch_size: int = 64
    num_noise: int = 1
    clip_method: _synth_config.ClipMethod = "vmap"
    checkpoint_every: int = 50
    # FineCur ablation (PrivORL Fig. 4): > 0 adds round(rate * batch_size) of the most
    # curious synthetic samples to every DP batch. They come from the model being
    # released, so they cost no budget; the real Poisson batch is kept whole (dropping
    # sampled rows would only waste budget).
    curiosity_rate: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.batch_size % self.microbatch_size:
            raise ValueError(
                f"finetune.microbatch_size={self.microbatch_size} should divide "
                "finetune.batch_size="
                f"{self.batch_size} so a typical Poisson batch fills whole "
                "microbatches."
            )
        _synth_config.check_rate("finetune.curiosity_rate", self.curiosity_rate)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    num_samples: int = 20_000
    batch_size: int = 5_000
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    # Declared action bounds (public: the env's action space); synthetic actions are
    # clipped to them, as the env would clip them. An empty list leaves them as sampled.
    action_bounds: tuple[float, ...] = (-1.0, 1.0)

    def __post_init__(self):
        _synth_config.check_at_least_one(
            "synthesis", self, "num_samples", "batch_size", "num_sampling_steps"
        )
        _synth_config.check_release_rows("synthesis.num_samples", self.num_samples)
        _synth_config.check_action_bounds(self.action_bounds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(_synth_config.EvalConfig):
    """How the release is audited: the agents of the shared `EvalConfig`; the audit's
    membership-inference attack on ``mia_size`` members and non-members, and its plots.
    """

    mia: bool = True
    mia_size: int = 1_000
    # Noise draws per level averaged into each candidate's loss: the loss of one draw is
    # mostly the draw's own variance, which hides a member's lower expected loss
    # (Carlini et al. 2023, "Extracting training data from diffusion models", average
    # many draws the same way).
    mia_noise_draws: int = 4
    plots: bool = True
    # The anchors that show whether the fidelity can see the DP fine-tuning at all: the
    # same scores for samples of the pre-trained model alone (PrivORL Table IV: public
    # data only, eps = 0) and for the real holdout (another sample of the sensitive law:
    # the finite-sample floor).
    anchors: bool = True
    # Also train the agents on the pre-training-only samples (as many agent runs again
    # as the release).
    anchor_agents: bool = False
    backend: _synth_config.EvalBackend = "jax"

    def __post_init__(self):
        _synth_config.check_at_least_one("eval", self, "mia_size", "mia_noise_draws")
        super().__post_init__()


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLNConfig(_synth_config.SynthPipelineConfig):
    """Everything a PrivORL-n run needs; the YAML files shipped in
    ``privrl_jax/configs/privorl_n/``
    load into it (by name, e.g. ``load("privorl_n/quickstart")``)."""

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    pretrain: PretrainConfig = PretrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PrivORLNConfig:
    """Loads a PrivORL-n config: a YAML file or a shipped name
    (``"privorl_n/quickstart"``) plus
    ``section.key=value`` overrides."""
    return load_config(PrivORLNConfig, path, overrides)
