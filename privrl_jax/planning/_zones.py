"""POOL's partial discretisation and piecewise-linear Q (pool.txt, Section 3.2).

Zones. A state-action pair b = (s, a) in R^n, n = w + d, lies in zone m in [M]
iff n (m - 1) / M <= ||b||_2 < n m / M (Sec. 3.2, "Discretization strategy"),
restricted to the observable region b < lambda_h. Zone indices here are 0-based
(index m - 1); ||b||_2 >= n is put in the last zone. The paper's radius n exceeds
max ||b||_2 = sqrt(n) for n >= 2, so zones past M sqrt(n) / n stay empty; pass
``radius=sqrt(n)`` to spread the M shells over [0, sqrt(n)] instead.

Bases. Per zone, n linearly independent points b^1_m..b^n_m inside the zone and
the observable box, chosen iteratively (Sec. 3.2, "Multi-dimensional piecewise-
linear approximation": a random first point, then points independent of the ones
chosen), then orthogonalised by Gram-Schmidt: B = Q R with rows q_j orthonormal.
The projection coefficients of b, b = sum_j m_j b^j_m, are m = R^-1 Q b -- no
general linear solve per query, the point of orthogonalising (Sec. 3.2). The
selection is greedy on the Gram-Schmidt residual (the candidate least explained
by the points already chosen), which keeps R well conditioned; the paper only asks
for independence. All of this is public geometry (no data), built once on the
host with NumPy from a public seed.

Interpolation. The paper's form is linear: Q_bar_h(b) = sum_j m_j Q_h(b^j_m)
for b < lambda_h (line 13), beyond the boundary the constant Q_bar_h(lambda_h)
(line 15). That is affine interpolation through an implicit anchor at the origin
with Q = 0: it cannot represent a constant Q, and its coefficients are unbounded
in a thin shell, so it extrapolated to values far above H - h that the greedy
max then picked (the non-private policy scored below the behaviour policy). The
default here (``affine=True``) takes n + 1 points per zone, an anchor b^0 and n
points with b^j - b^0 independent (Gram-Schmidt on the differences), and
Q_bar(b) = Q(b^0) + sum_j m_j (Q(b^j) - Q(b^0)): exact for affine functions. The
points form a spread simplex (each next one the candidate farthest from the
affine span so far). ``limiter=True`` clips Q_bar to the [min, max] of its
zone's basis values, the usual limiter against overshoot of piecewise-linear
reconstruction. ``affine=False, limiter=False`` is the paper's scheme.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@struct.dataclass
class ZoneGeometry:
    """Zones and bases for every stage (a pytree; leading axis H).

    Attributes:
      points: [H, M, P, n] basis points, row j = b^j_m (in zone m, < lambda_h);
        P = n (the paper's linear scheme) or n + 1 (affine: row 0 is the anchor).
      ortho: [H, M, n, n] Gram-Schmidt rows q_j (orthonormal) of the spanning
        vectors: b^j (linear) or b^j - b^0, j >= 1 (affine).
      coef: [H, M, n, n] C = R^-1 Q, so the coefficients are m = C @ (b - origin).
      origin: [H, M, n] 0 (linear) or the anchor b^0 (affine).
      boundary: [H, n] lambda_h.
      valid: [H, M] bool: the zone meets the observable box (has P points in it).
      width: zone width in ||b||_2 (radius / M).
      num_zones: M (static).
      affine: whether the interpolation is affine (static).
    """

    points: jax.Array
    ortho: jax.Array
    coef: jax.Array
    origin: jax.Array
    boundary: jax.Array
    valid: jax.Array
    width: float = struct.field(pytree_node=False)
    num_zones: int = struct.field(pytree_node=False)
    affine: bool = struct.field(pytree_node=False, default=False)
    limiter: bool = struct.field(pytree_node=False, default=False)

    @property
    def dim(self) -> int:
        return self.points.shape[-1]

    @property
    def points_per_zone(self) -> int:
        """P: n basis points (linear) or n + 1 (affine)."""
        return self.points.shape[-2]

    @property
    def horizon(self) -> int:
        return self.points.shape[0]

    @property
    def num_cells(self) -> int:
        """K = M P: one statistics cell per basis point."""
        return self.num_zones * self.points_per_zone


def gram_schmidt(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Classical Gram-Schmidt with re-orthogonalisation.

    Args:
      points: [n, n] rows b_j, linearly independent.

    Returns:
      (q [n, n] orthonormal rows, r [n, n] upper triangular) with
      points = r.T @ q, i.e. b_j = sum_{i <= j} r[i, j] q_i.
    """
    n = points.shape[0]
    q = np.zeros_like(points, dtype=np.float64)
    r = np.zeros((n, n), np.float64)
    for j in range(n):
        v = points[j].astype(np.float64)
        for _ in range(2):  # twice is enough (Giraud et al. 2005)
            c = q[:j] @ v
            v = v - c @ q[:j]
            r[:j, j] += c
        r[j, j] = np.linalg.norm(v)
        q[j] = v / r[j, j]
    return q, r


def _candidates(rng, lo, hi, box, n, count):
    # Two samplers, because a shell cut by the box can be a thin sliver: uniform
    # in the box then rescaled to a radius in [lo, hi), and random positive
    # directions at such a radius; keep what lies in both the shell and the box.
    u = rng.uniform(0.0, 1.0, (count, n)) * box
    d = np.abs(rng.normal(size=(count, n)))
    dirs = np.concatenate([u, d]) / np.maximum(
        np.linalg.norm(np.concatenate([u, d]), axis=1, keepdims=True), 1e-12
    )
    hi_eff = min(hi, float(np.linalg.norm(box)))
    if hi_eff <= lo:
        return np.zeros((0, n))
    radii = rng.uniform(lo, hi_eff, (2 * count, 1))
    pts = dirs * radii
    norms = np.linalg.norm(pts, axis=1)
    ok = np.all(pts < box, axis=1) & (norms >= lo) & (norms < hi)
    return pts[ok]


def _select_basis(cands: np.ndarray, n: int, rng, affine: bool) -> np.ndarray | None:
    """P points of ``cands``: a random first one, then greedy on independence.

    Linear: n points whose vectors b^j are independent. Affine: the first point is
    the anchor b^0 and the next n make b^j - b^0 independent. Each next point is
    the candidate least explained by the span so far: relative residual (linear,
    keeps R well conditioned) or absolute residual (affine: the farthest from the
    affine span, a spread simplex). The paper asks only for independence.
    """
    total = n + int(affine)
    if cands.shape[0] < total:
        return None
    chosen = [cands[rng.integers(cands.shape[0])]]
    origin = chosen[0] if affine else np.zeros(n)
    vecs = cands - origin
    resid = vecs.copy()
    spans: list[np.ndarray] = [] if affine else [chosen[0]]
    for e in _orthonormal(spans):
        resid = resid - np.outer(resid @ e, e)
    while len(chosen) < total:
        if affine:  # farthest from the affine span so far: a spread, max-volume simplex
            scores = np.linalg.norm(resid, axis=1) / max(
                np.linalg.norm(resid, axis=1).max(), 1e-12
            )
        else:
            norms = np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
            scores = np.linalg.norm(resid, axis=1) / norms
        best = int(np.argmax(scores))
        if scores[best] < 1e-3:  # the zone's points span fewer than n dims
            return None
        chosen.append(cands[best])
        e = resid[best] / np.linalg.norm(resid[best])
        resid = resid - np.outer(resid @ e, e)
    return np.stack(chosen)


def _orthonormal(vs):
    out = []
    for v in vs:
        for e in out:
            v = v - (v @ e) * e
        out.append(v / np.linalg.norm(v))
    return out


def make_zone_geometry(
    boundary: np.ndarray | jax.Array,
    num_zones: int,
    *,
    radius: float | None = None,
    affine: bool = True,
    limiter: bool = True,
    seed: int = 0,
    candidates: int = 2048,
) -> ZoneGeometry:
    """Zones and Gram-Schmidt bases for every stage (host-side, public).

    Args:
      boundary: [H, n] observable boundaries lambda_h (or [n] for all stages).
      num_zones: The number of zones M.
      radius: outer radius of the zones; default the paper's n = w + d.
      affine: n + 1 points per zone and affine interpolation (default, see the
        module docstring); False: the paper's n points and linear combination.
      limiter: clip Q_bar to the [min, max] of its zone's basis values (the
        usual limiter against overshoot of piecewise-linear reconstruction).
      seed: public seed of the basis-point choice.
      candidates: random candidates per zone and sampler.

    Returns:
      The :class:`ZoneGeometry`. A zone that does not meet the box [0, min(
      lambda_h, 1)) gets scaled unit vectors as its basis (never used for data)
      and ``valid = False``.

    Raises:
      ValueError: `num_zones` below 1.
    """
    lam = np.asarray(boundary, np.float64)
    if lam.ndim == 1:
        lam = lam[None]
    if num_zones < 1:
        raise ValueError(f"num_zones must be >= 1; got {num_zones}")
    horizon, n = lam.shape
    radius = float(n if radius is None else radius)
    width = radius / num_zones
    total = n + int(affine)
    rng = np.random.default_rng(seed)
    points = np.zeros((horizon, num_zones, total, n))
    ortho = np.zeros((horizon, num_zones, n, n))
    coef = np.zeros_like(ortho)
    origin = np.zeros((horizon, num_zones, n))
    valid = np.zeros((horizon, num_zones), bool)
    cache: dict[bytes, list] = {}
    for h in range(horizon):
        key = lam[h].tobytes()
        if key not in cache:  # stages with the same boundary share bases
            box = np.minimum(lam[h], 1.0)
            per = []
            for m in range(num_zones):
                lo, hi = m * width, (m + 1) * width
                cands = _candidates(rng, lo, hi, box, n, candidates)
                sel = _select_basis(cands, n, rng, affine)
                ok = sel is not None
                if not ok:
                    unit = np.eye(n) * max(lo + 0.5 * width, 1e-3)
                    sel = np.concatenate([np.zeros((1, n)), unit]) if affine else unit
                o = sel[0] if affine else np.zeros(n)
                q, r = gram_schmidt(sel[1:] - o if affine else sel)
                # b - o = sum_j m_j v_j = (r^T q)^T m = q^T r m  =>  m = r^-1 q (b - o).
                c = np.linalg.solve(r, q)
                per.append((sel, q, c, o, ok))
            cache[key] = per
        for m, (sel, q, c, o, ok) in enumerate(cache[key]):
            points[h, m], ortho[h, m], coef[h, m], origin[h, m], valid[h, m] = (
                sel,
                q,
                c,
                o,
                ok,
            )
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    return ZoneGeometry(
        points=f32(points),
        ortho=f32(ortho),
        coef=f32(coef),
        origin=f32(origin),
        boundary=f32(lam),
        valid=jnp.asarray(valid),
        width=float(width),
        num_zones=int(num_zones),
        affine=bool(affine),
        limiter=bool(limiter),
    )


def zone_index(b: jax.Array, width: float, num_zones: int) -> jax.Array:
    """0-based zone of b [..., n]: floor(||b||_2 / width), capped at M - 1.

    ``width = radius / M``, so index m - 1 <=> (m-1) width <= ||b|| < m width.
    """
    norm = jnp.linalg.norm(b, axis=-1)
    return jnp.minimum(jnp.floor(norm / width), num_zones - 1).astype(jnp.int32)


def _stage(geom: ZoneGeometry, h: jax.Array) -> ZoneGeometry:
    return jax.tree.map(lambda x: x[h], geom)


def project(
    geom: ZoneGeometry, h: jax.Array, b: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Zone and projection coefficients of one pair b [n] at stage h.

    Returns:
      (zone: int32 scalar, m: [n]) with b = origin + sum_j m_j v_j, where v_j =
      b^j (linear) or b^j - b^0 (affine).
    """
    g = _stage(geom, h)
    z = zone_index(b, geom.width, geom.num_zones)
    return z, g.coef[z] @ (b - g.origin[z])


def cell_index(geom: ZoneGeometry, h: jax.Array, b: jax.Array) -> jax.Array:
    """Statistics cell of b [n]: zone * P + its nearest basis point in the zone.

    The paper keeps counts per zone (Sec. 3.2) but interpolates Q between basis
    points; Algorithm 1 line 7 needs Q at every basis point, so each transition
    is counted at the basis point of its zone nearest to it (a Voronoi split of
    the zone). One transition still lands in exactly one cell.
    """
    g = _stage(geom, h)
    z = zone_index(b, geom.width, geom.num_zones)
    j = jnp.argmin(jnp.sum((g.points[z] - b) ** 2, axis=-1))
    return z * geom.points_per_zone + j


def _combine(geom: ZoneGeometry, q_zone: jax.Array, m: jax.Array) -> jax.Array:
    # Linear: sum_j m_j Q(b^j). Affine: Q(b^0) + sum_j m_j (Q(b^j) - Q(b^0)).
    if geom.affine:
        v = q_zone[0] + m @ (q_zone[1:] - q_zone[0])
    else:
        v = m @ q_zone
    if geom.limiter:
        v = jnp.clip(v, jnp.min(q_zone), jnp.max(q_zone))
    return v


def interpolate(
    geom: ZoneGeometry, h: jax.Array, q_table: jax.Array, b: jax.Array
) -> jax.Array:
    """Q_bar_h(b) for one b [n] from Q at the basis points (q_table [M, P]).

    b < lambda_h: the zone's combination (Algorithm 1, line 13); otherwise the
    constant Q_bar_h(lambda_h) (line 15), lambda_h capped at 1 per coordinate (a
    boundary entry above 1 is full feedback; pairs never exceed 1). Not clipped
    here (callers clip).
    """
    g = _stage(geom, h)

    def inside(x):
        z = zone_index(x, geom.width, geom.num_zones)
        return _combine(geom, q_table[z], g.coef[z] @ (x - g.origin[z]))

    obs = jnp.all(b < g.boundary)
    return jnp.where(obs, inside(b), inside(jnp.minimum(g.boundary, 1.0)))


def zone_value(
    geom: ZoneGeometry, h: jax.Array, q_flat: jax.Array, b: jax.Array
) -> jax.Array:
    """:func:`interpolate` from the flat table [K] = [M P] of the planner."""
    return interpolate(geom, h, q_flat.reshape(geom.num_zones, geom.points_per_zone), b)


def radius_for_full_range(dim: int) -> float:
    """sqrt(n): the largest ||b||_2 on [0, 1]^n (the non-paper radius option)."""
    return math.sqrt(dim)
