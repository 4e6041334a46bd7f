"""The MuJoCo backend's locomotion and FrankaKitchen tasks (`envs._mujoco_tasks`).

Tests that run MuJoCo skip, with a reason, without the `mujoco` extra.
"""

import numpy as np
import pytest

from privrl_jax import envs
from privrl_jax.envs import _mujoco_tasks as mt

REASON = 'the mujoco extra is not installed: pip install -e ".[mujoco]"'


@pytest.fixture
def gym():
    pytest.importorskip("mujoco", reason=REASON)
    return pytest.importorskip("gymnasium", reason=REASON)


@pytest.fixture
def robotics(gym):
    return pytest.importorskip("gymnasium_robotics", reason=REASON)


def test_names_resolve_to_gymnasium_envs_and_dataset_widths():
    # D4RL's v2 datasets: gymnasium v4 (same MJCF as the mujoco-py v3 they came from).
    cases = {
        "halfcheetah-medium-v2": ("HalfCheetah-v4", 17, 6, 1000),
        "hopper-medium-replay-v2": ("Hopper-v4", 11, 3, 1000),
        "walker2d-full-replay-v2": ("Walker2d-v4", 17, 6, 1000),
        "mujoco/hopper/expert-v0": ("Hopper-v5", 11, 3, 1000),
        "kitchen-mixed-v0": ("FrankaKitchen-v1", 60, 9, 280),
        "D4RL/kitchen/partial-v2": ("FrankaKitchen-v1", 60, 9, 280),
    }
    for name, want in cases.items():
        t = mt.mujoco_task(name)
        assert (t.gym_id, t.obs_dim, t.act_dim, t.max_steps) == want, name
    assert mt.mujoco_task("kitchen-mixed-v0").kitchen_tasks == (
        "microwave",
        "kettle",
        "bottom burner",
        "light switch",
    )
    assert len(mt.D4RL_TASK_NAMES) == 3 * 6 + 3


@pytest.mark.parametrize("bad", ["hopper-foo-v2", "hopper-medium-v3", "kitchen-all-v0"])
def test_unknown_task_is_one_error_line(bad):
    with pytest.raises(ValueError, match="unknown MuJoCo task") as e:
        envs.check_eval_backend("mujoco", bad)
    assert "\n" not in str(e.value)


def test_backend_choice_errors():
    with pytest.raises(ValueError, match="runs only in MuJoCo.*eval_backend='mujoco'"):
        envs.check_eval_backend("jax", "hopper-medium-v2")
    with pytest.raises(ValueError, match="not env 'antmaze-umaze-v2'"):
        envs.check_eval_backend("mujoco", "antmaze-umaze-v2")
    envs.check_eval_backend("mujoco", "walker2d-expert-v2")  # accepted


@pytest.mark.parametrize(
    "name, low, high",
    [
        ("halfcheetah-medium-v2", -280.178953, 12135.0),
        ("hopper-random-v2", -20.272305, 3234.3),
        ("walker2d-expert-v2", 1.629008, 4592.3),
        ("kitchen-complete-v0", 0.0, 4.0),
    ],
)
def test_reference_returns_score_0_and_100(name, low, high):
    # D4RL's d4rl/infos.py REF_MIN_SCORE / REF_MAX_SCORE, typed in by hand.
    scores = mt.normalized_task_score(name, [low, high, (low + high) / 2])
    np.testing.assert_allclose(scores, [0.0, 100.0, 50.0], atol=1e-9)


def test_kitchen_observation_is_d4rl_layout():
    obs59 = np.arange(59.0)
    tasks = mt.KITCHEN_DATASETS["complete"]
    out = mt.kitchen_observation(obs59, tasks)
    assert out.shape == (60,)
    np.testing.assert_array_equal(out[:9], np.arange(9.0))  # robot qpos
    np.testing.assert_array_equal(out[9:30], np.arange(18.0, 39.0))  # object qpos
    goal = np.zeros(30)
    goal[22] = -0.75  # microwave
    goal[23:30] = [-0.23, 0.75, 1.62, 0.99, 0.0, 0.0, -0.06]  # kettle
    goal[17:19] = [-0.69, -0.05]  # light switch
    goal[19] = 0.37  # slide cabinet
    np.testing.assert_array_equal(out[30:], goal)
    with pytest.raises(ValueError, match="59 entries"):
        mt.kitchen_observation(np.zeros(60), tasks)


def test_kitchen_constants_are_gymnasium_robotics(robotics):
    from gymnasium_robotics.envs.franka_kitchen import kitchen_env as ke

    for task, idx in mt.KITCHEN_ELEMENT_INDICES.items():
        np.testing.assert_array_equal(ke.OBS_ELEMENT_INDICES[task], idx)
        np.testing.assert_array_equal(
            ke.OBS_ELEMENT_GOALS[task], mt.KITCHEN_ELEMENT_GOALS[task]
        )


@pytest.mark.parametrize(
    "name",
    [
        "halfcheetah-medium-v2",
        "hopper-medium-v2",
        "walker2d-medium-v2",
        "mujoco/walker2d/medium-v0",
    ],
)
def test_locomotion_observation_is_qpos_without_x_then_clipped_qvel(gym, name):
    task = mt.mujoco_task(name)
    env = mt.make_gym_env(task)
    try:
        obs, _ = env.reset(seed=3)
        for _ in range(5):
            obs, *_ = env.step(np.full(task.act_dim, 0.7))
        out = mt.adapt_observation(task, obs)
        data = env.unwrapped.data
        assert out.shape == (task.obs_dim,)
        nq = data.qpos.shape[0]
        np.testing.assert_allclose(out[: nq - 1], data.qpos[1:])
        qvel = (
            data.qvel if task.domain == "halfcheetah" else np.clip(data.qvel, -10, 10)
        )
        np.testing.assert_allclose(out[nq - 1 :], qvel)
    finally:
        env.close()


def _direct_return(gym, gym_id, action, seed, steps, **kwargs):
    env = gym.make(gym_id, max_episode_steps=steps, **kwargs)
    env.reset(seed=seed)
    total = 0.0
    for _ in range(steps):
        _, r, terminated, truncated, _ = env.step(action)
        total += r
        if terminated or truncated:
            break
    env.close()
    return total


@pytest.mark.parametrize(
    "name, steps", [("hopper-medium-v2", 400), ("halfcheetah-expert-v2", 60)]
)
def test_fixed_action_returns_equal_gymnasiums_own_run(gym, name, steps):
    """Episode i of the backend is gymnasium's env reset with seed + i, run as is.

    A constant push makes the hopper fall (episodes end early, at different steps),
    so the termination handling is exercised too.
    """
    task = mt.mujoco_task(name)
    action = np.linspace(-0.8, 0.9, task.act_dim)
    got = mt.task_returns(
        lambda o: np.tile(action, (len(o), 1)),
        task,
        num_episodes=3,
        seed=11,
        num_steps=steps,
    )
    want = [_direct_return(gym, task.gym_id, action, 11 + i, steps) for i in range(3)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert len(set(np.round(got, 6))) == 3  # different seeds, different episodes


def test_kitchen_fixed_action_return_and_scores(robotics, gym):
    task = mt.mujoco_task("kitchen-partial-v0")
    action = np.full(9, 0.3)
    res = envs.evaluate_mujoco(
        lambda o: np.tile(action, (len(o), 1)),
        "kitchen-partial-v0",
        num_episodes=1,
        seed=5,
        num_steps=20,
    )
    want = _direct_return(
        gym,
        "FrankaKitchen-v1",
        action,
        5,
        20,
        tasks_to_complete=list(task.kitchen_tasks),
    )
    assert res["return_mean"] == pytest.approx(want, abs=1e-12)
    assert res["score_mean"] == pytest.approx(100 * want / 4.0)
