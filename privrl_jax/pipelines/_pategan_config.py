"""The PATE-GAN baselines' configuration (PATE-GAN and PrePATE-GAN).

Frozen dataclasses the YAML files in ``configs/pategan/`` load into. Data, privacy and
synthesis sizes mean what they mean in PrivORL-n, so the same transitions are released
under the same budget and scored the same way.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar, Literal

from privrl_jax.pipelines import _synth_config
from privrl_jax.pipelines._config import (
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
    positive,
)
from privrl_jax.pipelines._privorl_n_config import DataConfig
from privrl_jax.pipelines._sections import PrivacyConfig

Model = Literal["pategan", "pategan_pretrained"]
MODELS = typing.get_args(Model)

DEFAULTS = "pategan/defaults"  # the baseline's own defaults, under every config


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(Section):
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

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_teachers": at_least(1, MAX_ROWS),
        "latent_dim": at_least(1, MAX_WIDTH),
        "generator_features": at_least(1, MAX_WIDTH),
        "discriminator_features": at_least(1, MAX_WIDTH),
        "learning_rate": positive(),
        "teacher_steps": at_least(1, MAX_COUNT),
        "teacher_batch_size": at_least(1, MAX_BATCH),
        "queries_per_round": at_least(1, MAX_BATCH),
        "rounds": at_least(1, MAX_STEPS),
        "student_steps": at_least(1, MAX_COUNT),
        "generator_batch_size": at_least(1, MAX_BATCH),
        "generator_steps": at_least(1, MAX_COUNT),
        "chunk_rounds": at_least(1, MAX_STEPS),
        "pretrain_steps": at_least(0, MAX_STEPS),
    }

    SECTION = "model"

    def __post_init__(self):
        super().__post_init__()
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
class SynthesisConfig(Section):
    """``num_samples`` rows drawn from the trained generator (post-processing).

    In batches of ``batch_size``; actions clipped to ``action_bounds`` (empty: none).
    """

    num_samples: int = 20_000
    batch_size: int = 10_000
    action_bounds: tuple[float, ...] = (-1.0, 1.0)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "num_samples": at_least(1, MAX_ROWS),
        "batch_size": at_least(1, MAX_BATCH),
    }

    SECTION = "synthesis"

    def __post_init__(self):
        super().__post_init__()
        _synth_config.check_action_bounds(self.action_bounds)


# The shared section; the baselines' defaults (no agents) are in
# configs/pategan/defaults.yaml.
EvalConfig = _synth_config.EvalConfig


# Teachers' expected rows below which PATE-GAN's partition would leave teachers without
# data: with N / k = 10 a teacher is empty with probability (1 - 1/k)^N ~ e^-10.
MIN_ROWS_PER_TEACHER = 10


def check_teachers(num_teachers: int, rows: int) -> None:
    """Refuses more teachers than ``rows`` sensitive rows can give data to.

    Raises:
      ValueError: ``rows / num_teachers < MIN_ROWS_PER_TEACHER``; the message names
        the largest number of teachers these rows allow.
    """
    if rows < MIN_ROWS_PER_TEACHER * num_teachers:
        most = max(1, rows // MIN_ROWS_PER_TEACHER)
        raise ValueError(
            f"model.num_teachers={num_teachers} splits the {rows} sensitive "
            f"transitions into ~{rows / num_teachers:.3g} rows a teacher (teachers "
            f"without data); use at most {most} teachers "
            f"({MIN_ROWS_PER_TEACHER} rows each on average)."
        )


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

    def __post_init__(self):
        super().__post_init__()
        if not self.data.sensitive_file:  # a file's rows are counted when it is read
            check_teachers(self.model.num_teachers, self.data.sensitive_size)


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> PateGanPipelineConfig:
    """Load a PATE-GAN config.

    A YAML file or a shipped name (``"pategan/umaze"``) plus ``section.key=value``
    overrides.
    """
    return _synth_config.check_data_sources(
        load_config(PateGanPipelineConfig, path, overrides, defaults=DEFAULTS)
    )
