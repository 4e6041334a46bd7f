"""Config sections and checks that the synthetic-data pipelines share.

PrivORL-n, PrivORL-j, the marginal and PATE-GAN baselines. No jax: loading a config
needs none.

Each section is declared once, with PrivORL-n's values as its defaults. A pipeline
whose defaults differ states them in its ``configs/<group>/defaults.yaml`` (loaded
under every config of that pipeline by `_config.load_config`), not in a subclass; a
pipeline subclasses a section only to add fields of its own. Every check is one
section's; checks that read two sections stay in the pipeline's top-level config.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

from privrl_jax.pipelines._audit_run import AuditConfig
from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_COUNT,
    MAX_ROWS,
    MAX_STEPS,
    UNIT,
    Bound,
    Section,
    at_least,
    check_modes,
    positive,
)
from privrl_jax.pipelines._sections import EvalBackend

# Modes are Literal types: the one loader checks them (`_config.check_modes`).
ClipMethod = Literal["vmap", "ghost"]


def check_at_least_one(section: str, cfg: object, *names: str) -> None:
    """Raise if one of ``names`` is below 1.

    The error names the first: ``"{section}.{name} must be >= 1; got 0."``.
    """
    for name in names:
        value = getattr(cfg, name)
        if value < 1:
            raise ValueError(f"{section}.{name} must be >= 1; got {value}.")


def check_even(key: str, value: int) -> None:
    """Raise ``"{key} must be even; got 3."`` for an odd value.

    Random Fourier features come in sin/cos pairs.
    """
    if value % 2:
        raise ValueError(f"{key} must be even (sin and cos pairs); got {value}.")


def check_rate(key: str, rate: float) -> None:
    if not 0 <= rate <= 1:
        raise ValueError(f"{key} must be in [0, 1]; got {rate}.")


# A release is written from memory: 1e8 rows of a maze transition (~10 float32) are ~4
# GB, already more than the 2-core / 24 GB machines we test on hold comfortably.
MAX_RELEASE_ROWS = MAX_ROWS


def check_positive(key: str, value: float) -> None:
    """Raise ``"{key} must be a finite number > 0; got x."``.

    For 0, negatives, inf and NaN.
    """
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
    """Check ``synthesis.action_bounds``.

    ``[low, high]`` with low < high, or empty (no clipping).
    """
    if bounds and (len(bounds) != 2 or not bounds[0] < bounds[1]):
        raise ValueError(
            "synthesis.action_bounds must be [low, high] with low < high, or []; got "
            f"{list(bounds)}."
        )


def check_data_sources(cfg: Any) -> Any:
    """``cfg`` after its ``data`` section's env names and files were checked.

    `_synth.inputs.validate_data_sources`: names exist, files exist and record the
    task's env. A pipeline's ``load`` calls it, so a bad input is refused before a
    command touches its run directory (the run checks again, for configs built in
    Python).
    """
    # Lazy: the check reads HDF5 and env registries (jax), which the sections do not.
    from privrl_jax.pipelines._synth.inputs import validate_data_sources  # noqa: PLC0415

    validate_data_sources(cfg.data)
    return cfg


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(Section):
    """Where the public and sensitive data come from.

    Without files, both are collected from our JAX mazes (the ``-v1`` tasks: D4RL's
    MuJoCo point mass, task settings and data protocol) with the noisy waypoint expert
    (public = medium + large, sensitive = umaze, as in the paper): ``sensitive_size``
    and ``public_size`` transitions, ``action_noise`` the expert's Gaussian action
    noise. The ``-legacy`` mazes keep the first round's physics. ``sensitive_file`` /
    ``public_files`` read D4RL-format HDF5 files instead. PrivORL-n adds its holdout
    size, PrivORL-j its trajectory cut (``data.horizon``, ``data.max_fragments``).
    """

    sensitive_env: str = "maze2d-umaze-dense-v1"
    public_envs: tuple[str, ...] = ("maze2d-medium-dense-v1", "maze2d-large-dense-v1")
    sensitive_size: int = 20_000
    public_size: int = 20_000
    action_noise: float = 0.5
    sensitive_file: str | None = None
    public_files: tuple[str, ...] = ()

    # The ranges of this section's values (`_config.check_bounds`); a pipeline's
    # subclass adds its own fields' (`Section` checks the tables of every base).
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "sensitive_size": at_least(1, MAX_ROWS),
        "public_size": at_least(1, MAX_ROWS),
        "action_noise": at_least(0.0, 1e6),
    }

    SECTION = "data"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig(Section):
    """Non-private curiosity-driven pre-training on public data.

    ``steps = 0`` disables it (the DPDM ablation).

    Every ``steps_per_epoch`` steps a pool of ``pool_size`` samples is drawn (with
    ``num_sampling_steps`` sampler steps) and scored by RND; ``curiosity_rate`` of each
    batch is replaced by its most curious rows. Resumable every ``chunk_steps`` steps.
    """

    steps: int = 4_000
    batch_size: int = 256
    learning_rate: float = 3e-4
    curiosity_rate: float = 0.3
    pool_size: int = 4_096
    steps_per_epoch: int = 1_000
    chunk_steps: int = 250
    num_sampling_steps: int = 16

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "steps": at_least(0, MAX_STEPS),
        "batch_size": at_least(1, MAX_BATCH),
        "learning_rate": positive(),
        "curiosity_rate": UNIT,
        "pool_size": at_least(1, MAX_BATCH),
        "steps_per_epoch": at_least(1, MAX_STEPS),
        "chunk_steps": at_least(1, MAX_STEPS),
        "num_sampling_steps": at_least(1, MAX_COUNT),
    }

    SECTION = "pretrain"

    def __post_init__(self):
        super().__post_init__()
        if self.steps % self.chunk_steps or self.steps_per_epoch % self.chunk_steps:
            raise ValueError(
                "pretrain.steps and pretrain.steps_per_epoch must be multiples of "
                "pretrain.chunk_steps."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig(Section):
    """DP-SGD on the sensitive data (paper: 5 epochs, C = 1, Opacus defaults).

    ``epochs`` over the units, ``batch_size`` the expected number of units per step
    (PrivORL-n: transitions; PrivORL-j: trajectories), ``l2_clip_norm`` C per unit,
    clipped ``microbatch_size`` units at a time by ``clip_method`` (`ClipMethod`:
    ``vmap`` per-unit gradients or ``ghost`` norms; PrivORL-j's transformer measured
    faster with ``vmap`` on CPU, docs/privorl_j.md), checkpointed every
    ``checkpoint_every`` steps.
    """

    epochs: float = 5.0
    batch_size: int = 256
    learning_rate: float = 3e-4
    l2_clip_norm: float = 1.0
    microbatch_size: int = 64
    clip_method: ClipMethod = "vmap"
    checkpoint_every: int = 50
    # None: the fixed clip norm l2_clip_norm. A quantile in (0, 1): adaptive clipping
    # (privacy.AdaptiveClipping, Andrew et al. 2021) from l2_clip_norm toward that
    # private quantile of the per-unit norms, inside the same epsilon.
    adaptive_clip_quantile: float | None = None

    # These size the DP phase: a bad one must be refused here, before any noise is
    # drawn (epochs = 0 used to become one DP step that spent the budget).
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "epochs": positive(100_000),
        "batch_size": at_least(1, MAX_BATCH),
        "learning_rate": positive(),
        "l2_clip_norm": positive(),
        "microbatch_size": at_least(1, MAX_BATCH),
        "checkpoint_every": at_least(1, MAX_STEPS),
        "adaptive_clip_quantile": Bound(0.0, 1.0, low_open=True, high_open=True),
    }
    # Added (182e8c7) after the PrivORL rows were stored; None runs the fixed clip
    # norm as before: privorl_n/test with a fixed noise seed gives the same release
    # bit for bit at 182e8c7 and at its parent.
    HASH_NEUTRAL: ClassVar[dict[str, Any]] = {"adaptive_clip_quantile": None}

    SECTION = "finetune"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig(Section):
    """Agents trained on the release (and, in the audit, on the real data).

    Agent scores follow Fujimoto & Gu (TD3+BC, NeurIPS 2021, Sec. 5): the average
    normalised score of the final evaluations over several training seeds. Here a policy
    is evaluated after each of the last ``final_evals`` chunks of ``agent_chunk``
    updates; those scores are averaged per seed, then over ``agent_seeds`` seeds. One
    final evaluation of one seed swings by tens of points on maze2d, which would drown
    the synthetic-vs-real comparison.

    ``backend`` says where the agents are scored (an `EvalBackend`: ``jax``, the JAX
    env, or ``mujoco``, D4RL's real MuJoCo point maze for a ``maze2d-*-v1`` sensitive
    env, ``pip install -e ".[mujoco]"``). ``anchors`` scores, beside the release, the
    real holdout (another sample of the sensitive law: the finite-sample floor) and,
    where the method pre-trains, samples of the pre-trained model alone (PrivORL Table
    IV: public data only, eps = 0), so a reader sees whether the fidelity can see the
    DP step at all. The pipelines add their audit's own fields.
    """

    agents: tuple[str, ...] = ("td3bc",)
    agent_updates: int = 10_000
    agent_chunk: int = 1_000
    agent_seeds: int = 1
    final_evals: int = 1
    eval_episodes: int = 50
    train_real_agents: bool = True
    anchors: bool = True
    backend: EvalBackend = "jax"

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "agent_updates": at_least(1, MAX_STEPS),
        "agent_chunk": at_least(1, MAX_STEPS),
        "agent_seeds": at_least(1, MAX_COUNT),
        "final_evals": at_least(1, MAX_COUNT),
        "eval_episodes": at_least(1, MAX_BATCH),
    }

    SECTION = "eval"

    def __post_init__(self):
        super().__post_init__()
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
class SynthPipelineConfig:
    """The top level both pipelines' configs derive from.

    The checks that read two sections, and the ``audit`` section (epsilon demonstrated
    beside the release; `AuditConfig`).
    """

    audit: AuditConfig = AuditConfig()

    def __post_init__(self):
        check_modes(self)
        # Lazy: envs pulls in jax, which loading a config does not need otherwise.
        from privrl_jax.envs import check_eval_backend as check_env_backend

        check_env_backend(
            self.eval.backend, self.data.sensitive_env, key="eval.backend"
        )
