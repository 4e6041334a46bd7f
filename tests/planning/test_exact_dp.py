"""rho = inf, full feedback, a discrete-like instance:
backward induction == exact DP."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from privrl_jax import planning
from privrl_jax.envs import (
    InventoryData,
    inventory_stage,
    make_inventory_params,
)
from privrl_jax.planning._grid import grid_cell

H = 3
LEVELS = (0.0, 0.5)  # states and actions; demand in {0.5, 1.0} keeps s' in LEVELS


def _data(n, seed):
    p = make_inventory_params(1, H, boundary=1.5)  # full feedback
    rng = np.random.default_rng(seed)
    obs, act, rew, nxt = (np.zeros((n, H)) for _ in range(4))
    s = rng.choice(LEVELS, n)
    for h in range(H):
        a = rng.choice(LEVELS, n)
        d = rng.choice([0.5, 1.0], n, p=[0.6, 0.4])
        out = jax.vmap(lambda s, a, d: inventory_stage(s[None], a[None], d[None], p))(
            jnp.asarray(s), jnp.asarray(a), jnp.asarray(d)
        )
        obs[:, h], act[:, h], rew[:, h] = s, a, np.asarray(out.reward)
        nxt[:, h] = np.asarray(out.next_level)[:, 0]
        s = nxt[:, h]
    f32 = lambda x: jnp.asarray(x, jnp.float32)[..., None]
    data = InventoryData(
        f32(obs),
        f32(act),
        jnp.asarray(rew, jnp.float32),
        f32(nxt),
        jnp.zeros((n, H, 1)),
        jnp.ones((n, H), bool),
    )
    return p, data, (obs, act, rew, nxt)


def _dp(model_r, model_p):
    # Q_h(s, a) = r + sum_s' P(s'|s, a) max_a' Q_{h+1}(s', a') on LEVELS x LEVELS.
    q = np.zeros((H + 1, 2, 2))
    for h in range(H - 1, -1, -1):
        v = q[h + 1].max(1) if h + 1 < H else np.zeros(2)
        q[h] = model_r[h] + model_p[h] @ v
    return q[:H]


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_backward_induction_equals_dp_on_the_empirical_model():
    p, data, (obs, act, rew, nxt) = _data(3000, 0)
    geom = planning.make_grid_geometry(p.boundary, 2)  # one cell per (s, a) in LEVELS^2
    acts = jnp.array([[0.0], [0.5]])
    cfg = planning.PoolConfig(bonus_scale=0.0)
    res = planning.pool_plan(jax.random.key(0), data, geom, acts, None, cfg)
    # The empirical MDP by counting (numpy, independent of the planner).
    r_hat, p_hat = np.zeros((H, 2, 2)), np.zeros((H, 2, 2, 2))
    for h, i, j in itertools.product(range(H), range(2), range(2)):
        m = (obs[:, h] == LEVELS[i]) & (act[:, h] == LEVELS[j])
        assert m.sum() > 20
        r_hat[h, i, j] = rew[m, h].mean()
        for k in range(2):
            p_hat[h, i, j, k] = np.mean(nxt[m, h] == LEVELS[k])
    q = _dp(r_hat, p_hat)
    for h, i, j in itertools.product(range(H), range(2), range(2)):
        cell = int(grid_cell(geom, h, jnp.array([LEVELS[i], LEVELS[j]])))
        assert float(res.q_tables[h, cell]) == pytest.approx(q[h, i, j], abs=2e-5)
    # ... and the greedy policy is DP's argmax at every state and stage.
    pol = planning.greedy_policy(geom, res.q_tables, acts)
    for h, i in itertools.product(range(H), range(2)):
        a = float(pol(None, h, jnp.array([LEVELS[i]]))[0])
        assert a == LEVELS[int(np.argmax(q[h, i]))]


def test_large_data_approaches_dp_on_the_true_model():
    p, data, _ = _data(20000, 1)
    geom = planning.make_grid_geometry(p.boundary, 2)
    acts = jnp.array([[0.0], [0.5]])
    res = planning.pool_plan(
        jax.random.key(0), data, geom, acts, None, planning.PoolConfig(bonus_scale=0.0)
    )
    r_true, p_true = np.zeros((H, 2, 2)), np.zeros((H, 2, 2, 2))
    for i, j in itertools.product(range(2), range(2)):
        for d, pd in ((0.5, 0.6), (1.0, 0.4)):
            out = inventory_stage(
                jnp.array([LEVELS[i]]), jnp.array([LEVELS[j]]), jnp.array([d]), p
            )
            r_true[:, i, j] += pd * float(out.reward)
            p_true[:, i, j, LEVELS.index(float(out.next_level[0]))] += pd
    q = _dp(r_true, p_true)
    for h, i, j in itertools.product(range(H), range(2), range(2)):
        cell = int(grid_cell(geom, h, jnp.array([LEVELS[i], LEVELS[j]])))
        assert float(res.q_tables[h, cell]) == pytest.approx(q[h, i, j], abs=0.02)
