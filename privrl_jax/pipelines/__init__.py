"""pipelines subpackage."""

from privrl_jax.pipelines._agent_train import AgentTrainConfig, run_agent_train
from privrl_jax.pipelines._collect import (
    CollectConfig,
    load_collect_config,
    run_collect,
)

__all__ = [
    "AgentTrainConfig",
    "CollectConfig",
    "load_collect_config",
    "run_agent_train",
    "run_collect",
]
