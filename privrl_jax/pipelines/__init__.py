"""pipelines subpackage: end-to-end jobs and the config loader every command uses."""

from privrl_jax.pipelines._agent_train import AgentTrainConfig, run_agent_train
from privrl_jax.pipelines._collect import CollectConfig, run_collect
from privrl_jax.pipelines._config import (
    load_config,
    qualify_config,
    shipped_config,
    shipped_configs,
)

__all__ = [
    "AgentTrainConfig",
    "CollectConfig",
    "load_config",
    "qualify_config",
    "run_agent_train",
    "run_collect",
    "shipped_config",
    "shipped_configs",
]
