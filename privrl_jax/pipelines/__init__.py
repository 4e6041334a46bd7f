"""pipelines subpackage: end-to-end jobs and the config loader every command uses."""

from privrl_jax.pipelines._agent_train import AgentTrainConfig, run_agent_train
from privrl_jax.pipelines._audit_run import (
    AUDIT_FILE,
    audit_lines,
    audit_run,
    raise_on_violation,
)
from privrl_jax.pipelines._collect import CollectConfig, run_collect
from privrl_jax.pipelines._config import (
    ConfigSource,
    load_config,
    qualify_config,
    shipped_config,
    to_dict,
)
from privrl_jax.pipelines._launch import (
    launch_local,
)
from privrl_jax.pipelines._verify import verify_run

__all__ = [
    "AUDIT_FILE",
    "AgentTrainConfig",
    "CollectConfig",
    "ConfigSource",
    "audit_lines",
    "audit_run",
    "launch_local",
    "load_config",
    "qualify_config",
    "raise_on_violation",
    "run_agent_train",
    "run_collect",
    "shipped_config",
    "to_dict",
    "verify_run",
]
