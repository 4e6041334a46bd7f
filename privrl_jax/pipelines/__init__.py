"""pipelines subpackage."""

from privrl_jax.pipelines._collect import (
    CollectConfig,
    load_collect_config,
    run_collect,
)

__all__ = ["CollectConfig", "load_collect_config", "run_collect"]
