"""Offline-RL agents (TD3+BC, IQL, EDAC), their training loop and evaluation rollouts.

Every algorithm is a factory returning an `Agent` of pure functions
`init(key, dataset)`, `update(state, batch, key) -> (state, metrics)` and
`act(state, obs)`; `train` runs jitted `lax.scan` chunks of updates and
`evaluate` runs vmapped, jitted episodes in a gymnax-API environment.
"""

from privrl_jax.agents._common import (
    Agent,
)
from privrl_jax.agents._edac import (
    EDACConfig,
)
from privrl_jax.agents._iql import (
    IQLConfig,
)
from privrl_jax.agents._rollouts import (
    evaluate,
)
from privrl_jax.agents._td3_bc import (
    TD3BCConfig,
)
from privrl_jax.agents._train import (
    ALGORITHMS,
    TrainResult,
    make_agent,
    train,
)

__all__ = [
    "ALGORITHMS",
    "Agent",
    "EDACConfig",
    "IQLConfig",
    "TD3BCConfig",
    "TrainResult",
    "evaluate",
    "make_agent",
    "train",
]
