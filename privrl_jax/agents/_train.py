"""Shared training machinery: jitted chunks of `lax.scan` over updates.

Runs in JAX (the chunk) and on the host (the loop over chunks with its progress
bar and evaluation hook). The dataset lives on the device as one `Transitions`
pytree; each update samples a minibatch of indices uniformly with replacement
inside the scan (as CORL's `ReplayBuffer.sample` does), so no host round trip
happens between the K updates of a chunk.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import tqdm.auto as tqdm

from privrl_jax.agents import _common
from privrl_jax.agents._edac import EDACConfig, edac
from privrl_jax.agents._iql import IQLConfig, iql
from privrl_jax.agents._td3_bc import TD3BCConfig, td3_bc
from privrl_jax.data import Transitions

ALGORITHMS: dict[str, tuple[Callable[..., _common.Agent], type]] = {
    "td3bc": (td3_bc, TD3BCConfig),
    "iql": (iql, IQLConfig),
    "edac": (edac, EDACConfig),
}


def make_agent(name: str, **overrides: Any) -> _common.Agent:
    """Builds an agent by name with CORL defaults, overridden by keyword.

    Args:
      name: one of "td3bc", "iql", "edac".
      **overrides: config fields, e.g. `hidden_dims=(64, 64)`.

    Returns:
      The agent.

    Raises:
      ValueError: unknown name or config field.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"algo={name!r}: expected one of {sorted(ALGORITHMS)}")
    factory, config_cls = ALGORITHMS[name]
    fields = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"{name} config: unknown fields {unknown}; expected some of "
            f"{sorted(fields)}"
        )
    return factory(config_cls(**overrides))


def sample_batch(key: jax.Array, dataset: Transitions, batch_size: int) -> Transitions:
    """Uniformly samples `batch_size` transitions with replacement."""
    idx = jax.random.randint(key, (batch_size,), 0, dataset.rewards.shape[0])
    return jax.tree.map(lambda x: x[idx], dataset)


def make_train_step(
    agent: _common.Agent, *, batch_size: int
) -> Callable[[Any, Transitions, jax.Array], tuple[Any, _common.Metrics]]:
    """One update on a freshly sampled minibatch, un-jitted: (state, dataset, key)."""

    def train_step(state, dataset, key):
        k_batch, k_update = jax.random.split(key)
        return agent.update(state, sample_batch(k_batch, dataset, batch_size), k_update)

    return train_step


def make_train_chunk(
    agent: _common.Agent, *, batch_size: int, num_updates: int
) -> Callable[[Any, Transitions, jax.Array], tuple[Any, _common.Metrics]]:
    """Jitted `chunk(state, dataset, key) -> (state, metrics)` scanning K updates.

    Update i of the chunk uses `jax.random.split(key, num_updates)[i]`, so a chunk
    equals a Python loop of jitted `make_train_step` calls with the same keys.

    Args:
      agent: the algorithm.
      batch_size: minibatch size B.
      num_updates: K, the scan length.

    Returns:
      The jitted chunk; metrics are stacked with leading axis K. The dataset is an
      argument (not a closed-over constant), so it is not baked into the program.
    """
    _common.check_positive("batch_size", batch_size)
    _common.check_positive("num_updates", num_updates)
    step = make_train_step(agent, batch_size=batch_size)

    def chunk(state, dataset, key):
        return jax.lax.scan(
            lambda s, k: step(s, dataset, k), state, jax.random.split(key, num_updates)
        )

    return jax.jit(chunk)


class TrainResult(NamedTuple):
    """What `train` returns.

    Attributes:
      state: the final agent state.
      metrics: per-chunk means of every update metric, plus "step" (updates done
        at the end of each chunk) and "seconds" (wall time since the start), each a
        NumPy array with one entry per chunk.
      evals: one dict per evaluation: ``{"step": int, **eval_fn(state, key)}``.
    """

    state: Any
    metrics: dict[str, np.ndarray]
    evals: list[dict[str, Any]]


def train(
    agent: _common.Agent,
    dataset: Transitions,
    *,
    key: jax.Array,
    num_updates: int,
    batch_size: int = 256,
    chunk_size: int = 1000,
    eval_fn: Callable[[Any, jax.Array], Mapping[str, Any]] | None = None,
    eval_every: int | None = None,
    progress: bool = True,
) -> TrainResult:
    """Trains an agent offline on a dataset held on the device.

    Args:
      agent: from `td3_bc`, `iql`, `edac` or `make_agent`.
      dataset: raw `Transitions`, leading axis N; the state normaliser is fitted
        on it by `agent.init`.
      key: PRNG key; split into the init key and one key per chunk (`fold_in`).
      num_updates: total gradient updates; must be a multiple of `chunk_size`.
      batch_size: minibatch size (CORL: 256).
      chunk_size: updates per jitted `lax.scan` call; the progress bar, metric
        logging and evaluation happen between chunks.
      eval_fn: optional `eval_fn(state, key) -> dict` run every `eval_every` updates
        and after the last chunk.
      eval_every: evaluation period in updates, a multiple of `chunk_size`.
      progress: show a tqdm bar.

    Returns:
      A `TrainResult`.

    Raises:
      ValueError: non-positive sizes, sizes that are not multiples of `chunk_size`,
        or an empty dataset.
    """
    for name, value in (
        ("num_updates", num_updates),
        ("batch_size", batch_size),
        ("chunk_size", chunk_size),
    ):
        if not (isinstance(value, int) and value > 0):
            raise ValueError(f"{name}={value!r}: expected a positive int")
    if num_updates % chunk_size:
        raise ValueError(
            f"num_updates={num_updates}: expected a multiple of chunk_size={chunk_size}"
        )
    if eval_every is not None and (eval_every <= 0 or eval_every % chunk_size):
        raise ValueError(
            f"eval_every={eval_every!r}: expected a positive multiple of "
            f"chunk_size={chunk_size}"
        )
    if len(dataset) == 0:
        raise ValueError("dataset: expected at least one transition, got 0")

    dataset = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), dataset)
    k_init, k_train, k_eval = jax.random.split(key, 3)
    state = agent.init(k_init, dataset)
    chunk = make_train_chunk(agent, batch_size=batch_size, num_updates=chunk_size)

    logs: dict[str, list[float]] = {"step": [], "seconds": []}
    evals: list[dict[str, Any]] = []
    start = time.perf_counter()
    num_chunks = num_updates // chunk_size
    bar = tqdm.tqdm(
        total=num_updates,
        desc=f"train {agent.name}",
        disable=not progress,
        unit="upd",
        smoothing=0.1,
    )
    for i in range(num_chunks):
        state, metrics = chunk(state, dataset, jax.random.fold_in(k_train, i))
        metrics = jax.device_get(metrics)
        step = (i + 1) * chunk_size
        logs["step"].append(step)
        logs["seconds"].append(time.perf_counter() - start)
        for name, values in metrics.items():
            # nanmean: TD3+BC reports NaN actor losses on its critic-only steps.
            logs.setdefault(name, []).append(float(np.nanmean(values)))
        bar.update(chunk_size)
        postfix = (
            {"critic": f"{logs['critic_loss'][-1]:.3g}"}
            if "critic_loss" in logs
            else {}
        )
        if eval_fn is not None and (
            step == num_updates or (eval_every is not None and step % eval_every == 0)
        ):
            result = dict(eval_fn(state, jax.random.fold_in(k_eval, i)))
            evals.append({"step": step, **result})
            postfix.update({k: f"{v:.3g}" for k, v in result.items() if np.isscalar(v)})
        bar.set_postfix(postfix)
    bar.close()
    return TrainResult(
        state=state,
        metrics={k: np.asarray(v) for k, v in logs.items()},
        evals=evals,
    )
