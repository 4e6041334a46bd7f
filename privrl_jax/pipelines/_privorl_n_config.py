"""PrivORL-n's configuration: frozen dataclasses the ``configs/`` YAML loads into."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import (
    DECAY,
    MAX_BATCH,
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    MAX_WIDTH,
    UNIT,
    Bound,
    ConfigSource,
    Section,
    at_least,
    load_config,
)
from privrl_jax.pipelines._sections import PrivacyConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(_synth_config.DataConfig):
    """The shared data section (`_synth_config.DataConfig`) and ``holdout_size``.

    ``holdout_size`` sensitive transitions (a seed-fixed choice) are never trained on.
    """

    holdout_size: int = 2_000

    BOUNDS: ClassVar[dict[str, Bound]] = {"holdout_size": at_least(1, MAX_ROWS)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(Section):
    """Residual-MLP denoiser (paper scale: width 1024, depth 6)."""

    width: int = 256
    depth: int = 3
    fourier_dim: int = 16
    layer_norm: bool = False
    # Model s' - s rather than s' (see `diffusion.TransitionLayout`). Not in the paper;
    # on umaze, at equal training, it cut the synthetic transitions' position error
    # 4.6-6x non-private (2.6x under DP at eps = 10) and their velocity error 1.3-1.7x.
    next_obs_delta: bool = True

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "width": at_least(1, MAX_WIDTH),
        "depth": at_least(0, MAX_COUNT),
        "fourier_dim": at_least(0, MAX_WIDTH),
    }

    SECTION = "model"

    def __post_init__(self):
        super().__post_init__()
        _synth_config.check_even("model.fourier_dim", self.fourier_dim)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig(_synth_config.PretrainConfig):
    """The shared pre-training section, plus ``reuse_from``.

    The shared section is `_synth_config.PretrainConfig`.

    ``reuse_from`` names a PrivORL-n run directory whose finished pre-training this run
    starts from instead of pre-training again. Pre-training reads public data only, so
    one pre-trained model serves every epsilon of a sweep (PrivORL pre-trains once and
    fine-tunes per budget); the source run's seed, model, public data,
    ``synthesis.ema_decay`` and this section (but ``reuse_from``) must equal this run's,
    so the model is the one this run would have trained.
    """

    reuse_from: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(_synth_config.FinetuneConfig):
    """The shared DP fine-tuning section, with DPDM's noise multiplicity and FineCur.

    The shared section is `_synth_config.FinetuneConfig`, on the sensitive transitions;
    ``num_noise`` is DPDM's noise multiplicity (noise draws per transition averaged in
    its loss; Dockhorn et al. 2023).
    """

    num_noise: int = 1
    # FineCur ablation (PrivORL Fig. 4): > 0 adds round(rate * batch_size) of the most
    # curious synthetic samples to every DP batch. They come from the model being
    # released, so they cost no budget; the real Poisson batch is kept whole (dropping
    # sampled rows would only waste budget).
    curiosity_rate: float = 0.0

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_noise": at_least(1, MAX_COUNT),
        "curiosity_rate": UNIT,
    }

    def __post_init__(self):
        super().__post_init__()
        if self.batch_size % self.microbatch_size:
            raise ValueError(
                f"finetune.microbatch_size={self.microbatch_size} should divide "
                "finetune.batch_size="
                f"{self.batch_size} so a typical Poisson batch fills whole "
                "microbatches."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig(Section):
    num_samples: int = 20_000
    batch_size: int = 5_000
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    # Declared action bounds (public: the env's action space); synthetic actions are
    # clipped to them, as the env would clip them. An empty list leaves them as sampled.
    action_bounds: tuple[float, ...] = (-1.0, 1.0)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_samples": at_least(1, MAX_ROWS),
        "batch_size": at_least(1, MAX_BATCH),
        "num_sampling_steps": at_least(1, MAX_COUNT),
        "ema_decay": DECAY,
    }

    SECTION = "synthesis"

    def __post_init__(self):
        super().__post_init__()
        _synth_config.check_action_bounds(self.action_bounds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(_synth_config.EvalConfig):
    """How the release is audited.

    The agents of the shared `EvalConfig`; the audit's membership-inference attack on
    ``mia_size`` members and non-members, and its plots.
    """

    mia: bool = True
    mia_size: int = 1_000
    # Noise draws per level averaged into each candidate's loss: the loss of one draw is
    # mostly the draw's own variance, which hides a member's lower expected loss
    # (Carlini et al. 2023, "Extracting training data from diffusion models", average
    # many draws the same way).
    mia_noise_draws: int = 4
    plots: bool = True
    # Also train the agents on the pre-training-only samples (as many agent runs again
    # as the release).
    anchor_agents: bool = False
    # Their update budget (None: ``agent_updates``). The pre-training-only samples lie
    # mostly outside the sensitive maze, and their agent does not learn at any budget
    # we ran, so the quickstart gives it a smaller one.
    anchor_agent_updates: int | None = None
    # The real-data agents (``train_real_agents``) read from this cache when it was made
    # for this run's rows and agent protocol, else trained live; a name under the
    # package's configs or a .json path (`pipelines._synth.anchor_cache`).
    real_agents_cache: str | None = None

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "mia_size": at_least(1, MAX_ROWS),
        "mia_noise_draws": at_least(1, MAX_COUNT),
        "anchor_agent_updates": at_least(1, MAX_STEPS),
    }

    def __post_init__(self):
        super().__post_init__()
        n = self.anchor_agent_updates
        if n is not None and (
            n < 1 or n % self.agent_chunk or n // self.agent_chunk < self.final_evals
        ):
            raise ValueError(
                "eval.anchor_agent_updates must be a multiple of eval.agent_chunk with "
                f"at least eval.final_evals chunks, or null; got {n}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLNConfig(_synth_config.SynthPipelineConfig):
    """Everything a PrivORL-n run needs.

    The YAML files shipped in ``privrl_jax/configs/privorl_n/`` load into it (by name,
    e.g. ``load("privorl_n/quickstart")``).
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
        super().__post_init__()
        if not self.data.sensitive_file:  # a file's rows are counted when it is read
            # The DP phase runs epochs / q steps, q = batch / N (`_synth.train`).
            steps = (
                self.finetune.epochs
                * self.data.sensitive_size
                / self.finetune.batch_size
            )
            if steps > MAX_STEPS:
                raise ValueError(
                    "finetune.epochs x data.sensitive_size / finetune.batch_size = "
                    f"{steps:.3g} DP steps, more than {MAX_STEPS:,}; lower "
                    "finetune.epochs or raise finetune.batch_size."
                )


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PrivORLNConfig:
    """Load a PrivORL-n config.

    A YAML file or a shipped name (``"privorl_n/quickstart"``) plus
    ``section.key=value`` overrides.
    """
    return _synth_config.check_data_sources(
        load_config(PrivORLNConfig, path, overrides)
    )
