"""JAX environments (gymnax API), the maze2d expert, data collection, reference scores.

The maze2d tasks come in two versions: `maze2d-*-v1` follow D4RL's MuJoCo model and
task settings and are scored against D4RL's published reference returns;
`maze2d-*-legacy` (and the unsuffixed `maze2d-*`) are privrl_jax's original fast maze.

Every environment has `reset(key, params) -> (obs, state)` and
`step(key, state, action, params) -> (obs, state, reward, done, info)` with gymnax-style
auto-reset; `info["terminated"]` / `info["truncated"]` split `done` into D4RL's
`terminals` / `timeouts`.
"""

from privrl_jax.envs._base import (
    Environment,
)
from privrl_jax.envs._collect import (
    collect_dataset,
)
from privrl_jax.envs._hiv import OBS_LOG10_HIGH as HIV_OBS_LOG10_HIGH
from privrl_jax.envs._hiv import OBS_LOG10_LOW as HIV_OBS_LOG10_LOW
from privrl_jax.envs._hiv import (
    HIVTreatment,
    ViralLoadRule,
)
from privrl_jax.envs._inventory import (
    InventoryData,
    InventoryParams,
    StagePolicy,
    base_stock_policy,
    collect_inventory_data,
    inventory_costs,
    inventory_stage,
    make_inventory_params,
    observable,
    rollout_costs,
    sample_demand,
)
from privrl_jax.envs._mountain_car import NUM_ACTIONS as MOUNTAIN_CAR_NUM_ACTIONS
from privrl_jax.envs._mountain_car import OBS_HIGH as MOUNTAIN_CAR_OBS_HIGH
from privrl_jax.envs._mountain_car import OBS_LOW as MOUNTAIN_CAR_OBS_LOW
from privrl_jax.envs._mountain_car import energy_pumping_action, mountain_car
from privrl_jax.envs._mujoco_eval import (
    batch_policy,
    check_eval_backend,
    evaluate_mujoco,
    require_mujoco,
    seed_from_key,
)
from privrl_jax.envs._mujoco_tasks import (
    is_mujoco_task_name,
    mujoco_task,
)
from privrl_jax.envs._reference import (
    normalized_score,
)
from privrl_jax.envs._registry import (
    MAZE_ENVS,
    canonical_name,
    make,
)
from privrl_jax.envs._rollout import (
    episode_returns,
)

__all__ = [
    "HIV_OBS_LOG10_HIGH",
    "HIV_OBS_LOG10_LOW",
    "MAZE_ENVS",
    "MOUNTAIN_CAR_NUM_ACTIONS",
    "MOUNTAIN_CAR_OBS_HIGH",
    "MOUNTAIN_CAR_OBS_LOW",
    "Environment",
    "HIVTreatment",
    "InventoryData",
    "InventoryParams",
    "StagePolicy",
    "ViralLoadRule",
    "base_stock_policy",
    "batch_policy",
    "canonical_name",
    "check_eval_backend",
    "collect_dataset",
    "collect_inventory_data",
    "energy_pumping_action",
    "episode_returns",
    "evaluate_mujoco",
    "inventory_costs",
    "inventory_stage",
    "is_mujoco_task_name",
    "make",
    "make_inventory_params",
    "mountain_car",
    "mujoco_task",
    "normalized_score",
    "observable",
    "require_mujoco",
    "rollout_costs",
    "sample_demand",
    "seed_from_key",
]
