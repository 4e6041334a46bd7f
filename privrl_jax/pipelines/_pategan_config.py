"""The PATE-GAN baselines' configuration (PATE-GAN and PrePATE-GAN): frozen
dataclasses the YAML files in ``configs/pategan/`` load into. Data, privacy and
synthesis sizes mean what they mean in PrivORL-n, so the same transitions are released
under the same budget and scored the same way."""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import ConfigSource, load_config
from privrl_jax.pipelines._privorl_n_config import DataConfig
from privrl_jax.pipelines._sections import PrivacyConfig

Model = Literal["pategan", "pategan_pretrained"]
MODELS = typing.get_args(Model)

DEFAULTS = "pategan/defaults"  # the baseline's own defaults, under every config


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """PATE-GAN's networks and its query budget (`synth.PateGanConfig`).

    ``rounds`` x ``queries_per_round`` is the number of Gaussian vote queries the run
    makes, fixed before it starts; sigma is calibrated for that many at the target
    (epsilon, delta). ``pategan_pretrained`` (PrePATE-GAN) first trains a non-private
    GAN for ``pretrain_steps`` on the public transitions and starts the generator, the
    student and the teachers from it; ``pategan`` ignores ``pretrain_steps``. The
    transitions are PrivORL-n's encoding (s' - s with ``next_obs_delta``) normalised
    with the public normaliser. ``chunk_rounds`` rounds run in one jitted scan; each
    chunk's queries are checked against the budget and recorded before it runs.
    """

    name: Model = "pategan"
    num_teachers: int = 50
    latent_dim: int = 32
    generator_features: tuple[int, ...] = (256, 256)
    discriminator_features: tuple[int, ...] = (256, 256)
    learning_rate: float = 1e-4
    teacher_steps: int = 1
    teacher_batch_size: int = 64
    queries_per_round: int = 16
    rounds: int = 200
    student_steps: int = 5
    generator_batch_size: int = 64
    generator_steps: int = 1
    # Soft labels (the noisy vote share) instead of the paper's hard majority; see
    # `synth.PateGanConfig.soft_labels`. Same privacy (post-processing).
    soft_labels: bool = False
    chunk_rounds: int = 50
    pretrain_steps: int = 5_000
    next_obs_delta: bool = True

    def __post_init__(self):
        _synth_config.check_at_least_one(
            "model",
            self,
            "num_teachers",
            "latent_dim",
            "teacher_steps",
            "teacher_batch_size",
            "queries_per_round",
            "rounds",
            "student_steps",
            "generator_batch_size",
            "generator_steps",
            "chunk_rounds",
        )
        _synth_config.check_positive("model.learning_rate", self.learning_rate)
        if self.rounds % self.chunk_rounds:
            raise ValueError("model.rounds must be a multiple of model.chunk_rounds.")
        if self.name == "pategan_pretrained" and self.pretrain_steps < 1:
            raise ValueError(
                "model.pretrain_steps must be >= 1 for pategan_pretrained; got "
                f"{self.pretrain_steps}."
            )

    @property
    def num_queries(self) -> int:
        """Vote queries of the whole run (each one Gaussian of sensitivity 1)."""
        return self.rounds * self.queries_per_round


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    """``num_samples`` rows drawn from the trained generator (post-processing) in
    batches of ``batch_size``; actions clipped to ``action_bounds`` (empty: none)."""

    num_samples: int = 20_000
    batch_size: int = 10_000
    action_bounds: tuple[float, ...] = (-1.0, 1.0)

    def __post_init__(self):
        _synth_config.check_at_least_one("synthesis", self, "num_samples", "batch_size")
        _synth_config.check_release_rows("synthesis.num_samples", self.num_samples)
        _synth_config.check_action_bounds(self.action_bounds)


# The shared section; the baselines' defaults (no agents) are in
# configs/pategan/defaults.yaml.
EvalConfig = _synth_config.EvalConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class PateGanPipelineConfig(_synth_config.SynthPipelineConfig):
    """Everything a PATE-GAN run needs (``load("pategan/umaze")``).

    ``data`` is PrivORL-n's section: the public data fit the normaliser (and, for
    ``pategan_pretrained``, pre-train the GAN); the sensitive data reach the teachers
    only.
    """

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> PateGanPipelineConfig:
    """Loads a PATE-GAN config: a YAML file or a shipped name (``"pategan/umaze"``)
    plus ``section.key=value`` overrides."""
    return load_config(PateGanPipelineConfig, path, overrides, defaults=DEFAULTS)
