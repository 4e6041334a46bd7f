"""Train one offline-RL agent on a D4RL-format dataset and evaluate it.

The imperative shell around `privrl_jax.agents`: reads the HDF5 file, trains in
jitted chunks with a progress bar, evaluates periodically in the env, and writes
`result.json` (resolved config, scores, timings, learning curve) and
`learning_curve.png` into the output directory (atomically).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import tempfile
import time
from typing import Any

import jax
import numpy as np

from privrl_jax import agents, envs
from privrl_jax.data import load_hdf5
from privrl_jax.pipelines._config import coerce_fields


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentTrainConfig:
    """One agent-training run.

    Attributes:
      algo: "td3bc", "iql" or "edac".
      dataset: path to a D4RL-format HDF5 file.
      env: evaluation env name (`privrl_jax.envs.make`), e.g. "maze2d-umaze".
      steps: gradient updates, a multiple of `chunk_size`.
      seed: PRNG seed (canonicalised to a key here, at the boundary).
      batch_size: minibatch size (CORL: 256).
      chunk_size: updates per jitted scan call.
      eval_every: evaluation period in updates (multiple of chunk_size); None:
        about ten evaluations per run.
      eval_episodes: episodes per evaluation.
      agent: fields of the algorithm's config (`agents.TD3BCConfig`, ...) that
        differ from CORL's defaults, e.g. {"alpha": 2.5}; `--set agent.alpha=2.5`
        on the command line.
    """

    algo: str
    dataset: str
    env: str
    steps: int = 100_000
    seed: int = 0
    batch_size: int = 256
    chunk_size: int = 1000
    eval_every: int | None = None
    eval_episodes: int = 100
    agent: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.algo not in agents.ALGORITHMS:
            raise ValueError(f"algo={self.algo!r}: expected one of {sorted(agents.ALGORITHMS)}")
        # Checked and typed here, before the dataset loads, with the same messages as
        # every other config key (YAML lists become the tuples the agents expect).
        _, agent_config = agents.ALGORITHMS[self.algo]
        agent = coerce_fields(agent_config, self.agent, prefix="agent.")
        try:
            agent_config(**agent)  # the agent config's own value checks
        except ValueError as e:
            raise ValueError(f"agent ({self.algo} config): {e}") from None
        object.__setattr__(self, "agent", agent)
        for name in ("steps", "batch_size", "chunk_size", "eval_episodes"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name}={value!r}: expected a positive int")
        if self.steps % min(self.chunk_size, self.steps):
            raise ValueError(
                f"steps={self.steps}: expected a multiple of chunk_size={self.chunk_size}"
            )

    def resolved_chunk(self) -> int:
        return min(self.chunk_size, self.steps)

    def resolved_eval_every(self) -> int:
        chunk = self.resolved_chunk()
        if self.eval_every is not None:
            return self.eval_every
        return max(chunk, (self.steps // 10) // chunk * chunk)


def make_run_agent(algo: str, num_updates: int, **overrides: Any) -> agents.Agent:
    """`agents.make_agent` for a run of `num_updates` updates.

    CORL's defaults, except that IQL's cosine actor schedule spans the run (CORL sets
    `actor_decay_steps` to its `max_timesteps`), unless `overrides` say otherwise.
    """
    if algo == "iql":
        overrides.setdefault("actor_decay_steps", num_updates)
    return agents.make_agent(algo, **overrides)


def run_agent_train(config: AgentTrainConfig, out_dir: str | os.PathLike) -> dict[str, Any]:
    """Trains, evaluates and writes result.json and learning_curve.png.

    Returns:
      The result dict that was written to result.json.
    """
    env, env_params = envs.make(config.env)  # validates the env name first
    dataset = load_hdf5(config.dataset)
    overrides = dict(config.agent)
    if "max_action" not in overrides and hasattr(env, "action_space"):
        high = np.asarray(getattr(env.action_space(env_params), "high", 1.0))
        overrides["max_action"] = float(np.max(high))
    agent = make_run_agent(config.algo, config.steps, **overrides)

    def eval_fn(state, key):
        res = agents.evaluate(key, state, act=agent.act, env=env, env_params=env_params,
                              num_episodes=config.eval_episodes, env_name=config.env)
        return {k: v for k, v in res.items() if np.isscalar(v)}

    t0 = time.perf_counter()
    result = agents.train(
        agent, dataset, key=jax.random.key(config.seed), num_updates=config.steps,
        batch_size=config.batch_size, chunk_size=config.resolved_chunk(),
        eval_fn=eval_fn, eval_every=config.resolved_eval_every(),
    )
    seconds = time.perf_counter() - t0
    final = result.evals[-1]
    payload = {
        "config": dataclasses.asdict(config),
        "agent_config": _jsonable(dataclasses.asdict(agent.config)),
        "dataset_size": len(dataset),
        "final": final,
        "curve": result.evals,
        "train_metrics": {k: v.tolist() for k, v in result.metrics.items()},
        "timings": {
            "total_seconds": seconds,
            "updates_per_second": config.steps / float(result.metrics["seconds"][-1]),
        },
        "versions": {"jax": jax.__version__, "platform": platform.platform()},
    }
    os.makedirs(out_dir, exist_ok=True)
    _write_atomic(os.path.join(out_dir, "result.json"),
                  json.dumps(payload, indent=2).encode())
    _plot_curve(payload, os.path.join(out_dir, "learning_curve.png"))
    return payload


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    return x


def _write_atomic(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _plot_curve(payload: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = payload["curve"]
    key = "score_mean" if "score_mean" in curve[-1] else "return_mean"
    steps = [c["step"] for c in curve]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.plot(steps, [c[key] for c in curve], marker="o")
    ax1.set_xlabel("updates")
    ax1.set_ylabel("normalised score" if key == "score_mean" else "return")
    cfg = payload["config"]
    ax1.set_title(f"{cfg['algo']} on {cfg['env']} (seed {cfg['seed']})")
    metrics = payload["train_metrics"]
    ax2.plot(metrics["step"], metrics["critic_loss"])
    ax2.set_yscale("log")
    ax2.set_xlabel("updates")
    ax2.set_ylabel("critic loss (chunk mean)")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
