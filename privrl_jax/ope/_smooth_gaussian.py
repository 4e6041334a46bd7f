"""The exact (epsilon, delta) of Gaussian noise scaled to a smooth sensitivity.

Host side, SciPy.

The release is Y = f(X) + S(X) / alpha * Z, Z ~ N(0, I_d), where S is a beta-smooth
upper bound on the local L2 sensitivity of f (S(X) >= LS(X) and S(X) <= e^beta S(X') for
neighbours X, X'; Nissim, Raskhodnikova & Smith 2007). We could not find NRS07's
statement of the Gaussian's constants in any source available here, so instead of
trusting a recalled lemma we compute the privacy curve of this mechanism directly.

The reduction (our derivation). Take neighbours X, X', s = S(X), s' = S(X') and Delta =
f(X') - f(X). By the definition of local sensitivity ||Delta|| <= LS(X) <= s, and
likewise ||Delta|| <= s'. Dividing by the noise std s / alpha and rotating (the Gaussian
is isotropic), the two output laws are P = N(0, I_d) and Q = N(a e_1, t^2 I_d) with

    t = s' / s in [e^-beta, e^beta]   and
    a = alpha ||Delta|| / s in [0, alpha min(1, t)].

(epsilon, delta)-DP holds iff the hockey-stick divergence E_{e^eps}(P || Q) <= delta for
every such (t, a) and for the pair in the other order; swapping X and X' maps (t, a) to
(1/t, a/t), which is again in the set, so the sup of E_{e^eps}(P || Q) over the set is
the mechanism's delta.

E_{e^eps}(P || Q) = P(L > eps) - e^eps Q(L > eps) for the privacy loss L = log p/q, and
here L(z) = c ||z||^2 + b z_1 + k with c = (1/t^2 - 1)/2, b = -a/t^2, k = d log t +
a^2/(2 t^2). For t != 1 it is c ||z + u||^2 + const with u = b/(2c) e_1, so the event {L
> eps} is a ball or the outside of one around -u and both probabilities are noncentral
chi-square tails in closed form (under Q, z + u = t (w + (a + b/(2c))/t e_1), w ~ N(0,
I)). For t = 1 the loss is linear in z_1 and the curve is the Gaussian mechanism's,
Phi(a/2 - eps/a) - e^eps Phi(-a/2 - eps/a) (Balle & Wang 2018). The sup over (t, a) is
taken on a grid that contains the corners; it is a numerical maximum, so calibration
keeps a relative safety margin on delta.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats


def _gaussian_curve(epsilon: float, a: float) -> float:
    """E_{e^eps}(N(0,1) || N(a,1)), the shift-only case (t = 1)."""
    if a <= 0:
        return 0.0
    tail = special.ndtr(a / 2 - epsilon / a)
    return float(tail - math.exp(epsilon) * special.ndtr(-a / 2 - epsilon / a))


def hockey_stick(epsilon: float, a: float, t: float, dim: int) -> float:
    """E_{e^eps}(N(0, I_d) || N(a e_1, t^2 I_d)) in closed form.

    Noncentral chi-square tails (the module docstring derives them).

    Args:
      epsilon: eps >= 0.
      a: the mean shift, >= 0.
      t: the std ratio, > 0.
      dim: d >= 1.

    Returns:
      The hockey-stick divergence, in [0, 1].

    Raises:
      ValueError: if an argument is out of range or the tails do not evaluate.
    """
    if not (epsilon >= 0 and a >= 0 and t > 0 and dim >= 1):
        raise ValueError(
            f"need epsilon >= 0, a >= 0, t > 0, dim >= 1; got {epsilon, a, t, dim}."
        )
    log_t = math.log(t)
    if log_t == 0.0:
        return _gaussian_curve(epsilon, a)
    if abs(log_t) < _TINY_LOG_T:
        # The ball's centre b/(2c) runs off to infinity as t -> 1 and the noncentral
        # chi-square series stop converging (NaN near |log t| ~ 1e-6). The curve is
        # continuous in t, and over |log t| <= 1e-5 it moves by ~1e-4 relative: take the
        # larger of its two ends instead.
        edge = math.exp(math.copysign(_TINY_LOG_T, log_t))
        return max(_gaussian_curve(epsilon, a), _closed_form(epsilon, a, edge, dim))
    return _closed_form(epsilon, a, t, dim)


_TINY_LOG_T = 1e-5


def _closed_form(epsilon: float, a: float, t: float, dim: int) -> float:
    c = (1.0 / t**2 - 1.0) / 2.0
    b = -a / t**2
    k = dim * math.log(t) + a**2 / (2 * t**2)
    shift = b / (2 * c)  # u = shift * e_1
    # L = c ||z + u||^2 + k - b^2 / (4c) > eps  <=>  c ||z + u||^2 > eps - k + b^2 /
    # (4c).
    tau = (epsilon - k + b**2 / (4 * c)) / c
    lam_p = shift**2
    lam_q = ((a + shift) / t) ** 2
    if c > 0:  # t < 1: outside the ball ||z + u||^2 > tau
        if tau <= 0:
            p_in, q_in = 1.0, 1.0
        else:
            p_in = stats.ncx2.sf(tau, dim, lam_p)
            q_in = stats.ncx2.sf(tau / t**2, dim, lam_q)
    else:  # t > 1: inside the ball ||z + u||^2 < tau
        if tau <= 0:
            return 0.0
        p_in = stats.ncx2.cdf(tau, dim, lam_p)
        q_in = stats.ncx2.cdf(tau / t**2, dim, lam_q)
    value = float(p_in - math.exp(epsilon) * q_in)
    if not math.isfinite(value):
        raise ValueError(
            f"the privacy curve did not evaluate at eps={epsilon}, a={a}, t={t}, "
            f"d={dim}."
        )
    return max(value, 0.0)


def smooth_gaussian_delta(
    epsilon: float, alpha: float, beta: float, dim: int, *, grid: int = 12
) -> float:
    """delta(eps) of f(X) + S(X)/alpha * N(0, I_d) for every beta-smooth bound S.

    Valid for replace-one or any other relation: only neighbouring pairs enter.

    The sup over t in [e^-beta, e^beta], a in [0, alpha min(1, t)] of
    :func:`hockey_stick`, on a grid of 2 ``grid`` + 1 values of log t (the corners
    included) and ``grid`` + 1 values of a.
    """
    if not (alpha > 0 and beta >= 0 and dim >= 1):
        raise ValueError(
            f"need alpha > 0, beta >= 0, dim >= 1; got {alpha, beta, dim}."
        )
    worst = 0.0
    for log_t in np.linspace(-beta, beta, 2 * grid + 1):
        t = math.exp(log_t)
        for a in np.linspace(0.0, alpha * min(1.0, t), grid + 1)[1:]:
            worst = max(worst, hockey_stick(epsilon, float(a), t, dim))
    return worst


def calibrate_smooth_alpha(
    epsilon: float,
    delta: float,
    beta: float,
    dim: int,
    *,
    margin: float = 0.01,
    tol: float = 1e-4,
) -> float:
    """The largest alpha with smooth_gaussian_delta <= delta (1 - margin).

    Bisected to relative ``tol``.

    A smaller noise std S(X)/alpha than NRS07's closed-form constants give, at the same
    beta; the guarantee is the numerically computed privacy curve above (``margin``
    covers the grid sup).
    """
    if not (0 < epsilon < math.inf and 0 < delta < 1):
        raise ValueError(
            f"need 0 < epsilon < inf and 0 < delta < 1; got {epsilon!r}, {delta!r}."
        )
    target = delta * (1.0 - margin)
    lo, hi = 1e-6, 1.0
    while smooth_gaussian_delta(epsilon, hi, beta, dim) <= target:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            raise ValueError(
                "no finite alpha reaches delta: beta is too small to matter?"
            )
    if smooth_gaussian_delta(epsilon, lo, beta, dim) > target:
        raise ValueError(
            f"beta = {beta} is too large: even alpha -> 0 gives delta > {target:g} "
            "(the variance "
            "change alone leaks too much)."
        )
    while hi / lo > 1 + tol:
        mid = math.sqrt(lo * hi)
        if smooth_gaussian_delta(epsilon, mid, beta, dim) <= target:
            lo = mid
        else:
            hi = mid
    return lo
