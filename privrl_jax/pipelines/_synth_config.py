"""Config sections and checks that PrivORL-n and PrivORL-j share (no jax: loading a
config needs none).

Each pipeline's own section classes (``_privorl_n_config``, ``_privorl_j_config``)
derive from the bases here and give their defaults and their own fields; a field keeps
the base's position, so ``to_dict`` writes the keys in the same order as before the
bases existed. Every check is one section's; checks that read two sections stay in the
pipeline's top-level config.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

from privrl_jax import privacy
from privrl_jax.pipelines._audit_run import AuditConfig
from privrl_jax.pipelines._config import check_modes

# Modes are Literal types: the one loader checks them (`_config.check_modes`).
ClipMethod = Literal["vmap", "ghost"]
EvalBackend = Literal["jax", "mujoco"]


def check_at_least_one(section: str, cfg: object, *names: str) -> None:
    """Raises ``"{section}.{name} must be >= 1; got 0."`` for the first of ``names``
    below 1."""
    for name in names:
        value = getattr(cfg, name)
        if value < 1:
            raise ValueError(f"{section}.{name} must be >= 1; got {value}.")


def check_rate(key: str, rate: float) -> None:
    if not 0 <= rate <= 1:
        raise ValueError(f"{key} must be in [0, 1]; got {rate}.")


# A release is written from memory: 1e8 rows of a maze transition (~10 float32) are ~4
# GB, already more than the 2-core / 24 GB machines we test on hold comfortably.
MAX_RELEASE_ROWS = 100_000_000


def check_positive(key: str, value: float) -> None:
    """Raises ``"{key} must be a finite number > 0; got x."`` (0, negatives, inf and
    NaN)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{key} must be a finite number > 0; got {value!r}.")


def check_release_rows(key: str, rows: float) -> None:
    """Refuses a release size that could never be written, before any noise is drawn."""
    if rows > MAX_RELEASE_ROWS:
        raise ValueError(
            f"{key} asks for {rows:.3g} released rows, more than {MAX_RELEASE_ROWS:,} "
            "(a release is "
            "written from memory); lower it."
        )


def check_action_bounds(bounds: tuple[float, ...]) -> None:
    """``synthesis.action_bounds``: ``[low, high]`` with low < high, or empty (no
    clipping)."""
    if bounds and (len(bounds) != 2 or not bounds[0] < bounds[1]):
        raise ValueError(
            "synthesis.action_bounds must be [low, high] with low < high, or []; got "
            f"{list(bounds)}."
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig:
    """Target (epsilon, delta); epsilon = inf trains without noise (the non-private
    ablation).

    ``dataset_size`` declares N, the number of sensitive privacy units (PrivORL-n:
    transitions; PrivORL-j: trajectories), as a public quantity (the sampling rate and
    the normaliser depend on it). Left empty, N is read from the data and the report
    records that it was treated as public, as Opacus and jax_privacy do.

    ``noise_seed`` fixes the DP noise and the batches for tests and exact reproduction.
    Anyone who reads it can recompute the noise, so such a run is NOT private and its
    report says so. Left empty (the default), the secret comes from the OS's entropy
    source and lives only in the checkpoints.
    """

    epsilon: float = 10.0
    delta: float = 1e-6
    accountant: privacy.Accountant = "rdp"
    dataset_size: int | None = None
    noise_seed: int | None = None

    def __post_init__(self):
        if not self.epsilon > 0:
            raise ValueError(
                f"privacy.epsilon must be > 0 (inf for no DP); got {self.epsilon}."
            )
        privacy.validate_delta(self.delta)
        if self.dataset_size is not None and self.dataset_size < 2:
            raise ValueError(
                "privacy.dataset_size must be an int >= 2 or empty; got "
                f"{self.dataset_size}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    """Non-private curiosity-driven pre-training on public data (``steps = 0`` disables
    it).

    The pipelines give ``steps``, ``batch_size``, ``pool_size`` and ``steps_per_epoch``
    their own defaults. Every ``steps_per_epoch`` steps a pool of ``pool_size`` samples
    is drawn (with ``num_sampling_steps`` sampler steps) and scored by RND;
    ``curiosity_rate`` of each batch is replaced by its most curious rows. Resumable
    every ``chunk_steps`` steps.
    """

    steps: int
    batch_size: int
    learning_rate: float = 3e-4
    curiosity_rate: float = 0.3
    pool_size: int
    steps_per_epoch: int
    chunk_steps: int = 250
    num_sampling_steps: int = 16

    def __post_init__(self):
        check_rate("pretrain.curiosity_rate", self.curiosity_rate)
        if self.steps % self.chunk_steps or self.steps_per_epoch % self.chunk_steps:
            raise ValueError(
                "pretrain.steps and pretrain.steps_per_epoch must be multiples of "
                "pretrain.chunk_steps."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """DP-SGD on the sensitive data: ``epochs`` over the units, ``batch_size`` the
    expected number
    of units per step, ``l2_clip_norm`` C per unit, clipped ``microbatch_size`` units at
    a time.

    The pipelines add ``clip_method`` (`ClipMethod`: ``vmap`` or ``ghost``)
    and their own fields after these.
    """

    epochs: float = 5.0
    batch_size: int
    learning_rate: float = 3e-4
    l2_clip_norm: float = 1.0
    microbatch_size: int

    def __post_init__(self):
        # These size the DP phase: a bad one must be refused here, before any noise is
        # drawn (epochs = 0 used to become one DP step that spent the budget).
        for name in ("epochs", "learning_rate", "l2_clip_norm"):
            check_positive(f"finetune.{name}", getattr(self, name))
        check_at_least_one("finetune", self, "batch_size", "microbatch_size")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """Agents trained on the release (and, in the audit, on the real data).

    Agent scores follow Fujimoto & Gu (TD3+BC, NeurIPS 2021, Sec. 5): the average
    normalised score of the final evaluations over several training seeds. Here a policy
    is evaluated after each of the last ``final_evals`` chunks of ``agent_chunk``
    updates; those scores are averaged per seed, then over ``agent_seeds`` seeds. One
    final evaluation of one seed swings by tens of points on maze2d, which would drown
    the synthetic-vs-real comparison.

    The pipelines add ``backend`` (where the agents are scored: ``jax``, the JAX env, or
    ``mujoco``, D4RL's real MuJoCo point maze for a ``maze2d-*-v1`` sensitive env, ``pip
    install -e ".[mujoco]"``; an `EvalBackend`) and their audit's own
    fields.
    """

    agents: tuple[str, ...] = ("td3bc",)
    agent_updates: int = 10_000
    agent_chunk: int = 1_000
    agent_seeds: int = 1
    final_evals: int = 1
    eval_episodes: int = 50
    train_real_agents: bool = True

    def __post_init__(self):
        if self.agent_updates % self.agent_chunk:
            raise ValueError(
                "eval.agent_updates must be a multiple of eval.agent_chunk."
            )
        if self.agent_seeds < 1:
            raise ValueError(f"eval.agent_seeds={self.agent_seeds}: expected >= 1.")
        if not 1 <= self.final_evals <= self.agent_updates // self.agent_chunk:
            raise ValueError(
                f"eval.final_evals={self.final_evals}: expected between 1 and "
                "eval.agent_updates / eval.agent_chunk (the number of chunks)."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaselineEvalConfig(EvalConfig):
    """The transition-level baselines' ``eval`` section (marginal, PATE-GAN): agents
    trained on the release (none by default) and the audit's anchor (the real holdout
    scored like the release)."""

    agents: tuple[str, ...] = ()
    anchors: bool = True
    backend: EvalBackend = "jax"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthPipelineConfig:
    """The top level both pipelines' configs derive from: the checks that read two
    sections, and
    the ``audit`` section (epsilon demonstrated beside the release; `AuditConfig`)."""

    audit: AuditConfig = AuditConfig()

    def __post_init__(self):
        check_modes(self)
        # Lazy: envs pulls in jax, which loading a config does not need otherwise.
        from privrl_jax.envs import check_eval_backend as check_env_backend

        check_env_backend(
            self.eval.backend, self.data.sensitive_env, key="eval.backend"
        )
