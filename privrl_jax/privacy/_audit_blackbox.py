"""Black-box one-run audit of a synthetic-data generator (host-side NumPy).

After Annamalai, Ganev & De Cristofaro, "'What do you want from theory alone?'
Experimenting with Tight Auditing of Differentially Private Synthetic Data Generation"
(USENIX Security 2024): the auditor sees nothing but
the released rows. It plants canary rows unlike the real ones into the sensitive table,
each with probability 1/2, runs the generator once, and guesses that the canaries the
release crowds around most were in. The guesses are turned into an epsilon lower bound
by the one-run theorem of Steinke, Nasr & Jagielski ("Privacy Auditing with One (1)
Training Run", NeurIPS 2023), which holds for any
generator that is (epsilon, delta)-DP under add/remove-one row, whatever the other rows
(the real ones and the other canaries) are.

Two canary designs (:mod:`privrl_jax.privacy._audit`):

- :func:`out_of_distribution_canaries`: rows outside the data's bounding box. Right for
  generators that can emit any value (a diffusion model, a copy); a generator that
  discretises on public bounds clips them into its edge bins, where they pile up on each
  other.
- :func:`empty_cell_canaries`: each canary in its own cell of the generator's public
  grid, in a region no real row occupies, with an empty ring of cells around it, so
  that only the canary itself can put released rows in its cell. Scored with
  ``density_scores(..., columns=...)`` on the grid's columns.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias

import jax
import numpy as np

from privrl_jax.privacy._audit import (
    AuditResult,
    KeyOrSeed,
    _rng,
    density_scores,
    draw_inclusion,
    one_run_epsilon_from_counts,
    one_run_epsilon_lower_bound,
    out_of_distribution_canaries,
)


class Synthesizer(Protocol):
    """The generator under audit: ``(rows [n, dim], key) -> released rows [n', dim]``.

    Any function of that signature is one. The rows are the sensitive table with the
    included canaries shuffled in; the key is the generator's own randomness.
    """

    def __call__(self, rows: np.ndarray, key: jax.Array, /) -> np.ndarray:
        """Trains on ``rows`` and releases synthetic rows.

        Args:
          rows: the sensitive table with the included canaries, [n, dim].
          key: the generator's own randomness.

        Returns:
          The released rows, [n', dim].
        """
        ...


# (released [n', dim], canaries [m, dim]) -> [m] scores,
# higher meaning "more likely in".
CanaryScore: TypeAlias = Callable[[np.ndarray, np.ndarray], np.ndarray]

# Enumerating a grid of more cells than this is refused (choose fewer columns or cells).
_MAX_CELLS = 4_000_000


def empty_cell_canaries(
    data: np.typing.ArrayLike,
    m: int,
    key_or_seed: KeyOrSeed = 0,
    *,
    columns: Sequence[int],
    low: Sequence[float],
    high: Sequence[float],
    cells: int | Sequence[int],
) -> np.ndarray:
    """[m, dim] canary rows, each alone in an empty cell of a public grid.

    The grid has ``cells`` equal-width cells per listed column on the public ``[low,
    high]`` (give the generator's own bins, e.g. a marginal method's discretisation).
    A cell qualifies when neither it nor any of its neighbours (the 3^c - 1 cells
    around it) holds a data row. The chosen cells lie on a lattice of step 2, so they
    are at least two cells apart (Chebyshev distance >= 2) and no canary's
    neighbourhood holds another canary's cell. Each canary sits at its cell's centre
    on ``columns``; its other columns are copied from a data row drawn at random, so
    it differs from the data only where the score looks. A released row in a canary's
    cell can then only have come from that canary, if the generator fits the cell
    counts exactly (it puts nothing in an empty cell).

    Args:
      data: [n, dim] the sensitive rows (the auditor may read them).
      m: number of canaries.
      key_or_seed: the draw of cells and copied rows.
      columns: the c column indices the grid spans (e.g. the two position columns).
      low: [c] public lower bounds of those columns.
      high: [c] public upper bounds of those columns.
      cells: cells per column (one int, or c of them).

    Returns:
      [m, dim] float64 rows.

    Raises:
      ValueError: bad shapes or bounds, or fewer than m qualifying cells (use fewer
        canaries, more cells, or other columns).
    """
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"data must be [rows, dim]; got shape {x.shape}.")
    cols = np.asarray(columns, dtype=np.int64)
    lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
    n_cells = np.broadcast_to(np.asarray(cells, np.int64), cols.shape)
    if (
        cols.ndim != 1
        or cols.size < 1
        or np.any((cols < 0) | (cols >= x.shape[1]))
        or lo.shape != cols.shape
        or hi.shape != cols.shape
    ):
        raise ValueError(
            f"columns must be distinct indices in [0, {x.shape[1]}) with one low and "
            f"high each; got columns {list(columns)}, low {list(low)}, "
            f"high {list(high)}."
        )
    if not np.all(hi > lo) or not np.all(n_cells >= 1):
        raise ValueError("need high > low and cells >= 1 on every column.")
    if m < 1:
        raise ValueError(f"m must be >= 1; got {m}.")
    total = math.prod(int(c) for c in n_cells)
    if total > _MAX_CELLS:
        raise ValueError(
            f"the grid has {total} cells (over {_MAX_CELLS}); use fewer columns/cells."
        )
    width = (hi - lo) / n_cells
    # Data cells, with rows outside the bounds in the edge cells
    # (as binning clips them).
    codes = np.clip(np.floor((x[:, cols] - lo) / width), 0, n_cells - 1).astype(int)
    occupied = np.zeros(tuple(int(c) for c in n_cells), dtype=bool)
    occupied[tuple(codes.T)] = True
    # A cell qualifies when its 3^c neighbourhood holds no data row: dilate by one cell.
    blocked = np.zeros_like(occupied)
    padded = np.pad(occupied, 1)
    for shift in itertools.product((0, 1, 2), repeat=cols.size):
        blocked |= padded[tuple(slice(s, s + int(c)) for s, c in zip(shift, n_cells))]
    # Cells on a lattice of step 2 (a random parity per column) are pairwise at least
    # two apart; the canaries are m of its free cells, drawn at random.
    rng = _rng(key_or_seed)
    parity = rng.integers(0, 2, cols.size)
    free = np.argwhere(~blocked)
    free = free[np.all(free % 2 == parity, axis=1)]
    if len(free) < m:
        raise ValueError(
            f"only {len(free)} empty cells two apart; asked for m = {m} canaries."
        )
    chosen = free[np.sort(rng.choice(len(free), size=m, replace=False))]
    out = x[rng.integers(0, x.shape[0], m)].copy()
    out[:, cols] = lo + (chosen + 0.5) * width
    return out


@dataclasses.dataclass(frozen=True)
class SyntheticDataAudit:
    """What a black-box synthesizer audit found.

    Attributes:
      result: the one-run :class:`AuditResult` (epsilon lower bound, counts).
      max_epsilon: the most these guesses could show (all of them right): the
        m-limited ceiling, not the generator's epsilon.
      scores: [m] the canaries' scores.
      inclusion: [m] bool, which canaries were in; drawn and kept by the auditor (the
        synthesizer saw only the rows), returned after the release for diagnosis.
      num_rows: rows the synthesizer was given (real + included canaries).
      num_released: rows it released.
    """

    result: AuditResult
    max_epsilon: float
    scores: np.ndarray
    inclusion: np.ndarray
    num_rows: int
    num_released: int

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only, so ``json.dumps`` works (arrays left out)."""
        inc = self.inclusion
        return {
            **self.result.to_dict(),
            "max_epsilon": self.max_epsilon,
            "included": int(inc.sum()),
            "num_rows": self.num_rows,
            "num_released": self.num_released,
            "mean_score_in": float(self.scores[inc].mean()) if inc.any() else None,
            "mean_score_out": float(self.scores[~inc].mean()) if (~inc).any() else None,
        }


def audit_synthesizer(
    synthesize: Synthesizer,
    rows: np.typing.ArrayLike,
    m: int,
    key: jax.Array,
    *,
    delta: float,
    canaries: np.typing.ArrayLike | None = None,
    score: CanaryScore | None = None,
    k_positive: int | None = None,
    k_negative: int = 0,
    confidence: float = 0.95,
) -> SyntheticDataAudit:
    """One black-box audit of a synthetic-data generator: one training run, m canaries.

    The auditor draws a fair coin per canary (:func:`draw_inclusion`), adds the
    canaries that won to ``rows``, shuffles the table (a generator must not find the
    canaries by position), calls ``synthesize`` once, scores every canary on the
    release and guesses "in" for the ``k_positive`` highest scores (and "out" for the
    ``k_negative`` lowest). The count of right guesses gives the epsilon lower bound at
    ``confidence`` (:func:`one_run_epsilon_lower_bound`): valid for a generator that is
    (epsilon, delta)-DP under add/remove-one row. The scores, canaries and guess counts
    must be fixed before the run, as they are here.

    Args:
      synthesize: ``(rows [n, dim], key) -> released rows [n', dim]``.
      rows: [n, dim] the sensitive rows.
      m: number of canaries.
      key: the audit's randomness (canaries, coins, shuffle, the generator's key).
      delta: the delta of the generator's claim.
      canaries: [m, dim] crafted canaries; default :func:`out_of_distribution_canaries`
        of ``rows``.
      score: ``(released, canaries) -> [m]``; default minus the distance to the
        nearest released row (:func:`density_scores`).
      k_positive: "in" guesses; default m // 10.
      k_negative: "out" guesses.
      confidence: of the lower bound.

    Returns:
      A :class:`SyntheticDataAudit`.
    """
    x = np.asarray(rows, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"rows must be [n, dim]; got shape {x.shape}.")
    if not isinstance(key, jax.Array):
        raise TypeError(f"key must be a JAX key; got {key!r}.")
    k_canary, k_coin, k_shuffle, k_synth = jax.random.split(key, 4)
    c = (
        out_of_distribution_canaries(x, m, k_canary)
        if canaries is None
        else np.asarray(canaries, dtype=np.float64)
    )
    if c.shape != (m, x.shape[1]):
        raise ValueError(f"canaries must be [m={m}, {x.shape[1]}]; got {c.shape}.")
    inclusion = draw_inclusion(k_coin, m)
    table = np.concatenate([x, c[inclusion]])
    table = table[_rng(k_shuffle).permutation(table.shape[0])]
    released = np.asarray(synthesize(table, k_synth), dtype=np.float64)
    if released.ndim != 2 or released.shape[1] != x.shape[1] or not released.size:
        raise ValueError(
            f"the synthesizer must release [n', {x.shape[1]}] rows; got "
            f"{released.shape}."
        )
    scores = np.asarray(
        density_scores(released, c) if score is None else score(released, c),
        dtype=np.float64,
    )
    k_pos = max(1, m // 10) if k_positive is None else int(k_positive)
    result = one_run_epsilon_lower_bound(
        scores,
        inclusion,
        delta=delta,
        k_positive=k_pos,
        k_negative=k_negative,
        confidence=confidence,
    )
    ceiling = one_run_epsilon_from_counts(
        m, result.guesses, result.guesses, delta=delta, confidence=confidence
    )
    return SyntheticDataAudit(
        result=result,
        max_epsilon=ceiling,
        scores=scores,
        inclusion=inclusion,
        num_rows=int(table.shape[0]),
        num_released=int(released.shape[0]),
    )
