"""The one aggregation every experiment table uses.

Mean, sample std (ddof = 1), the Student-t interval, paired and Welch t-tests, and a
multiple-comparison correction.

Written out (not ``scipy.stats.ttest_*``) so each number's formula is on the page;
``tests/experiments/test_stats.py`` checks them against scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.stats

CORRECTIONS = ("holm", "bonferroni", "none")


def summary(values: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """Mean, sample std (ddof = 1) and the Student-t interval's half-width.

    Args:
      values: one number per run (seed).
      level: the interval's coverage.

    Returns:
      ``{"n", "mean", "std", "ci95"}``; ``std`` and ``ci95`` are NaN for one value
      (``ci95`` is the half-width at ``level``, named for the default).
    """
    v = np.asarray(values, np.float64)
    n = int(v.size)
    if n == 0:
        return {"n": 0, "mean": math.nan, "std": math.nan, "ci95": math.nan}
    sd = float(v.std(ddof=1)) if n > 1 else math.nan
    half = (
        float(scipy.stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n))
        if n > 1
        else math.nan
    )
    return {"n": n, "mean": float(v.mean()), "std": sd, "ci95": half}


def differences(d: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """The :func:`summary` of within-seed differences and how many of them rose.

    A seed's own data shift both of its runs alike; their difference removes that
    shift, so the differences are summarised, not the two rows apart.

    Args:
      d: one difference (b - a) per seed.
      level: the interval's coverage.

    Returns:
      :func:`summary`'s keys and ``rose``, the count of positive differences.
    """
    return summary(d, level) | {"rose": int(sum(x > 0 for x in d))}


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Welch's two-sided t-test of mean(a) = mean(b) (unequal variances).

    Args:
      a: one sample.
      b: the other sample.

    Returns:
      ``{"diff", "t", "df", "p"}`` with ``diff = mean(a) - mean(b)`` and the
      Welch-Satterthwaite degrees of freedom; ``t`` is +-inf and ``p`` 0 (or NaN when
      the means agree) when both variances are zero.

    Raises:
      ValueError: a sample with fewer than two values.
    """
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.size < 2 or y.size < 2:
        raise ValueError("Welch's test needs at least two values in each sample.")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    diff = float(x.mean() - y.mean())
    se2 = va + vb
    if se2 == 0:
        return {
            "diff": diff,
            "t": math.copysign(math.inf, diff) if diff else math.nan,
            "df": math.nan,
            "p": 0.0 if diff else math.nan,
        }
    t = diff / math.sqrt(se2)
    df = se2**2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    return {"diff": diff, "t": t, "df": float(df), "p": _two_sided(t, df)}


def paired(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """The paired two-sided t-test of mean(a - b) = 0 (a[i] and b[i] share a seed).

    Args:
      a: one value per pair.
      b: the other value of each pair, in the same order.

    Returns:
      ``{"diff", "t", "df", "p", "n"}``: the mean difference, t on n - 1 degrees of
      freedom and its p-value.

    Raises:
      ValueError: samples of different lengths or fewer than two pairs.
    """
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if x.shape != y.shape or x.size < 2:
        raise ValueError("a paired test needs two equal-length samples of >= 2 pairs.")
    d = x - y
    sd = d.std(ddof=1)
    diff = float(d.mean())
    n = int(d.size)
    if sd == 0:
        t = math.copysign(math.inf, diff) if diff else math.nan
        p = 0.0 if diff else math.nan
        return {"diff": diff, "t": t, "df": n - 1, "p": p, "n": n}
    t = diff / (sd / math.sqrt(n))
    return {"diff": diff, "t": float(t), "df": n - 1, "p": _two_sided(t, n - 1), "n": n}


def _two_sided(t: float, df: float) -> float:
    return float(2 * scipy.stats.t.sf(abs(t), df))


def correct(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """Family-wise adjusted p-values over one family of tests.

    Args:
      pvalues: the family's raw p-values (NaN ones are left NaN and not counted).
      method: ``holm`` (step-down), ``bonferroni`` (p times the family size) or
        ``none``.

    Returns:
      The adjusted p-values, in the input's order, capped at 1.

    Raises:
      ValueError: an unknown method.
    """
    if method not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}; got {method!r}.")
    p = [float(x) for x in pvalues]
    live = [i for i, x in enumerate(p) if not math.isnan(x)]
    m = len(live)
    out = list(p)
    if method == "none" or m == 0:
        return out
    if method == "bonferroni":
        for i in live:
            out[i] = min(1.0, p[i] * m)
        return out
    running = 0.0
    for rank, i in enumerate(sorted(live, key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
