"""Offline-RL agents (TD3+BC, IQL, EDAC), their training loop and evaluation rollouts.

Every algorithm is a factory returning an `Agent` of pure functions
`init(key, dataset)`, `update(state, batch, key) -> (state, metrics)` and
`act(state, obs)`; `train` runs jitted `lax.scan` chunks of updates and
`evaluate` runs vmapped, jitted episodes in a gymnax-API environment.
"""

from privrl_jax.agents._common import Agent, fit_state_normalizer
from privrl_jax.agents._edac import EDACConfig, EDACState, diversity_loss, edac
from privrl_jax.agents._iql import IQLConfig, IQLState, expectile_loss, iql
from privrl_jax.agents._networks import QNetwork
from privrl_jax.agents._rollouts import (
    episode_length,
    evaluate,
    rollout_returns,
    unpack_step,
)
from privrl_jax.agents._td3_bc import TD3BCConfig, TD3BCState, td3_bc
from privrl_jax.agents._train import (
    ALGORITHMS,
    TrainResult,
    make_agent,
    make_train_chunk,
    make_train_step,
    sample_batch,
    train,
)

__all__ = [
    "ALGORITHMS",
    "Agent",
    "EDACConfig",
    "EDACState",
    "IQLConfig",
    "IQLState",
    "QNetwork",
    "TD3BCConfig",
    "TD3BCState",
    "TrainResult",
    "diversity_loss",
    "edac",
    "episode_length",
    "evaluate",
    "expectile_loss",
    "fit_state_normalizer",
    "iql",
    "make_agent",
    "make_train_chunk",
    "make_train_step",
    "rollout_returns",
    "sample_batch",
    "td3_bc",
    "train",
    "unpack_step",
]
