"""Multi-product lost-sales inventory control with one-sided feedback (POOL, Sec. 2.1).

The MDP of POOL's experiments (pool.txt, Sections 2.1 and 5): w products, state
s_h in [0, 1]^w (inventory levels), action a_h in [0, 1]^d with d = w (order
quantities, one per product), horizon H, rewards in [0, 1].

One stage, per product i (all in units of the storage capacity 1):

* order: post-order level y_i = min(s_i + a_i, 1) (what does not fit is lost but
  paid for, so over-ordering is never free);
* demand D_i ~ the configured distribution, clipped to [0, demand_max];
* lost sales: sales_i = min(y_i, D_i), lost_i = (D_i - y_i)^+, s'_i = (y_i - D_i)^+;
* cost = sum_i c^o_i a_i + c^h_i s'_i + c^l_i lost_i, mapped to
  r = 1 - cost / cost_max with cost_max = sum_i (c^o_i + c^h_i + c^l_i demand_max),
  so r lies in [0, 1] (the paper assumes r_h in [0, 1], Sec. 2.1).

Why the feedback is censored. With lost sales the retailer records sales
min(y, D), never the demand D itself: whenever a product stocks out (D_i >= y_i)
the record says "sold everything", and every demand >= y_i gives the same record
(Qin et al. 2023; Gong & Simchi-Levi 2020, 2023). The record of level y determines
the outcome of every lower level y' <= y (min(y', D) = min(y', min(y, D))) but
not of any higher one: the feedback is one-sided, below the decisions taken.
POOL abstracts this by Definition 2 (lower one-sided feedback): per stage h a
public observable boundary lambda_h in R^(w+d), and the reward and transition of a
state-action pair b = (s, a) are revealed only when b < lambda_h componentwise
(Definition 1). The environment reports both layers: ``info["sales"]`` is the
censored observation and ``info["stockout"]`` marks where it hides the demand,
while ``info["observable"]`` is Definition 2's flag; the offline data
(:func:`collect_inventory_data`) keeps reward and next state only where it is True
and zeroes them elsewhere, so no learner can read them. A boundary entry above 1
means full feedback along that coordinate.

Everything is pure and jittable; the data collection is vmapped over episodes and
scanned over stages.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from privrl_jax.envs._base import Environment

DEMAND_DISTRIBUTIONS = ("uniform", "exponential", "truncnormal", "empirical")


@struct.dataclass
class InventoryState:
    """Inventory levels [w] in [0, 1] and the stage counter ``time`` (int32)."""

    level: jax.Array
    time: jax.Array


@struct.dataclass
class InventoryParams:
    """Constants of the inventory MDP (traced leaves except the static ones).

    Attributes:
      boundary: [H, w + d] observable boundary lambda_h (Definition 2); entries
        above 1 give full feedback along that coordinate.
      demand_mean: [w] mean demand per product (before clipping).
      demand_scale: [w] spread: half-width (uniform) or std (truncnormal);
        unused by the exponential.
      demand_max: public upper bound on the demand (clip), enters cost_max.
      holding_cost, lost_sales_cost, order_cost: [w] per-unit costs >= 0.
      init_high: initial levels are uniform on [0, init_high]^w (0: empty).
      demand_table: [7, W, w] daily demands by weekday (``demand="empirical"``),
        else None. Stage h draws one of the W days with weekday h mod 7
        uniformly: episodes start on weekday 0 and the demand is independent
        across stages with the series' weekly seasonality.
      max_steps_in_episode: H (static).
      demand: "uniform", "exponential", "truncnormal" or "empirical" (static).
    """

    boundary: jax.Array
    demand_mean: jax.Array
    demand_scale: jax.Array
    demand_max: float
    holding_cost: jax.Array
    lost_sales_cost: jax.Array
    order_cost: jax.Array
    init_high: float = 0.5
    demand_table: jax.Array | None = None
    max_steps_in_episode: int = struct.field(pytree_node=False, default=5)
    demand: str = struct.field(pytree_node=False, default="uniform")

    @property
    def num_products(self) -> int:
        return self.demand_mean.shape[0]

    @property
    def cost_max(self) -> jax.Array:
        """Largest cost of a stage: every order 1, stock 1 left, demand_max lost."""
        return jnp.sum(
            self.order_cost + self.holding_cost + self.lost_sales_cost * self.demand_max
        )


def make_inventory_params(
    num_products: int = 2,
    horizon: int = 5,
    *,
    boundary: float | jax.Array = 0.9,
    demand: str = "uniform",
    demand_mean: float | jax.Array = 0.4,
    demand_scale: float | jax.Array = 0.3,
    demand_max: float = 1.0,
    holding_cost: float | jax.Array = 0.2,
    lost_sales_cost: float | jax.Array = 1.0,
    order_cost: float | jax.Array = 0.3,
    init_high: float = 0.5,
    demand_series: jax.Array | None = None,
) -> InventoryParams:
    """Builds `InventoryParams`, broadcasting scalars to per-stage / per-product arrays.

    Quantities are in units of the storage capacity 1; costs are per unit.

    Args:
      num_products: w (>= 1); the action width d equals w.
      horizon: H, the number of stages (>= 1).
      boundary: observable boundary lambda (Definition 2), broadcast to [H, 2w];
        entries above 1 give full feedback along that coordinate.
      demand: "uniform", "exponential", "truncnormal" or "empirical" (the latter
        is implied by `demand_series`).
      demand_mean: mean demand per product, broadcast to [w].
      demand_scale: half-width (uniform) or std (truncnormal), broadcast to [w].
      demand_max: public upper bound on the demand; demands are clipped to it.
      holding_cost: per-unit cost of stock left after a stage, broadcast to [w].
      lost_sales_cost: per-unit cost of unmet demand, broadcast to [w].
      order_cost: per-unit order cost, broadcast to [w].
      init_high: initial levels are uniform on [0, init_high]^w (0: empty).
      demand_series: [T, w] daily demands (capacity units, day 0 a weekday 0,
        T >= 7); selects ``demand="empirical"``, see
        ``InventoryParams.demand_table`` (only whole weeks are kept).

    Returns:
      The params, with ``max_steps_in_episode = horizon``.

    Raises:
      ValueError: an unknown `demand`, `num_products` or `horizon` below 1, or an
        empirical demand without a [T >= 7, w] `demand_series`.
    """
    if demand_series is not None:
        demand = "empirical"
    if demand not in DEMAND_DISTRIBUTIONS:
        raise ValueError(
            f"demand must be one of {DEMAND_DISTRIBUTIONS}; got {demand!r}"
        )
    if num_products < 1 or horizon < 1:
        raise ValueError("num_products and horizon must be >= 1")
    w = num_products
    table = None
    if demand == "empirical":
        series = (
            jnp.asarray(demand_series, jnp.float32)
            if demand_series is not None
            else None
        )
        if (
            series is None
            or series.ndim != 2
            or series.shape[1] != w
            or series.shape[0] < 7
        ):
            raise ValueError(
                f"demand='empirical' needs demand_series of shape [T >= 7, {w}]; got "
                f"{None if series is None else tuple(series.shape)}"
            )
        weeks = series.shape[0] // 7
        table = jnp.transpose(series[: 7 * weeks].reshape(weeks, 7, w), (1, 0, 2))

    def vec(x) -> jax.Array:
        return jnp.broadcast_to(jnp.asarray(x, jnp.float32), (w,))

    lam = jnp.broadcast_to(jnp.asarray(boundary, jnp.float32), (horizon, 2 * w))
    return InventoryParams(
        boundary=lam,
        demand_mean=vec(demand_mean),
        demand_scale=vec(demand_scale),
        demand_max=float(demand_max),
        holding_cost=vec(holding_cost),
        lost_sales_cost=vec(lost_sales_cost),
        order_cost=vec(order_cost),
        init_high=float(init_high),
        demand_table=table,
        max_steps_in_episode=int(horizon),
        demand=demand,
    )


def sample_demand(
    key: jax.Array, params: InventoryParams, h: jax.Array | int = 0
) -> jax.Array:
    """Draws the demand of stage h from the configured distribution.

    Args:
      key: PRNG key.
      params: the MDP's params (distribution, mean, scale, demand_max, table).
      h: the stage, 0-based; the empirical demand uses weekday h mod 7.

    Returns:
      [w] demands, clipped to [0, demand_max].
    """
    mean, scale = params.demand_mean, params.demand_scale
    shape = mean.shape
    if params.demand == "empirical":
        table = params.demand_table
        k = jax.random.randint(key, (), 0, table.shape[1])
        d = table[jnp.asarray(h) % 7, k]
    elif params.demand == "uniform":
        d = mean + scale * jax.random.uniform(key, shape, minval=-1.0, maxval=1.0)
    elif params.demand == "exponential":
        d = mean * jax.random.exponential(key, shape)
    else:
        d = mean + scale * jax.random.normal(key, shape)
    return jnp.clip(d, 0.0, params.demand_max)


class StageOutcome(NamedTuple):
    """Everything one stage produces; only ``sales`` is what a retailer records."""

    next_level: jax.Array  # [w]
    reward: jax.Array  # scalar in [0, 1]
    sales: jax.Array  # [w] min(y, D): the censored observation
    lost_sales: jax.Array  # [w] (D - y)^+, never observed
    stockout: jax.Array  # [w] bool, D >= y: the demand is censored
    cost: jax.Array  # scalar
    product_costs: jax.Array  # [w], sum = cost (products are separable)


def inventory_stage(
    level: jax.Array, order: jax.Array, demand: jax.Array, params: InventoryParams
) -> StageOutcome:
    """The lost-sales dynamics and cost of one stage for a given demand.

    Args:
      level: [w] inventory levels before ordering, in [0, 1].
      order: [w] order quantities, clipped to [0, 1]; what exceeds capacity 1 is
        lost but paid for.
      demand: [w] demands of the stage.
      params: the MDP's params (costs, cost_max).

    Returns:
      The `StageOutcome`: next levels, reward 1 - cost / cost_max in [0, 1], the
      censored sales min(y, D), lost sales, stockout flags, total and per-product
      costs.
    """
    order = jnp.clip(order, 0.0, 1.0)
    y = jnp.minimum(level + order, 1.0)
    sales = jnp.minimum(y, demand)
    lost = jnp.maximum(demand - y, 0.0)
    nxt = y - sales
    costs = (
        params.order_cost * order
        + params.holding_cost * nxt
        + params.lost_sales_cost * lost
    )
    cost = jnp.sum(costs)
    reward = jnp.clip(1.0 - cost / params.cost_max, 0.0, 1.0)
    return StageOutcome(nxt, reward, sales, lost, demand >= y, cost, costs)


def observable(level: jax.Array, order: jax.Array, boundary_h: jax.Array) -> jax.Array:
    """Definition 1/2: b = (s, a) < lambda_h in every coordinate (lower feedback).

    Args:
      level: [..., w] states s.
      order: [..., d] actions a.
      boundary_h: [..., w + d] boundary lambda_h (broadcast against b).

    Returns:
      [...] bool, True where the pair's reward and transition are revealed.
    """
    return jnp.all(jnp.concatenate([level, order], -1) < boundary_h, axis=-1)


class InventoryControl(Environment[InventoryState, InventoryParams]):
    """Lost-sales inventory of w products (gymnax API, 5-tuple ``step``).

    Observation: [w] levels. Action: [w] order quantities in [0, 1]. ``info`` of
    ``step`` carries ``demand`` and ``lost_sales`` (ground truth, hidden in
    practice), ``sales`` and ``stockout`` (the censored record) and
    ``observable`` (Definition 2, for the pair before the step).
    """

    def __init__(self, num_products: int = 2, horizon: int = 5):
        self.num_products = num_products
        self.horizon = horizon

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (other.num_products, other.horizon) == (
            self.num_products,
            self.horizon,
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.num_products, self.horizon))

    @property
    def name(self) -> str:
        return f"inventory-w{self.num_products}-h{self.horizon}"

    @property
    def default_params(self) -> InventoryParams:
        return make_inventory_params(self.num_products, self.horizon)

    def reset_env(
        self, key: jax.Array, params: InventoryParams
    ) -> tuple[jax.Array, InventoryState]:
        level = params.init_high * jax.random.uniform(key, (params.num_products,))
        return level, InventoryState(level=level, time=jnp.int32(0))

    def step_env(self, key, state, action, params):
        demand = sample_demand(key, params, state.time)
        out = inventory_stage(state.level, action, demand, params)
        lam = params.boundary[jnp.minimum(state.time, params.boundary.shape[0] - 1)]
        info = {
            "demand": demand,
            "lost_sales": out.lost_sales,
            "sales": out.sales,
            "stockout": out.stockout,
            "observable": observable(state.level, jnp.clip(action, 0.0, 1.0), lam),
        }
        new = InventoryState(level=out.next_level, time=state.time + 1)
        return out.next_level, new, out.reward, jnp.bool_(False), info

    def observation_space(self, params: InventoryParams) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (params.num_products,), jnp.float32)

    def action_space(self, params: InventoryParams) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (params.num_products,), jnp.float32)


class StagePolicy(Protocol):
    """A non-stationary stage policy (POOL's pi_h): ``policy(key, h, level) -> order``.

    Called with a PRNG key, the stage h (int32 scalar, 0-based) and the levels [w];
    returns the order quantities [w] (the environment clips them to [0, 1]). Any
    function of that form is one; pass a hashable one where it is a static jit
    argument (`collect_inventory_data`, `inventory_costs`).
    """

    def __call__(self, key: jax.Array, h: jax.Array, level: jax.Array, /) -> jax.Array:
        """Returns the order quantities [w] for levels [w] at stage h."""
        ...


def base_stock_policy(base_stock: jax.Array, noise_std: float) -> StagePolicy:
    """The behaviour policy: order up to ``base_stock`` plus Gaussian noise.

    Args:
      base_stock: [w] (or scalar) order-up-to levels in capacity units.
      noise_std: std of the Gaussian noise added to each order.

    Returns:
      A stationary `StagePolicy`: order clip(base_stock - level + noise, 0, 1).
    """

    def policy(key: jax.Array, h: jax.Array, level: jax.Array) -> jax.Array:
        del h
        noise = noise_std * jax.random.normal(key, level.shape)
        return jnp.clip(base_stock - level + noise, 0.0, 1.0)

    return policy


class InventoryData(NamedTuple):
    """Offline episodes, [N, H, ...]; reward and next state are 0 where no feedback.

    ``feedback`` is Definition 2's flag b_h < lambda_h; the privacy unit is one
    episode (row). ``sales`` is the censored record, also 0 where no feedback.
    """

    observations: jax.Array  # [N, H, w]
    actions: jax.Array  # [N, H, d]
    rewards: jax.Array  # [N, H]
    next_observations: jax.Array  # [N, H, w]
    sales: jax.Array  # [N, H, w]
    feedback: jax.Array  # [N, H] bool


def _episode(key, params: InventoryParams, policy: StagePolicy):
    key_reset, key_steps = jax.random.split(key)
    w = params.num_products
    level = params.init_high * jax.random.uniform(key_reset, (w,))

    def body(level, inp):
        h, k = inp
        k_act, k_dem = jax.random.split(k)
        action = jnp.clip(policy(k_act, h, level), 0.0, 1.0)
        out = inventory_stage(level, action, sample_demand(k_dem, params, h), params)
        return out.next_level, (level, action, out, params.boundary[h])

    hs = jnp.arange(params.max_steps_in_episode)
    keys = jax.random.split(key_steps, params.max_steps_in_episode)
    _, (obs, act, out, lam) = jax.lax.scan(body, level, (hs, keys))
    return obs, act, out, lam


@partial(jax.jit, static_argnames=("policy", "num_episodes"))
def collect_inventory_data(
    key: jax.Array,
    params: InventoryParams,
    policy: StagePolicy,
    num_episodes: int,
) -> InventoryData:
    """``num_episodes`` episodes of ``policy`` (vmapped), censored per Definition 2.

    Jitted, with `policy` and `num_episodes` static.

    Args:
      key: PRNG key; episode i uses the i-th of `num_episodes` splits.
      params: the MDP's params.
      policy: the behaviour policy (hashable).
      num_episodes: N, the number of episodes; the privacy unit is one episode.

    Returns:
      `InventoryData` [N, H, ...]; reward, next state and sales are 0 where the
      pair is not observable.
    """
    obs, act, out, lam = jax.vmap(lambda k: _episode(k, params, policy))(
        jax.random.split(key, num_episodes)
    )
    fb = observable(obs, act, lam)
    mask = fb[..., None]
    return InventoryData(
        observations=obs,
        actions=act,
        rewards=jnp.where(fb, out.reward, 0.0),
        next_observations=jnp.where(mask, out.next_level, 0.0),
        sales=jnp.where(mask, out.sales, 0.0),
        feedback=fb,
    )


@partial(jax.jit, static_argnames=("policy", "num_episodes"))
def inventory_returns(
    key: jax.Array,
    params: InventoryParams,
    policy: StagePolicy,
    num_episodes: int,
) -> jax.Array:
    """[num_episodes] undiscounted returns (sum of rewards over H stages)."""
    _, _, out, _ = jax.vmap(lambda k: _episode(k, params, policy))(
        jax.random.split(key, num_episodes)
    )
    return out.reward.sum(-1)


def rollout_costs(
    key: jax.Array, params: InventoryParams, policy: StagePolicy, num_episodes: int
) -> jax.Array:
    """Total costs over H stages of Monte Carlo rollouts (vmapped, not jitted).

    Not jitted, so it runs under a caller's jit with a traced `policy`;
    `inventory_costs` is the jitted version.

    Args:
      key: PRNG key; episode i uses the i-th of `num_episodes` splits.
      params: the MDP's params.
      policy: the policy to roll out.
      num_episodes: the number of episodes.

    Returns:
      [num_episodes] total (unnormalised) costs, each the sum over H stages.
    """
    _, _, out, _ = jax.vmap(lambda k: _episode(k, params, policy))(
        jax.random.split(key, num_episodes)
    )
    return out.cost.sum(-1)


@partial(jax.jit, static_argnames=("policy", "num_episodes"))
def inventory_costs(
    key: jax.Array,
    params: InventoryParams,
    policy: StagePolicy,
    num_episodes: int,
) -> jax.Array:
    """Total costs over H stages of Monte Carlo rollouts (jitted `rollout_costs`).

    Set ``params.init_high = 0`` for the paper's zero initial inventory (Sec. 5.1).

    Args:
      key: PRNG key; episode i uses the i-th of `num_episodes` splits.
      params: the MDP's params.
      policy: the policy to roll out (hashable: a static jit argument).
      num_episodes: the number of episodes (static).

    Returns:
      [num_episodes] total (unnormalised) costs, each the sum over H stages.
    """
    return rollout_costs(key, params, policy, num_episodes)
