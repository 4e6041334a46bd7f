"""One offline agent on maze2d data this pipeline collects itself, then evaluated.

The experiments ``agents_maze`` and ``agents_iql_budget`` run it (they replace
``benchmarks/agents_maze.py`` and ``benchmarks/agents_v1_budget.py``, in git history):

- ``data``: ``data.size`` transitions of ``data.env`` collected from key
  ``data.seed``: ``expert`` is D4RL's protocol (:func:`privrl_jax.envs.collect_dataset`,
  the noisy waypoint expert with ``data.action_noise``; the ``maze2d-*-v1`` tasks use
  D4RL's stateful controller), ``random`` takes actions uniform in [-1, 1]^2 in 100
  parallel streams of the env's episodes. Rewards are the evaluation task's (fixed
  goal) in both.
- ``train``: ``train.algo`` (CORL's hyper-parameters, ``train.agent`` overriding them;
  IQL's cosine actor schedule spans the run) trained for ``train.updates`` updates in
  jitted chunks of ``train.chunk_size`` from key ``seed``, its deterministic policy
  evaluated every ``train.eval_every`` updates over ``train.eval_episodes`` episodes
  of the JAX env (D4RL's reference returns).

``run(config, run_dir)`` writes ``config.yaml`` and ``report.json``: the curve (score,
return, the chunk's mean Q where the agent logs one), the final evaluation, the best
one, ``score_at`` (step -> score) and the data's statistics.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal

from privrl_jax.pipelines._agent_config import Algo
from privrl_jax.pipelines._config import (
    MAX_BATCH,
    MAX_STEPS,
    Bound,
    ConfigSource,
    Section,
    at_least,
    check_modes,
    coerce_fields,
    load_config,
    positive,
    to_dict,
)
from privrl_jax.pipelines._rundir import fresh_run_dir, write_report

DataKind = Literal["expert", "random"]
DATA_KINDS = typing.get_args(DataKind)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig(Section):
    """The collected dataset (module doc); ``action_noise``: the expert's only."""

    SECTION: ClassVar[str] = "data"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "size": at_least(1, 10 * MAX_BATCH),
        "action_noise": positive(),
    }

    env: str = "maze2d-umaze"
    kind: DataKind = "expert"
    size: int = 100_000
    seed: int = 12345
    action_noise: float = 0.5

    def __post_init__(self):
        """Check the ranges and that the env is a maze (one-line ValueError)."""
        super().__post_init__()
        from privrl_jax import envs  # noqa: PLC0415 -- keeps `load` light

        if envs.canonical_name(self.env) not in envs.MAZE_ENVS:
            raise ValueError(
                f"data.env={self.env!r}: this pipeline collects maze2d data only "
                f"(the expert is a maze planner); one of {sorted(envs.MAZE_ENVS)}."
            )
        if self.kind == "random" and self.action_noise != 0.5:
            raise ValueError(
                "data.action_noise is the expert's; the random kind has none (leave "
                f"it at 0.5); got {self.action_noise}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig(Section):
    """The agent and its budget (module doc).

    ``agent``: fields of the algorithm's config (``agents.TD3BCConfig``, ...) that
    differ from CORL's, e.g. ``{hidden_dims: [64, 64, 64]}``.
    """

    SECTION: ClassVar[str] = "train"
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "updates": at_least(1, MAX_STEPS),
        "chunk_size": at_least(1, MAX_STEPS),
        "eval_every": at_least(1, MAX_STEPS),
        "eval_episodes": at_least(1, 100_000),
    }

    algo: Algo = "td3bc"
    updates: int = 5_000
    chunk_size: int = 500
    eval_every: int = 2_500
    eval_episodes: int = 100
    agent: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        """Check the budget's divisibility and the agent's fields (one line)."""
        super().__post_init__()
        check_modes(self, "train.")
        from privrl_jax import agents  # noqa: PLC0415

        if self.updates % self.chunk_size:
            raise ValueError(
                f"train.updates={self.updates} is not a multiple of "
                f"train.chunk_size={self.chunk_size}."
            )
        if self.eval_every % self.chunk_size or self.eval_every > self.updates:
            raise ValueError(
                f"train.eval_every={self.eval_every} must be a multiple of "
                f"train.chunk_size={self.chunk_size} and at most train.updates="
                f"{self.updates} (the run ends on an evaluation)."
            )
        if self.updates % self.eval_every:
            raise ValueError(
                f"train.updates={self.updates} is not a multiple of "
                f"train.eval_every={self.eval_every}: the final evaluation would not "
                "be at the last update."
            )
        _, agent_config = agents.ALGORITHMS[self.algo]
        agent = coerce_fields(agent_config, self.agent, prefix="train.agent.")
        try:
            agent_config(**agent)
        except ValueError as e:
            raise ValueError(f"train.agent ({self.algo} config): {e}") from None
        object.__setattr__(self, "agent", agent)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MazeAgentConfig:
    """A maze-agent run's config (module doc); ``seed``: the training key."""

    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    seed: int = 0


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> MazeAgentConfig:
    """Load a maze-agent run's config.

    Args:
      path: a YAML file or a shipped name (``maze_agent/default``); None: the defaults.
      overrides: ``section.key=value`` strings.

    Returns:
      The checked config.

    Raises:
      ValueError: an unknown key or a bad value (one line).
    """
    return load_config(MazeAgentConfig, path, overrides)


def _collect_random(key: Any, env_name: str, size: int, num_envs: int = 100) -> Any:
    # Uniform actions in num_envs parallel streams of the env's own episodes (reset at
    # their ends by the gymnax API); the final observation of an episode is kept.
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from privrl_jax import envs  # noqa: PLC0415
    from privrl_jax.data import Transitions  # noqa: PLC0415

    env, params = envs.make(env_name)
    steps = -(-size // num_envs)

    def stream(key):
        k_reset, k_steps = jax.random.split(key)
        obs, state = env.reset(k_reset, params)

        def body(carry, k):
            obs, state = carry
            k_act, k_step = jax.random.split(k)
            action = jax.random.uniform(k_act, (2,), minval=-1.0, maxval=1.0)
            next_obs, state, reward, _, info = env.step(k_step, state, action, params)
            row = Transitions(
                observations=obs,
                actions=action,
                rewards=reward,
                next_observations=info.get("final_observation", next_obs),
                terminals=jnp.asarray(info["terminated"], jnp.float32),
                timeouts=jnp.asarray(info["truncated"], jnp.float32),
            )
            return (next_obs, state), row

        _, rows = jax.lax.scan(body, (obs, state), jax.random.split(k_steps, steps))
        return rows

    rows = jax.jit(jax.vmap(stream))(jax.random.split(key, num_envs))
    rows = jax.tree.map(lambda x: np.asarray(x).reshape(-1, *x.shape[2:])[:size], rows)
    return Transitions(
        **{k: jnp.asarray(v, jnp.float32) for k, v in vars(rows).items()}
    )


def collect(cfg: DataConfig) -> Any:
    """The configured dataset (module doc).

    Args:
      cfg: the data section.

    Returns:
      ``Transitions`` with ``cfg.size`` rows.
    """
    import jax  # noqa: PLC0415

    from privrl_jax import envs  # noqa: PLC0415

    key = jax.random.key(cfg.seed)
    if cfg.kind == "expert":
        return envs.collect_dataset(
            key, cfg.env, cfg.size, action_noise=cfg.action_noise
        )
    return _collect_random(key, cfg.env, cfg.size)


def run(cfg: MazeAgentConfig, run_dir: str | Path) -> dict[str, Any]:
    """Collect the data, train the agent, evaluate it; write ``report.json``.

    Args:
      cfg: the config (:func:`load`).
      run_dir: a new or empty directory.

    Returns:
      The report: the config, ``data`` (transitions, mean reward, share of next
      positions within 0.5 of the goal), ``curve``, ``final``, ``best_score``,
      ``score_at``, ``final_critic_loss``, ``collect_seconds``, ``train_seconds``.

    Raises:
      ValueError: ``run_dir`` holds files.
    """
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    from privrl_jax import agents, envs, provenance  # noqa: PLC0415
    from privrl_jax.pipelines._agent_train import make_run_agent  # noqa: PLC0415

    resolved = to_dict(cfg)
    run_dir = fresh_run_dir(run_dir, resolved)

    t0 = time.perf_counter()
    data = collect(cfg.data)
    collect_seconds = time.perf_counter() - t0
    env, params = envs.make(cfg.data.env)
    pos = np.asarray(data.next_observations)[:, :2]
    stats = {
        "transitions": len(data),
        "reward_mean": float(np.mean(data.rewards)),
        "share_within_0.5_of_goal": float(
            np.mean(np.linalg.norm(pos - np.asarray(params.goal), axis=1) <= 0.5)
        ),
    }

    t = cfg.train
    agent = make_run_agent(t.algo, t.updates, **dict(t.agent))

    def eval_fn(state, key):
        res = agents.evaluate(
            key,
            state,
            act=agent.act,
            env=env,
            env_params=params,
            num_episodes=t.eval_episodes,
            env_name=cfg.data.env,
        )
        return {m: res[m] for m in ("return_mean", "score_mean", "score_std")}

    t0 = time.perf_counter()
    result = agents.train(
        agent,
        data,
        key=jax.random.key(cfg.seed),
        num_updates=t.updates,
        chunk_size=t.chunk_size,
        eval_fn=eval_fn,
        eval_every=t.eval_every,
        progress=False,
    )
    train_seconds = time.perf_counter() - t0
    q = {}
    if "q_mean" in result.metrics:
        q = dict(
            zip(
                np.asarray(result.metrics["step"]).tolist(),
                np.asarray(result.metrics["q_mean"]).tolist(),
                strict=True,
            )
        )
    curve = [
        {k: float(v) for k, v in e.items()} | {"step": int(e["step"])}
        for e in result.evals
    ]
    for e in curve:
        if e["step"] in q:
            e["q_mean"] = float(q[e["step"]])
    report = {
        "config": resolved,
        "data": stats,
        "curve": curve,
        "final": curve[-1],
        "best_score": max(e["score_mean"] for e in curve),
        "score_at": {str(e["step"]): e["score_mean"] for e in curve},
        "final_critic_loss": float(np.asarray(result.metrics["critic_loss"])[-1]),
        "collect_seconds": collect_seconds,
        "train_seconds": train_seconds,
        "provenance": provenance(),
    }
    write_report(run_dir, report)
    return report


__all__ = [
    "DATA_KINDS",
    "DataConfig",
    "MazeAgentConfig",
    "TrainConfig",
    "collect",
    "load",
    "run",
]
