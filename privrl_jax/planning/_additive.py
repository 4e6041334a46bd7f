"""Additive zones: POOL's l2 zones on each product's own plane, summed.

Our construction, beyond pool.txt.

Why. The paper's zones (Sec. 3.2) are l2 shells of the whole (w + d)-dimensional
pair b = (s, a). The lost-sales MDP is separable across products (per-product
costs and dynamics, ``envs/_inventory.py``), so its Q is a sum
Q_h(b) = sum_i Q_h,i(s_i, a_i), and a shell of R^(w+d) mixes the products: with
exact Q at every basis point the shells' greedy gap is 0.44 at w + d = 4 and 0.75
at 6 (``benchmarks/results/pool_zones_exact.md``). A sum of functions of
low-dimensional groups of coordinates is the classical additive model (Stone 1985,
"Additive regression and other nonparametric models", Ann. Statist.; Hastie &
Tibshirani's generalised additive models): its estimation error grows with the
dimension of one group, not of the whole space.

Construction. The coordinates are split into P public groups of equal size g
(default: product i's (s_i, a_i), i.e. groups (i, w + i), g = 2). Each group gets
the shipped zone geometry of its own g-dimensional plane (``make_zone_geometry``:
M shells, affine bases, limiter), and

    Q_bar_h(b) = sum_p Q_bar_h,p(b_p),

each Q_bar_h,p the zone interpolation of its part's table (Algorithm 1 line 13
on the plane; line 15's constant beyond the boundary, per plane). Cells: P M (g + 1),
linear in M and in the number of products, where a grid needs q^(w+d).

Privacy, unchanged. One pair lands in one cell of every part, and is counted there
with the public weight 1 / sqrt(P): per stage it moves P counts by 1 / sqrt(P)
(squared norm 1) and P sums and P squares by y / sqrt(P) with y in [0, 1] (squared
norm <= 1 each), so one episode still moves the released (n, S, S2) by at most
sqrt(3 H), with equality for an episode with feedback and y = 1 at every stage.
The same ``pool_mechanism`` and ledger event apply; everything below is
post-processing of the release.

Estimation from the release. Part p's cell mean of the targets is the marginal
mean m_p(c) = E[y | b_p in c]. For an additive Q and groups that are independent
under the data, m_p(c) = Q_p(c) + sum_{q != p} E[Q_q] and the stage's overall mean
is mu = sum_q E[Q_q], so sum_p m_p(b_p) - (P - 1) mu = sum_p Q_p(b_p) (the
first-order ANOVA / marginal-integration estimator, Linton & Nielsen 1995,
Biometrika). The planner therefore stores centred part tables
t_p = Q_p - (P - 1) / P mu, with Q_p the pessimistic cell value (counts and sums
divided by the public weight, E_rho multiplied by sqrt(P)) and mu the stage's
pooled mean of the released sums over the released counts. Dependence between
products under the behaviour policy biases this estimate (backfitting would
correct it with cross-tabulated counts, O(K^2) coordinates); the benchmark
measures what is left.

Greedy max. With one action coordinate per group and a product candidate set,
max_a sum_p Q_bar_p(s_p, a_p) = sum_p max_{a_p} Q_bar_p(s_p, a_p): P L evaluations
of a g-dimensional interpolant instead of L^d (or 256) evaluations of the
(w + d)-dimensional one, and the max is over the full product grid of ``levels``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from privrl_jax.planning._zones import (
    ZoneGeometry,
    cell_index,
    make_zone_geometry,
    zone_value,
)


@struct.dataclass
class AdditiveGeometry:
    """One zone geometry per group of coordinates (a pytree; parts stacked on axis 0).

    Attributes:
      parts: a :class:`ZoneGeometry` whose leaves have a leading axis P (one per
        group): points [P, H, M, g + 1, g], ...; its static fields (width, M,
        affine, limiter) are shared.
      levels: [L] public per-coordinate candidate orders of the separable max.
      groups: the P groups of coordinate indices into b (static), equal sizes g.
      action_of_group: for a separable max, the action dimension of each group's
        single action coordinate, else () (static).
      slot_of_group: that coordinate's position inside its group (static).
    """

    parts: ZoneGeometry
    levels: jax.Array
    groups: tuple[tuple[int, ...], ...] = struct.field(pytree_node=False)
    action_of_group: tuple[int, ...] = struct.field(pytree_node=False, default=())
    slot_of_group: tuple[int, ...] = struct.field(pytree_node=False, default=())

    @property
    def num_parts(self) -> int:
        """P."""
        return len(self.groups)

    @property
    def dim(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def horizon(self) -> int:
        return self.parts.points.shape[1]

    @property
    def num_zones(self) -> int:
        return self.parts.num_zones

    @property
    def cells_per_part(self) -> int:
        """M (g + 1) (affine) or M g (linear)."""
        return self.parts.num_zones * self.parts.points.shape[-2]

    @property
    def num_cells(self) -> int:
        """K = P M (g + 1): every part's cells, part-major."""
        return self.num_parts * self.cells_per_part

    @property
    def weight(self) -> float:
        """1 / sqrt(P): what one pair adds to each of its P cells.

        This keeps the statistics' sensitivity at Delta = sqrt(3H).
        """
        return 1.0 / math.sqrt(self.num_parts)

    @property
    def separable(self) -> bool:
        """Whether the greedy max splits into one max per group."""
        return bool(self.action_of_group)


def product_groups(state_dim: int, action_dim: int) -> tuple[tuple[int, ...], ...]:
    """Product i's (s_i, a_i): groups (i, w + i); needs d = w (the inventory MDP)."""
    if state_dim != action_dim:
        raise ValueError(
            "product_groups needs one order per product (d = w); got "
            f"w={state_dim}, d={action_dim}. Pass groups explicitly."
        )
    return tuple((i, state_dim + i) for i in range(state_dim))


def _separable_slots(groups, state_dim, action_dim):
    # One action coordinate per group, every action coordinate in exactly one group.
    acts, slots = [], []
    for g in groups:
        inside = [(k, c - state_dim) for k, c in enumerate(g) if c >= state_dim]
        if len(inside) != 1:
            return (), ()
        slots.append(inside[0][0])
        acts.append(inside[0][1])
    if sorted(acts) != list(range(action_dim)):
        return (), ()
    return tuple(acts), tuple(slots)


def make_additive_geometry(
    boundary: np.ndarray | jax.Array,
    num_zones: int,
    *,
    state_dim: int,
    groups: Sequence[Sequence[int]] | None = None,
    radius: float | None = None,
    affine: bool = True,
    limiter: bool = True,
    seed: int = 0,
    action_levels: int = 11,
) -> AdditiveGeometry:
    """Additive zones for boundaries [H, n] (or [n]), n = state_dim + action_dim.

    Args:
      boundary: observable boundaries lambda_h.
      num_zones: M shells per group.
      state_dim: w (the first w coordinates of b are the state).
      groups: a partition of range(n) into equal-size groups; default
        :func:`product_groups`.
      radius: outer radius of every group's shells; default the largest
        ||min(lambda_h, 1)||_2 over the groups' planes (the pipeline's choice).
      affine: as :func:`make_zone_geometry`: g + 1 points per zone and affine
        interpolation (True) or the paper's g points (False).
      limiter: as :func:`make_zone_geometry`: clip each part's value to the range
        of its zone's basis values.
      seed: public seed of the basis-point choice, the same for every group
        (groups with the same boundary share their bases).
      action_levels: L, the per-coordinate orders linspace(0, 1, L) of the
        separable greedy max.

    Returns:
      The :class:`AdditiveGeometry`. With one group it is the zone geometry of the
      whole space (weight 1, no centring): ``zones=paper``'s numbers.

    Raises:
      ValueError: `state_dim` not in [1, n - 1], `groups` not a partition of
        range(n) into equal-size groups (or, by default, d != w), `action_levels`
        below 2, or `num_zones` below 1.
    """
    lam = np.asarray(boundary, np.float64)
    if lam.ndim == 1:
        lam = lam[None]
    n = lam.shape[-1]
    action_dim = n - state_dim
    if not 0 < state_dim < n:
        raise ValueError(f"state_dim must be in [1, {n - 1}]; got {state_dim}")
    groups = (
        product_groups(state_dim, action_dim)
        if groups is None
        else tuple(tuple(int(c) for c in g) for g in groups)
    )
    flat = sorted(c for g in groups for c in g)
    if flat != list(range(n)) or len({len(g) for g in groups}) != 1:
        raise ValueError(
            f"groups must partition range({n}) into equal-size groups; got {groups}"
        )
    if action_levels < 2:
        raise ValueError(f"action_levels must be >= 2; got {action_levels}")
    if radius is None:
        radius = max(
            float(np.linalg.norm(np.minimum(lam[0, list(g)], 1.0))) for g in groups
        )
    parts = [
        make_zone_geometry(
            lam[:, list(g)],
            num_zones,
            radius=radius,
            affine=affine,
            limiter=limiter,
            seed=seed,
        )
        for g in groups
    ]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *parts)
    acts, slots = _separable_slots(groups, state_dim, action_dim)
    return AdditiveGeometry(
        parts=stacked,
        levels=jnp.linspace(0.0, 1.0, action_levels),
        groups=groups,
        action_of_group=acts,
        slot_of_group=slots,
    )


def _split(geom: AdditiveGeometry, b: jax.Array) -> jax.Array:
    # [..., n] -> [P, ..., g]: each group's coordinates.
    idx = jnp.asarray(geom.groups)
    return jnp.moveaxis(b[..., idx], -2, 0)


def additive_cells(geom: AdditiveGeometry, h: jax.Array, b: jax.Array) -> jax.Array:
    """[P] flat statistics cells of one pair b [n]: one per part, part-major."""
    offsets = jnp.arange(geom.num_parts) * geom.cells_per_part
    return (
        jax.vmap(lambda g, x: cell_index(g, h, x))(geom.parts, _split(geom, b))
        + offsets
    )


def additive_parts_value(
    geom: AdditiveGeometry, h: jax.Array, q_flat: jax.Array, b: jax.Array
) -> jax.Array:
    """[P] Q_bar_h,p(b_p) of one pair b [n] from the flat table [K] (unclipped)."""
    tables = q_flat.reshape(geom.num_parts, geom.cells_per_part)
    return jax.vmap(lambda g, t, x: zone_value(g, h, t, x))(
        geom.parts, tables, _split(geom, b)
    )


def additive_value(
    geom: AdditiveGeometry, h: jax.Array, q_flat: jax.Array, b: jax.Array
) -> jax.Array:
    """Q_bar_h(b) = sum_p Q_bar_h,p(b_p) for one pair b [n] (unclipped)."""
    return jnp.sum(additive_parts_value(geom, h, q_flat, b))


def additive_greedy(
    geom: AdditiveGeometry, h: jax.Array, q_flat: jax.Array, s: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(max_a Q_bar_h(s, a), argmax a [d]) over the product grid ``levels ** d``.

    Separable: sum over groups of the max over that group's order level. Ties go to
    the smallest level (the first), as ``greedy_policy``'s row-major argmax does.
    """
    if not geom.separable:
        raise ValueError("additive_greedy needs one action coordinate per group")
    tables = q_flat.reshape(geom.num_parts, geom.cells_per_part)
    levels = geom.levels
    w = s.shape[-1]
    vals = []  # P small static loop: groups have different state coordinates
    for p, g in enumerate(geom.groups):
        slot = geom.slot_of_group[p]
        base = jnp.stack([s[c] if c < w else jnp.zeros(()) for c in g])
        pairs = (
            jnp.broadcast_to(base, (levels.shape[0], len(g))).at[:, slot].set(levels)
        )
        part = jax.tree.map(lambda x, p=p: x[p], geom.parts)
        one = lambda x, part=part, t=tables[p]: zone_value(part, h, t, x)  # noqa: E731
        vals.append(jax.vmap(one)(pairs))
    vals = jnp.stack(vals)  # [P, L]
    best = jnp.argmax(vals, axis=1)
    value = jnp.sum(jnp.max(vals, axis=1))
    order = jnp.zeros((len(geom.action_of_group),), levels.dtype)
    order = order.at[jnp.asarray(geom.action_of_group)].set(levels[best])
    return value, order


def centre_tables(
    geom: AdditiveGeometry,
    q: jax.Array,
    counts: jax.Array,
    sums: jax.Array,
    v_max: jax.Array,
) -> jax.Array:
    """Part tables t_p = Q_p - (P - 1) / P mu of one stage (module docstring).

    Args:
      geom: the additive geometry (P parts).
      q: [K] pessimistic cell values Q_p in [0, v_max].
      counts: [K] the released (weighted) n of the stage.
      sums: [K] the released (weighted) S of the stage.
      v_max: H - h.

    Returns:
      [K] centred tables; mu = v_max clip(sum S / sum n, 0, 1) over all K cells
      (every part's cells hold the same pairs, so the ratio is the stage's mean
      target; its noise is that of K cells against P times the pairs' weight).
    """
    if geom.num_parts == 1:
        return q
    total = jnp.sum(counts)
    mu = v_max * jnp.clip(jnp.sum(sums) / jnp.where(total > 0, total, 1.0), 0.0, 1.0)
    mu = jnp.where(total > 0, mu, 0.0)
    return q - (geom.num_parts - 1) / geom.num_parts * mu


def anchored_tables(
    geom: AdditiveGeometry,
    q_fn: Callable[[int, jax.Array], jax.Array],
    anchor: jax.Array | None = None,
) -> jax.Array:
    """[H, K] part tables from a Q oracle by the anchored decomposition.

    t_p(x) = Q(anchor with group p set to x) - (P - 1) / P Q(anchor) at every basis
    point x of part p, so sum_p t_p(b_p) = Q(b) for any additive Q (the anchored /
    cut-HDMR decomposition, Rabitz & Alis 1999, J. Math. Chem.). With exact Q it
    is POOL with perfect statistics, the ``zones=additive`` rows of
    ``benchmarks/results/pool_zones_additive_exact.md``.

    Args:
      geom: the additive geometry whose basis points are evaluated.
      q_fn: (h, b [..., n]) -> Q_h(b) [...] (host-side Python loop over h).
      anchor: [n] reference pair (default 0, inside every observable box).
    """
    n, p_count = geom.dim, geom.num_parts
    anchor = jnp.zeros((n,)) if anchor is None else jnp.asarray(anchor)
    out = []
    for h in range(geom.horizon):
        base = q_fn(h, anchor)
        rows = []
        for p, g in enumerate(geom.groups):
            pts = geom.parts.points[p, h].reshape(-1, len(g))  # [M (g+1), g]
            b = (
                jnp.broadcast_to(anchor, (pts.shape[0], n))
                .at[:, jnp.asarray(g)]
                .set(pts)
            )
            rows.append(q_fn(h, b) - (p_count - 1) / p_count * base)
        out.append(jnp.concatenate(rows))
    return jnp.stack(out)
