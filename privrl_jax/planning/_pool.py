"""POOL: private statistics and pessimistic backward induction (pool.txt, Alg. 1).

Statistics. Cells are the basis points of the zones (K = M P, see :func:`cell_index`),
or the cells of a :class:`GridGeometry` (the grid baseline). For stage h (0-based,
v_max_h = H - h is the largest value to go, the paper's H - h + 1) and each transition i
of the data whose pair b = (s_h, a_h) has feedback (b < lambda_h, Definition 2), the
target is

    y_i = clip((r_i + V_{h+1}(s'_i)) / v_max_h, 0, 1)   (0 where r_i is NaN),

with V_{h+1} the (already private) value of the stage after. Per stage and cell
we release n_h(k) = #{i in k}, S_h(k) = sum y_i and S2_h(k) = sum y_i^2. The
paper releases private counts and builds P_tilde V from them (Sec. 3.2, "Gaussian
mechanism", following Qiao & Wang 2024); our transition is continuous, so we
release the sum of next values directly, which is P_tilde_h V_{h+1} * n in one
statistic, and its second moment for the Bernstein bonus. Rewards come from the
data: with lost sales the cost depends on the unseen demand, so r + P V is
estimated jointly (the paper assumes r known, Sec. 2.1 footnote 1).

Sensitivity (privacy unit: one episode, add/remove-one). An episode has one pair
per stage and that pair lands in at most one cell (none where it has no
feedback). So at every stage it changes one count by 1 and one S and one S2 by
y, y^2 in [0, 1]; the whole vector (n, S, S2) over all H stages moves by at most

    Delta = sqrt(sum_h (1^2 + 1^2 + 1^2)) = sqrt(3 H),

attained by an episode with feedback at every stage and y = 1 (reward 1 and
V_{h+1}(s') = v_max_{h+1} at every stage). Normalising y by v_max_h is what
keeps every coordinate's change at most 1; raw value sums would give
sqrt(sum_h (2 + 2 v_max_h^2)) ~ H^1.5. Additive zones (``_additive``) count a pair
in one cell of each of their P parts with the public weight 1 / sqrt(P): P
coordinates each move by at most 1 / sqrt(P) per statistic and stage, the same
squared norm 1, so Delta = sqrt(3 H) holds for them too (:func:`cell_weight`).

One mechanism, released adaptively. The counts of all stages are released
first; S_h, S2_h are released in the backward pass, once V_{h+1} is known. Every
coordinate gets N(0, (sigma Delta)^2) from the one
``GaussianMechanism(l2_sensitivity=sqrt(3H), noise_multiplier=sigma)``. The blocks
are Gaussian mechanisms of sensitivities sqrt(H) (counts) and sqrt(2) (each
stage's sums) under the same noise std, so their adaptive composition is
sqrt(H + 2H) / (sigma sqrt(3H)) = 1/sigma - GDP (Dong, Roth & Su 2022, Cor.
3.3, which holds adaptively) and rho = H/(2 sigma^2 3H) + H 2/(2 sigma^2 3H) =
1 / (2 sigma^2)-zCDP (Bun & Steinke 2016, Lemma 2.3): exactly the single release
``mech.event() = GaussianDpEvent(sigma)`` records. V_{h+1} is a function of earlier
releases only, so each stage's block is a Gaussian mechanism given the past.

Pessimism (Algorithm 1, lines 7-10). With n~ the noisy count of a cell, E_rho a
(1 - delta) bound on every released coordinate's noise and iota = log(H K / delta):

    Q~ = v_max mean,  mean = clip(S~ / n~, 0, 1),
    Var = v_max^2 (clip(S2~ / n~, 0, 1) - mean^2)^+,
    Gamma = s [C1 sqrt(Var iota / (n~ - E_rho)) + C2 v_max E_rho iota / n~]
    (Gamma = C H when n~ <= E_rho),  Q = clip(Q~ - Gamma, 0, v_max).

Source, term by term: Qiao & Wang, "Offline reinforcement learning with
differential privacy" (NeurIPS 2023; read in its OpenReview text), DP-APVI =
their Algorithm 1. Line 5:
Gamma_h(s, a) = C1 sqrt(Var_P~(V~_{h+1}) iota / (n~ - E_rho)) + C2 S H E_rho
iota / n~ if n~ > E_rho, otherwise C H -- note the privacy term divides by n~,
not n~ - E_rho. Line 1: C1 = sqrt 2, C2 = 16, C > 1. Line 2: iota = log(H S A /
delta) (our S A is the K cells) and E_rho = 4 sqrt(H log(4 H S^2 A / delta) /
rho). pool.txt Algorithm 1 lines 1 and 8 take over the constants and "(or CH if
n <= E_rho)". Their E_rho is built as follows: each count gets N(0, 2H/rho) (eq. 2:
replacing a trajectory moves 4 H counts by 1, Delta^2 = 4 H, sigma^2 = Delta^2 /
(2 rho)); a Gaussian tail and a union bound over the <= 2 H S^2 A counts give
|noise| <= sigma sqrt(2 log(4 H S^2 A / delta)) = E_rho / 2, and the projection
(3) that makes the S counts n~(s, a, .) sum to n~(s, a) adds up to E_rho / 2
more, so |n~ - n| <= E_rho. We release one scalar count per cell and need no
projection, so our E_rho is the tail bound alone, over all 3 H K released
coordinates (counts and sums share one std):

    E_rho = sigma_noise sqrt(2 log(6 H K / delta)),  sigma_noise = sqrt(3 H / (2 rho)).

Their S H E_rho / n~ bounds |(P~ - P^) V| <= ||P~ - P^||_1 H for an S-entry P~;
our estimate is one ratio S~ / n~ of values in [0, v_max], whose privacy error is
at most 2 v_max E_rho / n~, so S H becomes v_max (S = 1, H = the stage's value
range). Non-private (no mechanism), E_rho = 0 and Gamma is the variance term.

``bonus_scale`` s multiplies Gamma on covered cells (1: the paper's constants).
Those constants are vacuous at our data sizes: at rho = 1, H = 5, K = 30 the
privacy term alone is 16 v_max E_rho iota / n~ ~ 1.5e3 v_max / n~, so a cell needs
n~ > 1.5e4 samples before it is below 0.1 v_max, while 2000 episodes give ~70 per
cell (:func:`paper_constants_samples_needed`). The shipped default s = 0.01 was
chosen on a public stand-in (another demand series, other data), see docs/pool.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax.envs import InventoryData
from privrl_jax.planning._additive import (
    AdditiveGeometry,
    additive_cells,
    additive_greedy,
    additive_value,
    centre_tables,
)
from privrl_jax.planning._grid import GridGeometry, grid_cell, grid_value
from privrl_jax.planning._zones import ZoneGeometry, cell_index, zone_value
from privrl_jax.privacy import GaussianMechanism

Geometry = ZoneGeometry | GridGeometry | AdditiveGeometry


def geometry_cell(geom: Geometry, h: jax.Array, b: jax.Array) -> jax.Array:
    """Statistics cell of one pair b [n] at stage h: a scalar, or [P] (additive)."""
    if isinstance(geom, GridGeometry):
        return grid_cell(geom, h, b)
    if isinstance(geom, AdditiveGeometry):
        return additive_cells(geom, h, b)
    return cell_index(geom, h, b)


def cell_weight(geom: Geometry) -> float:
    """What one pair adds to each of its cells: 1, or 1 / sqrt(P) for additive zones.

    A pair lands in 1 (or P) cells, so its squared contribution to each of n, S, S2
    is at most 1 per stage either way: Delta = sqrt(3 H) for every geometry.
    """
    return geom.weight if isinstance(geom, AdditiveGeometry) else 1.0


def geometry_value(
    geom: Geometry, h: jax.Array, q_flat: jax.Array, b: jax.Array
) -> jax.Array:
    """Q_bar_h(b) from the stage's flat table [K] (unclipped)."""
    if isinstance(geom, GridGeometry):
        return grid_value(geom, h, q_flat, b)
    if isinstance(geom, AdditiveGeometry):
        return additive_value(geom, h, q_flat, b)
    return zone_value(geom, h, q_flat, b)


@dataclasses.dataclass(frozen=True)
class PoolConfig:
    """Constants of Algorithm 1 (pool.txt) and our pessimism knob.

    ``bonus_scale`` s multiplies the bonus Gamma on covered cells. Its default, 0.003,
    is the shipped pipeline's (``configs/pool/default.yaml``): the value a rule fixed
    in advance picks on a *public* stand-in task of another distribution (the s in
    {0.001, ..., 0.3} with the smallest gap averaged over rho in {0.1, ..., 40};
    docs/pool.md; ``benchmarks/results/pool_select_shift.md``). No private
    data enter that choice; on a task far from it, rerun the rule on your own public
    stand-in. ``bonus_scale=1`` gives the paper's constants (C1 = sqrt 2, C2 = 16),
    which need ~15,000 samples per cell and otherwise zero every Q (the policy never
    orders).
    """

    c1: float = math.sqrt(2.0)
    c2: float = 16.0
    c: float = 2.0  # C > 1: Gamma = C H on cells without enough data
    failure_prob: float = 0.05  # delta of the bonus (not the DP delta)
    bonus_scale: float = 0.003  # the shipped config's; 1: the paper's constants


class PoolResult(NamedTuple):
    """What POOL releases: Q at the basis points and the noisy statistics.

    Attributes:
      q_tables: [H, K] pessimistic Q_h at the cells (zones: K = M P, row-major
        [M, P]: Q_h(b^j_m)) in [0, H - h]; additive zones: the centred part tables
        (``centre_tables``), which may be negative, Q_bar their sum.
      counts: [H, K] the released (noisy) n.
      sums: [H, K] the released (noisy) S.
      squares: [H, K] the released (noisy) S2.
      noise_bound: E_rho (0 without noise).
    """

    q_tables: jax.Array
    counts: jax.Array
    sums: jax.Array
    squares: jax.Array
    noise_bound: jax.Array


def statistics_sensitivity(horizon: int) -> float:
    """L2 sensitivity of (n, S, S2) over H stages for one episode: sqrt(3 H)."""
    return math.sqrt(3.0 * horizon)


def pool_mechanism(rho: float, horizon: int) -> GaussianMechanism:
    """The one Gaussian mechanism of a POOL run that is exactly rho-zCDP.

    Args:
      rho: the zCDP budget (> 0); the privacy unit is one episode (add/remove-one).
      horizon: The horizon H.

    Returns:
      A ``GaussianMechanism`` with sensitivity sqrt(3 H) and
      sigma = 1 / sqrt(2 rho).

    Raises:
      ValueError: `rho` not positive.
    """
    return GaussianMechanism.from_zcdp(
        rho, l2_sensitivity=statistics_sensitivity(horizon)
    )


def action_grid(action_dim: int, levels: int) -> jax.Array:
    """Candidate actions on a regular grid of [0, 1]^d.

    Args:
      action_dim: The action dimension d.
      levels: points per dimension, linspace(0, 1, levels).

    Returns:
      [levels^d, d] the grid, row-major (the last coordinate varies fastest).
    """
    axes = [jnp.linspace(0.0, 1.0, levels)] * action_dim
    return jnp.stack([g.ravel() for g in jnp.meshgrid(*axes, indexing="ij")], -1)


def action_candidates(
    action_dim: int, levels: int, max_candidates: int = 256, seed: int = 0
) -> jax.Array:
    """[K_a, d] public candidate orders for max_a Q_bar (Alg. 1 line 16).

    The full grid (``levels`` per dimension) while levels^d <= max_candidates;
    above that (d >= 3 at 11 levels) the grid's ``levels`` diagonal orders
    (a, ..., a) plus pseudo-random uniform orders from the public ``seed`` up to
    ``max_candidates``: a fixed, data-independent set whose size does not grow
    as levels^d. The paper maximises over the continuous action box and does
    not say how; a random candidate set is the usual cheap stand-in.

    Args:
      action_dim: The action dimension d.
      levels: points per dimension of the grid (and of the diagonal).
      max_candidates: the most candidates, K_a.
      seed: public seed of the random candidates.

    Returns:
      [K_a, d] candidate orders in [0, 1]^d, K_a = min(levels^d, max_candidates).

    Raises:
      ValueError: `action_dim` below 1, `levels` below 2 or `max_candidates`
        below `levels`.
    """
    if action_dim < 1 or levels < 2 or max_candidates < levels:
        raise ValueError(
            "action_candidates needs action_dim >= 1, levels >= 2 and "
            f"max_candidates >= levels; got {action_dim}, {levels}, "
            f"{max_candidates}"
        )
    if levels**action_dim <= max_candidates:
        return action_grid(action_dim, levels)
    diag = np.repeat(np.linspace(0.0, 1.0, levels)[:, None], action_dim, 1)
    rng = np.random.default_rng(seed)
    extra = rng.uniform(0.0, 1.0, (max_candidates - levels, action_dim))
    return jnp.asarray(np.concatenate([diag, extra]), jnp.float32)


def data_cells(geom: Geometry, data: InventoryData) -> jax.Array:
    """[N, H] cell of every pair ([N, H, P] for additive zones), -1 without feedback."""
    b = jnp.concatenate([data.observations, data.actions], -1)  # [N, H, n]
    hs = jnp.arange(b.shape[1])
    cells = jax.vmap(
        jax.vmap(lambda h, x: geometry_cell(geom, h, x), (0, 0)), (None, 0)
    )(hs, b)
    fb = data.feedback if cells.ndim == 2 else data.feedback[..., None]
    return jnp.where(fb, cells, -1)


def state_values(
    geom: Geometry,
    h: jax.Array,
    q_table: jax.Array,
    states: jax.Array,
    actions: jax.Array,
) -> jax.Array:
    """V_bar_h(s) = max_k clip(Q_bar_h(s, a_k), 0, H - h) for states [N, w].

    ``q_table`` is stage h's flat table [K]. Algorithm 1 line 17 takes the
    expectation under the greedy pi_h, i.e. this max over the public candidates
    (separable additive zones: the exact max over the product grid of their
    ``levels``, one max per product; ``actions`` is then unused).
    """
    v_max = geom.horizon - h
    if isinstance(geom, AdditiveGeometry) and geom.separable:
        return jax.vmap(
            lambda s: jnp.clip(additive_greedy(geom, h, q_table, s)[0], 0.0, v_max)
        )(states)

    def one(s):
        qs = jax.vmap(
            lambda a: geometry_value(geom, h, q_table, jnp.concatenate([s, a]))
        )(actions)
        return jnp.max(jnp.clip(qs, 0.0, v_max))

    return jax.vmap(one)(states)


def _targets(geom, h, q_next, data, actions):
    # y_i of stage h from the value table of stage h + 1 (0 after the last stage).
    horizon = geom.horizon
    hn = jnp.minimum(h + 1, horizon - 1)
    v = state_values(geom, hn, q_next, data.next_observations[:, h], actions)
    v = jnp.where(h + 1 < horizon, v, 0.0)
    y = jnp.clip((data.rewards[:, h] + v) / (horizon - h), 0.0, 1.0)
    # The sensitivity sqrt(3 H) needs y in [0, 1]; clip keeps NaN, so a missing (NaN)
    # reward is mapped to 0, the pessimistic target (inf rewards are clipped to 0 or 1
    # above).
    return jnp.where(jnp.isnan(y), 0.0, y)


def _cell_sums(cells_h, values, num_cells, weight=1.0):
    # Pairs without feedback (cell -1) add nothing: segment_sum drops them. cells_h is
    # [N] or [N, P] (one cell per part, each getting weight * value).
    ids = jnp.where(cells_h >= 0, cells_h, num_cells)
    if ids.ndim == 2:
        values = jnp.broadcast_to(values[:, None], ids.shape).ravel()
        ids = ids.ravel()
    if weight != 1.0:
        values = weight * values
    return jax.ops.segment_sum(values, ids, num_segments=num_cells + 1)[:num_cells]


@jax.jit
def exact_statistics(
    geom: Geometry,
    data: InventoryData,
    actions: jax.Array,
    q_tables: jax.Array,
) -> jax.Array:
    """[3, H, K] exact (n, S, S2) with targets from the given value tables.

    Stage h's targets use ``q_tables[h + 1]`` (what the backward pass would have
    released), so this is the pre-noise statistics vector conditional on the past
    releases: the vector whose sensitivity is sqrt(3 H).
    """
    cells = data_cells(geom, data)
    k, wt = geom.num_cells, cell_weight(geom)

    def stage(h):
        y = _targets(
            geom, h, q_tables[jnp.minimum(h + 1, geom.horizon - 1)], data, actions
        )
        ones = jnp.ones_like(y)
        return jnp.stack([_cell_sums(cells[:, h], v, k, wt) for v in (ones, y, y * y)])

    return jnp.moveaxis(jax.vmap(stage)(jnp.arange(geom.horizon)), 1, 0)


def noise_bound(
    mechanism: GaussianMechanism | None,
    horizon: int,
    num_cells: int,
    failure_prob: float,
) -> float:
    """E_rho: every released coordinate's |noise| is below it w.p. 1 - delta.

    0 without noise. Qiao & Wang's E_rho is twice such a bound because of their
    count projection (eq. 3); see the module docstring.
    """
    if mechanism is None:
        return 0.0
    # Two-sided Gaussian tail, union bound over the 3 H K released coordinates.
    return mechanism.noise_std * math.sqrt(
        2.0 * math.log(6.0 * horizon * num_cells / failure_prob)
    )


def bonus_iota(horizon: int, num_cells: int, failure_prob: float) -> float:
    """Log factor iota = log(H K / delta) (DP-APVI, Qiao & Wang 2023, Alg. 1 line 2)."""
    return math.log(horizon * num_cells / failure_prob)


def paper_constants_samples_needed(
    rho: float,
    horizon: int,
    num_cells: int,
    failure_prob: float = 0.05,
    alpha: float = 0.1,
    c2: float = 16.0,
) -> float:
    """n~ at which the paper's privacy term C2 v_max E_rho iota / n~ is alpha v_max.

    How many samples one cell needs before the DP-APVI bonus with C2 = 16 stops
    zeroing its Q: C2 E_rho iota / alpha (independent of v_max).
    """
    mech = pool_mechanism(rho, horizon)
    e_rho = noise_bound(mech, horizon, num_cells, failure_prob)
    return c2 * e_rho * bonus_iota(horizon, num_cells, failure_prob) / alpha


def pessimistic_q(
    counts: jax.Array,
    sums: jax.Array,
    squares: jax.Array,
    v_max: jax.Array,
    e_rho: jax.typing.ArrayLike,
    iota: float,
    horizon: int,
    cfg: PoolConfig,
) -> jax.Array:
    """Lines 7-10 of Algorithm 1 on the cells of one stage ([K] arrays).

    ``bonus_scale`` scales Gamma on covered cells only: a cell with n~ <= E_rho
    gets Gamma = C H > v_max, i.e. Q = 0, at every scale (scaling that fallback
    would let an empty cell's noise-only mean through).
    """
    covered = counts > e_rho
    n = jnp.where(covered, counts, 1.0)
    n_lo = jnp.where(covered, counts - e_rho, 1.0)
    mean = jnp.clip(sums / n, 0.0, 1.0)
    # E[y^2] - E[y]^2 cancels in float32 (error ~1e-7) and sqrt(Var) would blow
    # that up to ~1e-3 in Gamma; variances below 1e-6 (of y in [0, 1]) count as 0.
    var_y = jnp.clip(squares / n, 0.0, 1.0) - mean**2
    var = v_max**2 * jnp.where(var_y > 1e-6, var_y, 0.0)
    # DP-APVI Alg. 1 line 5: the variance term over n~ - E_rho, the privacy term over
    # n~.
    gamma = cfg.c1 * jnp.sqrt(var * iota / n_lo) + cfg.c2 * v_max * e_rho * iota / n
    gamma = jnp.where(covered, cfg.bonus_scale * gamma, cfg.c * horizon)
    return jnp.clip(v_max * mean - gamma, 0.0, v_max)


def pool_plan(
    key: jax.Array,
    data: InventoryData,
    geom: Geometry,
    actions: jax.Array,
    mechanism: GaussianMechanism | None,
    cfg: PoolConfig = PoolConfig(),
) -> PoolResult:
    """POOL (Algorithm 1): private statistics, then pessimistic backward induction.

    Jitted: the mechanism's noise std and E_rho are bound here as traced arguments,
    so mechanisms that differ only in rho (or sigma) share one compiled executable;
    only ``mechanism=None`` (no noise drawn at all) compiles apart.

    Args:
      key: secret noise key; release 0 is the counts, release 1 + h stage h's sums.
      data: offline episodes [N, H, ...] (the privacy unit is one row).
      geom: zones and bases (public).
      actions: [K_a, d] public candidate actions for max_a Q_bar (Alg. 1 line 16).
      mechanism: ``pool_mechanism(rho, H)``, or None for the non-private
        reference (exact counts, E_rho = 0). Its ``event()`` goes in the ledger.
      cfg: constants.

    Returns:
      :class:`PoolResult`.

    Raises:
      ValueError: the mechanism's sensitivity is not sqrt(3 H).
    """
    if mechanism is not None and not math.isclose(
        mechanism.l2_sensitivity, statistics_sensitivity(geom.horizon)
    ):
        raise ValueError(
            f"the mechanism's sensitivity {mechanism.l2_sensitivity} is not POOL's "
            f"sqrt(3 H) = {statistics_sensitivity(geom.horizon)}; use pool_mechanism."
        )
    e_rho = noise_bound(mechanism, geom.horizon, geom.num_cells, cfg.failure_prob)
    # Host-side float64 arithmetic, as when these were compile-time constants: the
    # traced float32 values are then the very constants the static version used.
    noise = _PoolNoise(
        noise_std=mechanism.noise_std if mechanism is not None else 0.0,
        e_rho=e_rho,
        e_rho_per_weight=e_rho / cell_weight(geom),
    )
    return _pool_plan_jit(key, data, geom, actions, noise, mechanism is not None, cfg)


class _PoolNoise(NamedTuple):
    noise_std: float
    e_rho: float
    e_rho_per_weight: float


def _traced_release(
    key: jax.Array, noise_std: jax.Array
) -> Callable[[int, jax.Array], jax.Array]:
    # The mechanism's release with its noise std traced (one compile per sweep): a
    # unit-sensitivity mechanism of sigma = that std adds noise of exactly that std.
    # Release i uses fold_in(key, i).
    mechanism = GaussianMechanism(l2_sensitivity=1.0, noise_multiplier=noise_std)
    return lambda i, x: mechanism.release(jax.random.fold_in(key, i), x)


@partial(jax.jit, static_argnames=("private", "cfg"))
def _pool_plan_jit(
    key: jax.Array,
    data: InventoryData,
    geom: Geometry,
    actions: jax.Array,
    noise: _PoolNoise,
    private: bool,
    cfg: PoolConfig,
) -> PoolResult:
    horizon, k = geom.horizon, geom.num_cells
    release = _traced_release(key, noise.noise_std) if private else (lambda i, x: x)
    e_rho = noise.e_rho
    iota = bonus_iota(horizon, k, cfg.failure_prob)
    cells = data_cells(geom, data)
    wt = cell_weight(geom)
    ones = jnp.ones(cells.shape[0])
    counts = release(
        0, jax.vmap(lambda c: _cell_sums(c, ones, k, wt), 1)(cells)
    )  # [H, K]

    def body(q_next, h):
        y = _targets(geom, h, q_next, data, actions)
        sums = release(
            1 + h,
            jnp.stack(
                [
                    _cell_sums(cells[:, h], y, k, wt),
                    _cell_sums(cells[:, h], y * y, k, wt),
                ]
            ),
        )
        v_max = (horizon - h).astype(jnp.float32)
        # Post-processing of the weighted release: divide by the public weight (a noise
        # of E_rho on a weighted count is E_rho / weight on the count itself).
        q = (
            pessimistic_q(
                counts[h] / wt,
                sums[0] / wt,
                sums[1] / wt,
                v_max,
                noise.e_rho_per_weight,
                iota,
                horizon,
                cfg,
            )
            if wt != 1.0
            else (
                pessimistic_q(
                    counts[h], sums[0], sums[1], v_max, e_rho, iota, horizon, cfg
                )
            )
        )
        if isinstance(geom, AdditiveGeometry):
            q = centre_tables(geom, q, counts[h], sums[0], v_max)
        return q, (q, sums)

    q0 = jnp.zeros((k,), jnp.float32)
    _, (q_tables, sums) = jax.lax.scan(body, q0, jnp.arange(horizon), reverse=True)
    return PoolResult(q_tables, counts, sums[:, 0], sums[:, 1], jnp.float32(e_rho))


def greedy_policy(
    geom: Geometry, q_tables: jax.Array, actions: jax.Array
) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """The greedy policy pi_h(s) = argmax_k Q_bar_h(s, a_k) (Alg. 1, line 16).

    Ties (e.g. several candidates clipped to the same value) go to the first
    candidate, the smallest order on the row-major action grid. Separable additive
    zones take the exact max over their product grid of ``levels`` (``actions``
    unused): one max per product.

    Args:
      geom: the planner's geometry (zones, grid or additive).
      q_tables: [H, K] Q tables (``PoolResult.q_tables``).
      actions: [K_a, d] candidate actions.

    Returns:
      A `StagePolicy` ``policy(key, h, s) -> a`` [d] (the key is unused).
    """

    def policy(key, h, s):
        del key
        if isinstance(geom, AdditiveGeometry) and geom.separable:
            return additive_greedy(geom, h, q_tables[h], s)[1]
        qs = jax.vmap(
            lambda a: geometry_value(geom, h, q_tables[h], jnp.concatenate([s, a]))
        )(actions)
        return actions[jnp.argmax(jnp.clip(qs, 0.0, geom.horizon - h))]

    return policy
