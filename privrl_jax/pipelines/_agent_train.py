"""Train one offline-RL agent on a D4RL-format dataset and evaluate it.

The imperative shell around `privrl_jax.agents`: reads the HDF5 file, trains in
jitted chunks with a progress bar, evaluates periodically in the env, and writes
`result.json` (resolved config, scores, timings, learning curve) and
`learning_curve.png` into the output directory (atomically).

Validate, then write: every input (env, dataset file and keys, dataset shapes against
the env, batch size against the dataset, the output directory) is checked before the
output directory is touched or a step is trained; one run at a time holds the
directory (`RunLock`), and a finished run is replaced only with `overwrite=True`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
import yaml

from privrl_jax import agents, envs
from privrl_jax.data import Transitions, load_hdf5, read_hdf5_metadata
from privrl_jax.pipelines._agent_config import AgentTrainConfig
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._outputs import check_output_dir
from privrl_jax.pipelines._rundir import (
    RunLock,
    atomic_write_text,
    clean_stale_temp_files,
    write_png,
)

RESULT_FILE = "result.json"
CONFIG_FILE = "config.yaml"
CURVE_FILE = "learning_curve.png"
# What a run writes into its directory; anything else there is someone else's.
OWNED_FILES = (RESULT_FILE, CONFIG_FILE, CURVE_FILE)


def make_run_agent(algo: str, num_updates: int, **overrides: Any) -> agents.Agent:
    """`agents.make_agent` for a run of `num_updates` updates.

    CORL's defaults, except that IQL's cosine actor schedule spans the run (CORL sets
    `actor_decay_steps` to its `max_timesteps`), unless `overrides` say otherwise.
    """
    if algo == "iql":
        overrides.setdefault("actor_decay_steps", num_updates)
    return agents.make_agent(algo, **overrides)


def check_dataset_for_env(
    dataset: Transitions, env_name: str, env: Any, env_params: Any, *, source: str
) -> None:
    """The dataset's observation and action widths are the env's.

    Raises:
      ValueError: naming both shapes and the fix (a dataset of that env, or the env
        the dataset was collected in).
    """
    obs_space = env.observation_space(env_params)
    act_space = env.action_space(env_params)
    act_shape = tuple(getattr(act_space, "shape", ()))
    if not act_shape:
        raise ValueError(
            f"env {env_name!r} has a discrete action space; the offline-RL agents need "
            "continuous actions (choose e.g. a maze2d env or Pendulum-v1)."
        )
    want = {
        "observations": int(np.prod(obs_space.shape)),
        "actions": int(np.prod(act_shape)),
    }
    have = {
        "observations": int(dataset.observations.shape[1]),
        "actions": int(dataset.actions.shape[1]),
    }
    for key in ("observations", "actions"):
        if have[key] != want[key]:
            raise ValueError(
                f"dataset {source!r} has {key} of dimension {have[key]} but env "
                f"{env_name!r} has {want[key]}; train on a dataset of {env_name} or "
                "give the --env the dataset was collected in."
            )


def _check_dataset_for_task(dataset: Transitions, task: Any, *, source: str) -> None:
    want = {"observations": task.obs_dim, "actions": task.act_dim}
    for key in ("observations", "actions"):
        have = int(getattr(dataset, key).shape[1])
        if have != want[key]:
            raise ValueError(
                f"dataset {source!r} has {key} of dimension {have} but task "
                f"{task.name!r} has {want[key]} (D4RL's layout); train on a dataset of "
                f"{task.name} or give the --env the dataset was collected in."
            )


def _check_out_dir(out_dir: str | os.PathLike, *, overwrite: bool) -> None:
    check_output_dir(
        out_dir,
        owned=OWNED_FILES,
        finished=RESULT_FILE,
        overwrite=overwrite,
        job="agent train",
    )


def _load_inputs(config: AgentTrainConfig) -> tuple[Any, Any, Transitions]:
    """The env and the dataset, checked against each other and the batch size.

    A MuJoCo locomotion / kitchen task has no JAX env: `(None, task)` is returned
    and the dataset is checked against the task's observation and action widths.
    """
    if envs.is_mujoco_task_name(config.env):
        env, env_params = None, envs.mujoco_task(config.env)
    else:
        env, env_params = envs.make(config.env)  # validates the env name
    dataset = load_hdf5(config.dataset)
    # Files we collected record their env: a dataset of one maze trained and scored in
    # another has the same widths, so only the recorded name can catch it.
    recorded = read_hdf5_metadata(config.dataset).get("env")
    if isinstance(recorded, str) and envs.canonical_name(
        recorded
    ) != envs.canonical_name(config.env):
        raise ValueError(
            f"dataset {config.dataset!r} was collected in {recorded!r}, not "
            f"{config.env!r}; give "
            f"--env {recorded} or a dataset of {config.env}."
        )
    if env is None:
        _check_dataset_for_task(dataset, env_params, source=config.dataset)
    else:
        check_dataset_for_env(
            dataset, config.env, env, env_params, source=config.dataset
        )
    if config.batch_size > len(dataset):
        raise ValueError(
            f"batch_size={config.batch_size} is larger than the dataset "
            f"{config.dataset!r} ({len(dataset)} transitions); give --batch-size "
            f"{len(dataset)} or less."
        )
    # After the inputs' own checks: a dataset of the wrong layout is wrong whatever is
    # installed, so the user hears it before being sent to install an extra. Still
    # before anything is written or trained.
    if config.eval_backend == "mujoco":
        envs.require_mujoco()
    return env, env_params, dataset


def run_agent_train(
    config: AgentTrainConfig,
    out_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Checks every input, then trains, evaluates and writes the run directory.

    Writes `config.yaml` (once the checks passed), then `result.json` and
    `learning_curve.png`, each atomically with a normal file's permissions. The
    directory is locked for the run (a second run into it fails at once) and the
    temporary files of killed earlier runs are removed.

    Args:
      config: the run.
      out_dir: the output directory: new, empty, or an earlier agent-train run's.
      overwrite: replace a finished run's results (refused otherwise).
      progress: show the training progress bar.

    Returns:
      The result dict that was written to result.json.

    Raises:
      ValueError: a bad input (unknown env, dataset not D4RL-format or of another
        env, batch larger than the dataset) or an unusable output directory; raised
        before anything is written.
      FileNotFoundError: no dataset file.
    """
    _check_out_dir(out_dir, overwrite=overwrite)
    env, env_params, dataset = _load_inputs(config)
    with RunLock(out_dir):
        # Again under the lock: a run that held the directory may have finished.
        _check_out_dir(out_dir, overwrite=overwrite)
        _clean_temp_files(Path(out_dir))
        # The run being replaced goes first: a crash must not leave its results
        # next to the new run's config.
        for name in (RESULT_FILE, CURVE_FILE):
            (Path(out_dir) / name).unlink(missing_ok=True)
        atomic_write_text(
            Path(out_dir) / CONFIG_FILE,
            yaml.safe_dump(to_dict(config), sort_keys=False),
        )
        payload = _train(config, env, env_params, dataset, progress=progress)
        atomic_write_text(Path(out_dir) / RESULT_FILE, json.dumps(payload, indent=2))
        _plot_curve(payload, Path(out_dir) / CURVE_FILE)
    return payload


def _train(
    config: AgentTrainConfig,
    env: Any,
    env_params: Any,
    dataset: Transitions,
    *,
    progress: bool,
) -> dict[str, Any]:
    overrides = dict(config.agent)
    if "max_action" not in overrides and hasattr(env, "action_space"):
        high = np.asarray(getattr(env.action_space(env_params), "high", 1.0))
        overrides["max_action"] = float(np.max(high))
    agent = make_run_agent(config.algo, config.steps, **overrides)

    def eval_fn(state, key):
        if config.eval_backend == "mujoco":
            res = envs.evaluate_mujoco(
                envs.batch_policy(agent.act, state),
                config.env,
                num_episodes=config.eval_episodes,
                seed=envs.seed_from_key(key),
            )
        else:
            res = agents.evaluate(
                key,
                state,
                act=agent.act,
                env=env,
                env_params=env_params,
                num_episodes=config.eval_episodes,
                env_name=config.env,
            )
        return {k: v for k, v in res.items() if np.isscalar(v)}

    t0 = time.perf_counter()
    result = agents.train(
        agent,
        dataset,
        key=jax.random.key(config.seed),
        num_updates=config.steps,
        batch_size=config.batch_size,
        chunk_size=config.resolved_chunk(),
        eval_fn=eval_fn,
        eval_every=config.resolved_eval_every(),
        progress=progress,
    )
    seconds = time.perf_counter() - t0
    return {
        "config": dataclasses.asdict(config),
        "agent_config": _jsonable(dataclasses.asdict(agent.config)),
        "dataset_size": len(dataset),
        "final": result.evals[-1],
        "curve": result.evals,
        "train_metrics": {k: np.asarray(v).tolist() for k, v in result.metrics.items()},
        "timings": {
            "total_seconds": seconds,
            "updates_per_second": config.steps / float(result.metrics["seconds"][-1]),
        },
        "versions": {"jax": jax.__version__, "platform": platform.platform()},
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    return x


# Our own temporary files: atomic_write_text's ".NAME.*.txt.tmp" and the plot's.
_TEMP_PATTERN = ".*.tmp"


def _clean_temp_files(out_dir: Path) -> None:
    # Only under the run's lock: no live writer owns a temporary file then.
    clean_stale_temp_files(out_dir)
    for p in out_dir.glob(_TEMP_PATTERN):
        p.unlink(missing_ok=True)


def _plot_curve(payload: dict[str, Any], path: Path) -> None:
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
    write_png(fig, path, dpi=100)
    plt.close(fig)
