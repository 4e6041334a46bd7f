"""JAX environments (gymnax API), the maze2d expert, data collection, reference scores.

The maze2d tasks come in two versions: `maze2d-*-v1` follow D4RL's MuJoCo model and
task settings and are scored against D4RL's published reference returns;
`maze2d-*-legacy` (and the unsuffixed `maze2d-*`) are privrl_jax's original fast maze.

Every environment has `reset(key, params) -> (obs, state)` and
`step(key, state, action, params) -> (obs, state, reward, done, info)` with gymnax-style
auto-reset; `info["terminated"]` / `info["truncated"]` split `done` into D4RL's
`terminals` / `timeouts`.
"""

from privrl_jax.envs._base import Environment, EnvParams, EnvState, GymnaxAdapter
from privrl_jax.envs._collect import (
    SOLVE_THRESHOLD,
    CollectState,
    collect_chunk,
    collect_dataset,
    collect_step,
    init_collect_state,
)
from privrl_jax.envs._d4rl_collect import (
    D4RLCollectState,
    d4rl_collect_chunk,
    d4rl_collect_step,
    init_d4rl_collect_state,
)
from privrl_jax.envs._d4rl_expert import (
    D4RLControllerState,
    d4rl_controller_action,
    d4rl_expert_returns,
    init_d4rl_controller_state,
)
from privrl_jax.envs._expert import (
    WaypointController,
    make_waypoint_controller,
    shortest_path_table,
    waypoint_action,
    waypoint_target,
)
from privrl_jax.envs._hiv import (
    HEALTHY_STEADY_STATE,
    UNHEALTHY_STEADY_STATE,
    HIVParams,
    HIVState,
    HIVTreatment,
    ViralLoadRule,
)
from privrl_jax.envs._hiv import OBS_LOG10_HIGH as HIV_OBS_LOG10_HIGH
from privrl_jax.envs._hiv import OBS_LOG10_LOW as HIV_OBS_LOG10_LOW
from privrl_jax.envs._inventory import (
    DEMAND_DISTRIBUTIONS,
    InventoryControl,
    InventoryData,
    InventoryParams,
    InventoryState,
    StageOutcome,
    StagePolicy,
    base_stock_policy,
    collect_inventory_data,
    inventory_costs,
    inventory_returns,
    inventory_stage,
    make_inventory_params,
    observable,
    rollout_costs,
    sample_demand,
)
from privrl_jax.envs._maze import (
    LARGE_MAZE,
    MEDIUM_MAZE,
    UMAZE,
    MazeParams,
    MazeState,
    PointMaze,
    make_maze_params,
    maze_dynamics,
    maze_reward,
    parse_layout,
)
from privrl_jax.envs._mountain_car import NUM_ACTIONS as MOUNTAIN_CAR_NUM_ACTIONS
from privrl_jax.envs._mountain_car import OBS_HIGH as MOUNTAIN_CAR_OBS_HIGH
from privrl_jax.envs._mountain_car import OBS_LOW as MOUNTAIN_CAR_OBS_LOW
from privrl_jax.envs._mountain_car import energy_pumping_action, mountain_car
from privrl_jax.envs._mujoco_eval import (
    EVAL_BACKENDS,
    MUJOCO_EVAL_ENVS,
    MujocoExtraMissing,
    MujocoPointMaze,
    batch_policy,
    check_eval_backend,
    evaluate_mujoco,
    mujoco_available,
    require_mujoco,
    seed_from_key,
)
from privrl_jax.envs._mujoco_tasks import REFERENCE_RETURNS as MUJOCO_REFERENCE_RETURNS
from privrl_jax.envs._mujoco_tasks import (
    MujocoTask,
    is_mujoco_task_name,
    kitchen_observation,
    mujoco_task,
)
from privrl_jax.envs._reference import (
    D4RL_REFERENCE_RETURNS,
    MEASURED_D4RL_RETURNS,
    REFERENCE_RETURNS,
    normalized_score,
    reference_returns,
)
from privrl_jax.envs._registry import (
    D4RL_MAZE_ENVS,
    MAZE_ENVS,
    canonical_name,
    make,
    registered_envs,
)
from privrl_jax.envs._rollout import Policy, episode_returns

__all__ = [
    "D4RL_MAZE_ENVS",
    "D4RL_REFERENCE_RETURNS",
    "DEMAND_DISTRIBUTIONS",
    "EVAL_BACKENDS",
    "HEALTHY_STEADY_STATE",
    "HIV_OBS_LOG10_HIGH",
    "HIV_OBS_LOG10_LOW",
    "LARGE_MAZE",
    "MAZE_ENVS",
    "MEASURED_D4RL_RETURNS",
    "MEDIUM_MAZE",
    "MOUNTAIN_CAR_NUM_ACTIONS",
    "MOUNTAIN_CAR_OBS_HIGH",
    "MOUNTAIN_CAR_OBS_LOW",
    "MUJOCO_EVAL_ENVS",
    "MUJOCO_REFERENCE_RETURNS",
    "REFERENCE_RETURNS",
    "SOLVE_THRESHOLD",
    "UMAZE",
    "UNHEALTHY_STEADY_STATE",
    "CollectState",
    "D4RLCollectState",
    "D4RLControllerState",
    "EnvParams",
    "EnvState",
    "Environment",
    "GymnaxAdapter",
    "HIVParams",
    "HIVState",
    "HIVTreatment",
    "InventoryControl",
    "InventoryData",
    "InventoryParams",
    "InventoryState",
    "MazeParams",
    "MazeState",
    "MujocoExtraMissing",
    "MujocoPointMaze",
    "MujocoTask",
    "PointMaze",
    "Policy",
    "StageOutcome",
    "StagePolicy",
    "ViralLoadRule",
    "WaypointController",
    "base_stock_policy",
    "batch_policy",
    "canonical_name",
    "check_eval_backend",
    "collect_chunk",
    "collect_dataset",
    "collect_inventory_data",
    "collect_step",
    "d4rl_collect_chunk",
    "d4rl_collect_step",
    "d4rl_controller_action",
    "d4rl_expert_returns",
    "energy_pumping_action",
    "episode_returns",
    "evaluate_mujoco",
    "init_collect_state",
    "init_d4rl_collect_state",
    "init_d4rl_controller_state",
    "inventory_costs",
    "inventory_returns",
    "inventory_stage",
    "is_mujoco_task_name",
    "kitchen_observation",
    "make",
    "make_inventory_params",
    "make_maze_params",
    "make_waypoint_controller",
    "maze_dynamics",
    "maze_reward",
    "mountain_car",
    "mujoco_available",
    "mujoco_task",
    "normalized_score",
    "observable",
    "parse_layout",
    "reference_returns",
    "registered_envs",
    "require_mujoco",
    "rollout_costs",
    "sample_demand",
    "seed_from_key",
    "shortest_path_table",
    "waypoint_action",
    "waypoint_target",
]
