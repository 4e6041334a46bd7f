"""DP-LSW and DP-LSL: output-perturbed Monte-Carlo policy evaluation.

Balle, Gomrokchi & Precup (2016).

The baselines of the GPOPE paper (Section 7, "output perturbation V1 / V2"). On-policy:
a finite state space of S states, features Phi [S, d] (row phi_s), a public state
weighting rho [S] (a distribution; Balle et al. use the start distribution), m
trajectories of the policy being evaluated. The privacy unit is a trajectory.

First-visit Monte Carlo. For trajectory i and state s, F_{i,s} is the discounted return
from the first visit of s in trajectory i (undefined when i never visits s). The
sufficient statistics are the visit counts n_s = #{i : i visits s} and the return sums
G_s = sum_i F_{i,s}; F^_s = G_s / n_s (0 when n_s = 0, as in the authors' code). Returns
lie in a public interval [lo, hi] that contains 0 (Balle et al.: rewards in [0, R_max],
so [0, R_max / (1 - gamma)]); W = hi - lo and B = max(|lo|, |hi|).

Estimators (non-private):

- LSW (weighted least squares on the averaged returns):
  theta_w = argmin_theta sum_s rho_s (F^_s - phi_s^T theta)^2 + lambda_w ||theta||^2
          = (Phi^T Gamma Phi + lambda_w I)^-1 Phi^T Gamma F^,  Gamma = diag(rho).
  The paper's LSW has lambda_w = 0 (then Gamma^1/2 Phi must have full column rank).
- LSL (ridge-regularised least squares on every first-visit return):
  J(theta) = 1/m sum_i sum_{s visited by i} rho_s (F_{i,s} - phi_s^T theta)^2
             + lambda/(2m) ||theta||^2,
  theta_l = (Phi^T diag(rho n) Phi + lambda/2 I)^-1 Phi^T (rho * G)
  (independent of m).

Privacy: smooth sensitivity (Nissim, Raskhodnikova & Smith 2007, "NRS07"). With S(X) a
beta-smooth upper bound on the local L2 sensitivity of theta at the data X (S(X) >=
LS(X) and S(X) <= e^beta S(X') for neighbours), the release ``theta + S(X) / a * Z``, Z
~ N(0, I_d), is (eps, delta)-DP for a = eps / (5 sqrt(2 ln(2/delta))) and beta = eps /
(4 (d + ln(2/delta))): the constants of the authors' released code for both algorithms
(their alpha = 5 sqrt(2 ln(2/delta)) / eps is our 1/a), which they attribute to NRS07's
Gaussian admissibility lemma. We found no copy of NRS07's statement here, so the
constants are checked directly instead: ``_smooth_gaussian.smooth_gaussian_delta``
computes the mechanism's exact privacy curve (the worst pair of Gaussians any
beta-smooth S allows, in closed form) and the tests confirm delta(eps) <= delta for
these constants at eps = 0.1 ... 10 and d = 1 ... 20 (by 3 orders of magnitude and more:
they are 3-7x more noise than needed). ``calibration="exact"`` keeps beta and takes the
largest alpha that curve allows.
Neighbours are data sets of the same size m that differ in one whole trajectory
(replace-one, the paper's relation); the bounds below also hold for add/remove-one
except LSL's cap n_s + k <= m.

The guarantee is the closed-form (eps, delta) of NRS07's theorem for one release; it is
not a Gaussian mechanism of fixed sensitivity, so it has no dp-accounting event and must
not be composed by an accountant as if it were one. The noise std S(X)/a is itself a
function of the private data: a diagnostic, never to be published.

What we could and could not check. The paper's text was not available to us (only its
abstract and the authors' public code, read, not copied). The estimators, the NRS07
constants and the *shape* of the smooth bounds (LSW: a sum over states of rho_s /
max(n_s - k, 1)^2; LSL: a term in ||rho||_2 plus a term in sqrt(sum_s rho_s min(n_s + k,
m)) from bounding ||theta||) follow that code. The constants inside the
local-sensitivity bounds are our own derivations (written out in
:func:`lsw_local_sensitivity` and :func:`lsl_local_sensitivity` and in docs/gpope.md),
checked by tests that move one trajectory and compare; where they differ from the code's
constants we say so there. The Gaussian constants themselves are checked numerically
(above), at every eps the experiments use.

Everything here is pure JAX (jit/vmap over trials).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from privrl_jax import privacy
from privrl_jax.ope._smooth_gaussian import calibrate_smooth_alpha


class FirstVisits(NamedTuple):
    """First-visit returns of m trajectories.

    Attributes:
      visited: [m, S] bool, trajectory i visits state s.
      returns: [m, S] F_{i,s}, the discounted return from the first visit (0 where not
        visited).
    """

    visited: jax.Array
    returns: jax.Array


class MonteCarloStats(NamedTuple):
    """Sufficient statistics of first-visit MC: counts n [S] and return sums G [S]."""

    counts: jax.Array
    sums: jax.Array


class SmoothParams(NamedTuple):
    """Gaussian smooth-sensitivity constants alpha and beta.

    The release adds S(X) / alpha * N(0, I), with S a beta-smooth bound.
    """

    alpha: float
    beta: float


class BalleRelease(NamedTuple):
    """One DP-LSW / DP-LSL release.

    Attributes:
      theta: [d] the released weights (V = Phi theta).
      noise_std: [] S(X) / alpha. Data dependent: a diagnostic, never to be published.
      smooth_sensitivity: [] S(X). Data dependent: never to be published.
      epsilon, delta: the closed-form NRS07 guarantee of this one release (replace-one).
    """

    theta: jax.Array
    noise_std: jax.Array
    smooth_sensitivity: jax.Array
    epsilon: float
    delta: float


def trajectory_first_visits(
    states: jax.Array,
    rewards: jax.Array,
    mask: jax.Array,
    gamma: float,
    num_states: int,
) -> tuple[jax.Array, jax.Array]:
    """One trajectory's first visits; unbatched (vmap it).

    Args:
      states: [T] int state acted in at each step.
      rewards: [T] rewards.
      mask: [T] bool, True on real steps (False on padding).
      gamma: discount.
      num_states: S, the number of states.

    Returns:
      ``(visited [S] bool, returns [S])``: returns[s] = sum_{k >= t_s} gamma^(k - t_s)
      r_k over the real steps, t_s the first real step in s (a time-limit cut truncates
      the return).
    """
    rewards = jnp.where(mask, rewards, 0.0)

    def back(g, r):
        g = r + gamma * g
        return g, g

    _, to_go = jax.lax.scan(back, jnp.zeros((), rewards.dtype), rewards, reverse=True)
    hits = (states[:, None] == jnp.arange(num_states)[None, :]) & mask[
        :, None
    ]  # [T, S]
    visited = jnp.any(hits, axis=0)
    first = jnp.argmax(hits, axis=0)  # the first True (0 when none: masked below)
    return visited, jnp.where(visited, to_go[first], 0.0)


def first_visits(
    states: jax.Array,
    rewards: jax.Array,
    mask: jax.Array,
    gamma: float,
    num_states: int,
) -> FirstVisits:
    """Every trajectory's first-visit returns: the data DP-LSW / DP-LSL release from.

    Args:
      states: [m, T] int state acted in at each step.
      rewards: [m, T] rewards.
      mask: [m, T] bool, True on real steps (False on padding).
      gamma: the discount.
      num_states: the number of states.

    Returns:
      ``FirstVisits``: ``visited`` [m, S] bool and ``returns`` [m, S], per trajectory
      as ``trajectory_first_visits`` gives them.
    """
    visited, returns = jax.vmap(trajectory_first_visits, in_axes=(0, 0, 0, None, None))(
        states, rewards, mask, gamma, num_states
    )
    return FirstVisits(visited, returns)


def monte_carlo_stats(visits: FirstVisits) -> MonteCarloStats:
    """n_s = number of trajectories visiting s, G_s = sum of their first-visit returns.

    Not a privacy boundary: the returns are summed as given. The DP releases
    (:func:`dp_lsw`, :func:`dp_lsl`) take the visits and clip them first.
    """
    v = visits.visited.astype(jnp.float32)
    return MonteCarloStats(jnp.sum(v, axis=0), jnp.sum(v * visits.returns, axis=0))


def clip_first_visits(
    visits: FirstVisits, return_bounds: tuple[float, float]
) -> FirstVisits:
    """Force each first-visit return into the public [lo, hi].

    The NRS07 bounds below hold only if every F_{i,s} lies in [lo, hi]; user data need
    not. So the bound is enforced where the data enter the mechanism: finite returns are
    clipped, +inf maps to hi and -inf to lo (what clipping gives), and NaN maps to 0,
    the value an unvisited state already contributes (0 is in [lo, hi] by
    :func:`_check_bounds`). A NaN reward thus costs its trajectory's estimate, never the
    guarantee. Unvisited entries stay 0.
    """
    lo, hi = _check_bounds(return_bounds)
    r = jnp.clip(visits.returns, lo, hi)
    r = jnp.where(jnp.isnan(r) | ~visits.visited, 0.0, r)
    return FirstVisits(visits.visited, r)


def _private_stats(visits: FirstVisits, return_bounds, num_trajectories: int | None):
    m = visits.visited.shape[0]
    if num_trajectories is not None and num_trajectories != m:
        raise ValueError(
            f"num_trajectories={num_trajectories} but the visits hold {m} "
            "trajectories; pass "
            f"the visits of all m trajectories (or omit num_trajectories)."
        )
    return monte_carlo_stats(clip_first_visits(visits, return_bounds)), m


NOISE_CALIBRATIONS = ("nrs07", "exact")


def smooth_params(
    epsilon: float, delta: float, dim: int, calibration: str = "nrs07"
) -> SmoothParams:
    """The smooth-sensitivity constants for one (eps, delta) release in d dimensions.

    beta = eps / (4 (d + ln(2/delta))); alpha by ``calibration``:

    - ``"nrs07"``: alpha = eps / (5 sqrt(2 ln(2/delta))), the closed-form constants of
      NRS07's Gaussian as the authors' code uses them (docs/gpope.md, section 3: checked
      numerically by :func:`privrl_jax.ope.smooth_gaussian_delta`; they hold at every
      eps we run and are 3-7x conservative).
    - ``"exact"``: the same beta and the largest alpha whose numerically computed
      privacy curve (:func:`calibrate_smooth_alpha`) stays within delta: less noise for
      the same guarantee.
    """
    if not 0 < epsilon < math.inf:
        raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")
    if dim < 1:
        raise ValueError(f"dim must be >= 1; got {dim!r}.")
    if calibration not in NOISE_CALIBRATIONS:
        raise ValueError(
            f"calibration must be one of {NOISE_CALIBRATIONS}; got {calibration!r}."
        )
    log_term = math.log(2.0 / delta)
    beta = epsilon / (4.0 * (dim + log_term))
    if calibration == "exact":
        return SmoothParams(
            _exact_alpha(float(epsilon), float(delta), beta, int(dim)), beta
        )
    return SmoothParams(epsilon / (5.0 * math.sqrt(2.0 * log_term)), beta)


@functools.lru_cache(maxsize=256)
def _exact_alpha(epsilon: float, delta: float, beta: float, dim: int) -> float:
    # A few seconds of host-side SciPy per (eps, delta, d): cached, as vmapped trials
    # reuse it.
    return calibrate_smooth_alpha(epsilon, delta, beta, dim)


def _check_bounds(return_bounds: tuple[float, float]) -> tuple[float, float]:
    lo, hi = (float(x) for x in return_bounds)
    if not lo <= 0.0 <= hi or lo == hi:
        raise ValueError(
            "return_bounds must be an interval [lo, hi] with lo <= 0 <= hi (an "
            "unvisited state's "
            f"estimate is 0); got {return_bounds!r}."
        )
    return lo, hi


def lsw_solution(
    stats: MonteCarloStats, features: jax.Array, rho: jax.Array, ridge: float = 0.0
) -> jax.Array:
    """The LSW weights (non-private).

    theta_w = (Phi^T Gamma Phi + ridge I)^-1 Phi^T Gamma F^; the paper's LSW has
    ridge = 0.
    """
    mean = stats.sums / jnp.maximum(stats.counts, 1.0)
    weighted = features.T * rho[None, :]  # Phi^T Gamma
    gram = weighted @ features + ridge * jnp.eye(features.shape[1])
    return jnp.linalg.solve(gram, weighted @ mean)


def lsl_solution(
    stats: MonteCarloStats, features: jax.Array, rho: jax.Array, ridge: float
) -> jax.Array:
    """The LSL weights (non-private), the minimiser of LSL's J.

    theta_l = (Phi^T diag(rho n) Phi + ridge/2 I)^-1 Phi^T (rho G).
    """
    weighted = features.T * (rho * stats.counts)[None, :]
    gram = weighted @ features + 0.5 * ridge * jnp.eye(features.shape[1])
    return jnp.linalg.solve(gram, features.T @ (rho * stats.sums))


def lsw_operator_norm(
    features: jax.Array, rho: jax.Array, ridge: float = 0.0
) -> jax.Array:
    """||M||_2, M = (Phi^T Gamma Phi + ridge I)^-1 Phi^T Gamma^1/2.

    At ridge 0 it equals ||(Gamma^1/2 Phi)^+||_2.

    The authors' code takes the Frobenius norm of (Gamma^1/2 Phi)^-1; the spectral norm
    is what the bound needs and is never larger.
    """
    sqrt_rho = jnp.sqrt(rho)
    gram = (features.T * rho[None, :]) @ features + ridge * jnp.eye(features.shape[1])
    m = jnp.linalg.solve(gram, features.T * sqrt_rho[None, :])
    return jnp.linalg.norm(m, ord=2)


def lsw_local_sensitivity(
    counts: jax.Array,
    features: jax.Array,
    rho: jax.Array,
    *,
    return_bounds: tuple[float, float],
    ridge: float = 0.0,
    k: jax.Array | int = 0,
) -> jax.Array:
    """An upper bound U_w(k) on the local sensitivity of theta_w at distance k.

    U_w(k) = W ||M||_2 sqrt(sum_s rho_s / max(n_s - k, 1)^2).

    Derivation (ours; the shape is the paper's phi_w). theta_w = M Gamma^1/2 F^ with M
    data independent, so ||theta - theta'|| <= ||M||_2 ||Gamma^1/2 (F^ - F^')||_2.
    Replacing one trajectory moves each F^_s by at most W / max(n_s, 1): with n_s fixed
    by |f - g| / n_s; when it leaves s (n_s -> n_s - 1) by |f - mean'| / n_s; when it
    arrives (n_s -> n_s + 1) by at most W / (n_s + 1); from or to an unvisited state
    (estimate 0, 0 in [lo, hi]) by at most W. At distance k every n_s is at least n_s -
    k, hence U_w(k) >= LS at distance k.
    """
    lo, hi = _check_bounds(return_bounds)
    phi_w = jnp.sum(rho / jnp.maximum(counts - k, 1.0) ** 2)
    return (hi - lo) * lsw_operator_norm(features, rho, ridge) * jnp.sqrt(phi_w)


def lsl_local_sensitivity(
    counts: jax.Array,
    features: jax.Array,
    rho: jax.Array,
    *,
    return_bounds: tuple[float, float],
    ridge: float,
    num_trajectories: int,
    k: jax.Array | int = 0,
) -> jax.Array:
    """An upper bound U_l(k) on the local sensitivity of theta_l at distance k.

    U_l(k) = (2 ||Phi||_2 / lambda) (W ||rho||_2 + ||Phi||_2 ||rho||_inf B sqrt(2 N_k
    / lambda)), N_k = sum_s rho_s min(n_s + k, m).

    Derivation (ours; the two-term shape is the authors' code's). With H = Phi^T
    diag(rho n) Phi + lambda/2 I and g = Phi^T (rho G), theta = H^-1 g; a neighbour has
    H' = H + E, g' = g + e, and theta' - theta = H'^-1 (e - E theta). Then ||H'^-1||_2
    <= 2 / lambda; ||e|| <= ||Phi||_2 ||rho * dG||_2 <= ||Phi||_2 W ||rho||_2 (each
    |dG_s| <= W); ||E theta|| <= ||Phi||_2^2 ||rho||_inf ||theta|| (|dn_s| <= 1); and
    J(theta) <= J(0) gives lambda/2 ||theta||^2 <= B^2 sum_s rho_s n_s. At distance k,
    n_s <= min(n_s + k, m). The authors' code has lambda - ||rho||_inf ||Phi||^2 in the
    denominator and a different factor on the sqrt term (their normalisation of J); we
    use the bound we can prove.
    """
    lo, hi = _check_bounds(return_bounds)
    if not ridge > 0:
        raise ValueError(f"LSL needs ridge (lambda) > 0; got {ridge!r}.")
    norm_phi = jnp.linalg.norm(features, ord=2)
    n_k = jnp.sum(rho * jnp.minimum(counts + k, float(num_trajectories)))
    theta_bound = max(-lo, hi) * jnp.sqrt(2.0 * n_k / ridge)
    return (2.0 * norm_phi / ridge) * (
        (hi - lo) * jnp.linalg.norm(rho) + norm_phi * jnp.max(rho) * theta_bound
    )


def _smooth(bound_at, beta: float, max_k: int) -> jax.Array:
    """sqrt(max_{0 <= k <= K} e^{-k beta} U(k)^2), a beta-smooth bound.

    The papers' Psi form (beta/2-, so beta-smooth). Both U's are monotone in k and
    constant beyond K (LSW: K = max n_s <= m; LSL: K = m), so the max over k >= 0 is
    reached within [0, K].
    """
    ks = jnp.arange(max_k + 1, dtype=jnp.float32)
    u = jax.vmap(bound_at)(ks)
    return jnp.sqrt(jnp.max(jnp.exp(-ks * beta) * u**2))


def lsw_smooth_sensitivity(
    counts,
    features,
    rho,
    *,
    return_bounds,
    beta: float,
    num_trajectories: int,
    ridge: float = 0.0,
) -> jax.Array:
    """S_w(X) = sqrt(max_k e^{-k beta} U_w(k)^2), LSW's smooth sensitivity.

    The paper's Psi_w, with sigma ~ sqrt(Psi).
    """
    return _smooth(
        lambda k: lsw_local_sensitivity(
            counts, features, rho, return_bounds=return_bounds, ridge=ridge, k=k
        ),
        beta,
        num_trajectories,
    )


def lsl_smooth_sensitivity(
    counts,
    features,
    rho,
    *,
    return_bounds,
    beta: float,
    num_trajectories: int,
    ridge: float,
) -> jax.Array:
    """S_l(X) = sqrt(max_k e^{-k beta} U_l(k)^2)."""
    return _smooth(
        lambda k: lsl_local_sensitivity(
            counts,
            features,
            rho,
            return_bounds=return_bounds,
            ridge=ridge,
            num_trajectories=num_trajectories,
            k=k,
        ),
        beta,
        num_trajectories,
    )


def _release(key, theta, smooth, params: SmoothParams, epsilon, delta) -> BalleRelease:
    std = smooth / params.alpha
    # The privacy core's one-shot release with the std S(X) / alpha (NRS07) written
    # out: a unit-sensitivity mechanism of sigma = std adds noise of exactly that std.
    # Its event() is not this release's accounting (the std depends on the data, so
    # it has none; see the module docstring); only release() is used.
    noised = privacy.GaussianMechanism(
        l2_sensitivity=1.0, noise_multiplier=std
    ).release(key, theta)
    return BalleRelease(noised, std, smooth, float(epsilon), float(delta))


def dp_lsw(
    key: jax.Array,
    visits: FirstVisits,
    features: jax.Array,
    rho: jax.Array,
    *,
    epsilon: float,
    delta: float,
    return_bounds: tuple[float, float],
    num_trajectories: int | None = None,
    ridge: float = 0.0,
    calibration: str = "nrs07",
) -> BalleRelease:
    """DP-LSW: release theta_w + S_w(X) / alpha * N(0, I_d).

    (epsilon, delta)-DP by NRS07, for data sets of m trajectories that differ in one
    whole trajectory (replace-one; the privacy unit is a trajectory).

    Args:
      key: the noise key (secret in a real release).
      visits: :func:`first_visits` of the m trajectories. Their returns are clipped into
        ``return_bounds`` here (:func:`clip_first_visits`), so data outside the declared
        bounds cost accuracy, never the guarantee.
      features: [S, d] Phi.
      rho: [S] public state weights (> 0 where Phi must be identified).
      epsilon: the target epsilon of this one release (finite, > 0).
      delta: the target delta of this one release, in (0, 1).
      return_bounds: public [lo, hi] containing every first-visit return and 0.
      num_trajectories: m (public); optional, checked against the visits' leading axis.
      ridge: lambda_w >= 0 (0 is the paper's LSW).
      calibration: alpha from NRS07's closed form (``"nrs07"``, the authors' choice) or
        the exact privacy curve at the same beta (``"exact"``, less noise); see
        :func:`smooth_params`.

    Returns:
      A :class:`BalleRelease` with the noised [d] weights (V = Phi theta), the
      data-dependent noise std and smooth sensitivity (diagnostics, never to be
      published), and the (epsilon, delta) of the release.

    Raises:
      ValueError: if epsilon, delta, ``calibration`` or ``return_bounds`` are invalid,
        or ``num_trajectories`` differs from the number of trajectories in ``visits``.
    """
    params = smooth_params(epsilon, delta, features.shape[1], calibration)
    stats, num_trajectories = _private_stats(visits, return_bounds, num_trajectories)
    theta = lsw_solution(stats, features, rho, ridge)
    smooth = lsw_smooth_sensitivity(
        stats.counts,
        features,
        rho,
        return_bounds=return_bounds,
        beta=params.beta,
        num_trajectories=num_trajectories,
        ridge=ridge,
    )
    return _release(key, theta, smooth, params, epsilon, delta)


def dp_lsl(
    key: jax.Array,
    visits: FirstVisits,
    features: jax.Array,
    rho: jax.Array,
    *,
    epsilon: float,
    delta: float,
    return_bounds: tuple[float, float],
    num_trajectories: int | None = None,
    ridge: float,
    calibration: str = "nrs07",
) -> BalleRelease:
    """DP-LSL: release theta_l + S_l(X) / alpha * N(0, I_d).

    (epsilon, delta)-DP by NRS07, for data sets of m trajectories that differ in one
    whole trajectory (replace-one; the privacy unit is a trajectory).

    Args:
      key: the noise key (secret in a real release).
      visits: :func:`first_visits` of the m trajectories; their returns are clipped into
        ``return_bounds`` here (:func:`clip_first_visits`).
      features: [S, d] Phi.
      rho: [S] public state weights.
      epsilon: the target epsilon of this one release (finite, > 0).
      delta: the target delta of this one release, in (0, 1).
      return_bounds: public [lo, hi] containing every first-visit return and 0.
      num_trajectories: m (public); optional, checked against the visits' leading axis.
      ridge: LSL's lambda > 0. The authors' code grows it with m (e.g. lambda =
        c m^0.4); the noise falls like 1/lambda, the bias grows with it.
      calibration: ``"nrs07"`` or ``"exact"``; see :func:`smooth_params`.

    Returns:
      A :class:`BalleRelease` (as :func:`dp_lsw`), theta being the noised LSL weights.

    Raises:
      ValueError: if ``ridge`` <= 0, or for the invalid inputs :func:`dp_lsw` rejects.
    """
    params = smooth_params(epsilon, delta, features.shape[1], calibration)
    stats, num_trajectories = _private_stats(visits, return_bounds, num_trajectories)
    theta = lsl_solution(stats, features, rho, ridge)
    smooth = lsl_smooth_sensitivity(
        stats.counts,
        features,
        rho,
        return_bounds=return_bounds,
        beta=params.beta,
        num_trajectories=num_trajectories,
        ridge=ridge,
    )
    return _release(key, theta, smooth, params, epsilon, delta)
