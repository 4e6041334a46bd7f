"""PrivORL-n's configuration: frozen dataclasses that the YAML files in ``configs/`` load into."""

from __future__ import annotations

import dataclasses

from privrl_jax import privacy
from privrl_jax.pipelines._config import ConfigSource, load_config


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the public and sensitive transitions come from.

    Without files, both are collected from our JAX mazes (the ``-v1`` tasks: D4RL's MuJoCo point
    mass, task settings and data protocol) with the noisy waypoint expert (public = medium + large,
    sensitive = umaze, as in the paper). The ``-legacy`` mazes keep the first round's physics.
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
    # Model s' - s rather than s' (see `diffusion.TransitionLayout`). Not in the paper; on umaze, at equal
    # training, it cut the synthetic transitions' position error 4.6-6x non-private (2.6x under DP at
    # eps = 10) and their velocity error 1.3-1.7x.
    next_obs_delta: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    """Non-private pre-training on public data (``steps = 0`` disables it: the DPDM ablation)."""

    steps: int = 4_000
    batch_size: int = 256
    learning_rate: float = 3e-4
    curiosity_rate: float = 0.3
    pool_size: int = 4_096
    steps_per_epoch: int = 1_000
    chunk_steps: int = 250
    num_sampling_steps: int = 16


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """DP-SGD fine-tuning on the sensitive data (paper: 5 epochs, C = 1, Opacus defaults)."""

    epochs: float = 5.0
    batch_size: int = 256
    learning_rate: float = 3e-4
    l2_clip_norm: float = 1.0
    microbatch_size: int = 64
    num_noise: int = 1
    clip_method: str = "vmap"
    checkpoint_every: int = 50
    # FineCur ablation (PrivORL Fig. 4): > 0 adds round(rate * batch_size) of the most curious
    # synthetic samples to every DP batch. They come from the model being released, so they cost no
    # budget; the real Poisson batch is kept whole (dropping sampled rows would only waste budget).
    curiosity_rate: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig:
    """Target (epsilon, delta); epsilon = inf trains without noise (the non-private ablation).

    ``dataset_size`` declares N, the number of sensitive transitions, as a public quantity (the
    sampling rate and the normaliser depend on it). Left empty, N is read from the data and the
    report records that it was treated as public, as Opacus and jax_privacy do.

    ``noise_seed`` fixes the DP noise and the batches for tests and exact reproduction. Anyone who
    reads it can recompute the noise, so such a run is NOT private and its report says so. Left
    empty (the default), the secret comes from the OS's entropy source and lives only in the
    checkpoints.
    """

    epsilon: float = 10.0
    delta: float = 1e-6
    accountant: str = "rdp"
    dataset_size: int | None = None
    noise_seed: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthesisConfig:
    num_samples: int = 20_000
    batch_size: int = 5_000
    num_sampling_steps: int = 32
    ema_decay: float = 0.995
    # Declared action bounds (public: the env's action space); synthetic actions are clipped to them,
    # as the env would clip them. An empty list leaves them as sampled.
    action_bounds: tuple[float, ...] = (-1.0, 1.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How the release is audited.

    Agent scores follow Fujimoto & Gu (TD3+BC, NeurIPS 2021, Sec. 5): the average normalised score
    of the final evaluations over several training seeds. Here a policy is evaluated after each of
    the last ``final_evals`` chunks of ``agent_chunk`` updates; those scores are averaged per seed,
    then over ``agent_seeds`` seeds. One final evaluation of one seed swings by tens of points on
    maze2d, which would drown the synthetic-vs-real comparison.

    ``backend`` is where the agents are scored: ``jax`` (the JAX env) or ``mujoco``
    (D4RL's real MuJoCo point maze, for a ``maze2d-*-v1`` sensitive env;
    ``pip install -e ".[mujoco]"``).
    """

    agents: tuple[str, ...] = ("td3bc",)
    agent_updates: int = 10_000
    agent_chunk: int = 1_000
    agent_seeds: int = 1
    final_evals: int = 1
    eval_episodes: int = 50
    train_real_agents: bool = True
    mia: bool = True
    mia_size: int = 1_000
    plots: bool = True
    backend: str = "jax"

    def __post_init__(self):
        if self.backend not in ("jax", "mujoco"):
            raise ValueError(
                f"eval.backend={self.backend!r}: expected one of ['jax', 'mujoco']"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivORLNConfig:
    """Everything a PrivORL-n run needs; the YAML files shipped in ``privrl_jax/configs/privorl_n/``
    load into it (by name, e.g. ``load("privorl_n/quickstart")``)."""

    seed: int = 0
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    pretrain: PretrainConfig = PretrainConfig()
    finetune: FinetuneConfig = FinetuneConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    synthesis: SynthesisConfig = SynthesisConfig()
    eval: EvalConfig = EvalConfig()

    def __post_init__(self):
        p, f = self.privacy, self.finetune
        if not p.epsilon > 0:
            raise ValueError(f"privacy.epsilon must be > 0 (inf for no DP); got {p.epsilon}.")
        privacy.validate_delta(p.delta)
        if f.batch_size % f.microbatch_size:
            raise ValueError(
                f"finetune.microbatch_size={f.microbatch_size} should divide finetune.batch_size="
                f"{f.batch_size} so a typical Poisson batch fills whole microbatches."
            )
        for name, rate in (("pretrain", self.pretrain.curiosity_rate), ("finetune", f.curiosity_rate)):
            if not 0 <= rate <= 1:
                raise ValueError(f"{name}.curiosity_rate must be in [0, 1]; got {rate}.")
        if self.pretrain.steps % self.pretrain.chunk_steps or self.pretrain.steps_per_epoch % self.pretrain.chunk_steps:
            raise ValueError("pretrain.steps and pretrain.steps_per_epoch must be multiples of pretrain.chunk_steps.")
        # Lazy: envs pulls in jax, which loading a config does not need otherwise.
        from privrl_jax.envs import check_eval_backend

        check_eval_backend(
            self.eval.backend, self.data.sensitive_env, key="eval.backend"
        )
        if self.eval.agent_updates % self.eval.agent_chunk:
            raise ValueError("eval.agent_updates must be a multiple of eval.agent_chunk.")
        if self.eval.agent_seeds < 1:
            raise ValueError(f"eval.agent_seeds={self.eval.agent_seeds}: expected >= 1.")
        if not 1 <= self.eval.final_evals <= self.eval.agent_updates // self.eval.agent_chunk:
            raise ValueError(
                f"eval.final_evals={self.eval.final_evals}: expected between 1 and "
                "eval.agent_updates / eval.agent_chunk (the number of chunks)."
            )
        bounds = self.synthesis.action_bounds
        if bounds and (len(bounds) != 2 or not bounds[0] < bounds[1]):
            raise ValueError(f"synthesis.action_bounds must be [low, high] with low < high, or []; got {list(bounds)}.")
        if p.accountant not in ("rdp", "pld"):
            raise ValueError(f"privacy.accountant must be 'rdp' or 'pld'; got {p.accountant!r}.")
        if p.dataset_size is not None and p.dataset_size < 2:
            raise ValueError(f"privacy.dataset_size must be an int >= 2 or empty; got {p.dataset_size}.")
        if f.clip_method not in ("vmap", "ghost"):
            raise ValueError(f"finetune.clip_method must be 'vmap' or 'ghost'; got {f.clip_method!r}.")


def load(path: ConfigSource | None = None, overrides: list[str] = ()) -> PrivORLNConfig:
    """Loads a PrivORL-n config: a YAML file or a shipped name (``"privorl_n/quickstart"``) plus
    ``section.key=value`` overrides."""
    return load_config(PrivORLNConfig, path, overrides)
