"""PrivSyn: DenseMarg selection, Gaussian measurement and GUM synthesis.

Zhang, Wang, Li, He & Chen, USENIX Security 2021, "PrivSyn: Differentially Private
Data Synthesis": DenseMarg selection of 2-way marginals, Gaussian measurement, and
synthesis by *gradually updating* records (GUM) instead of fitting a graphical model.

Written here, not imported: the one package on the index that offers it,
``privsyn-core`` 0.1.1, returned wrong tables when tried side by side on a 2,000-row
table with one strongly dependent pair (correlation 0.97): its default synthesis
collapsed three columns to a single value, and without its "attribute appending" the
measured pair came out independent (correlation -0.03) although its noisy 2-way
marginal was accurate. Its selection and measurement steps are the ones below.

Steps (rho = 1 / (2 sigma^2) shared 0.1 / 0.1 / 0.8, the split of the authors' code):

1. **Selection.** For every pair of columns the InDif score sum_ab |c_ab - c_a c_b / n|
   (its dependence: 0 for independent columns) is released with one Gaussian mechanism.
   Greedy DenseMarg (the paper's Algorithm 1) then picks pairs while the expected error
   falls: measuring a set S costs (sum_S cells^(2/3))^(3/2) / sqrt(pi rho_3) in
   expected L1 noise (rho_3 shared in proportion to cells^(2/3), the paper's Sec. 4.3
   optimum), and leaving a pair out costs its noisy InDif. Post-processing.
2. **1-way marginals**, all in one Gaussian release (sensitivity sqrt(D)).
3. **The selected pairs' marginals**, one Gaussian each at its share of rho_3.

Then the noisy counts are made non-negative and normalised (clip at 0; the paper's
"norm-cut"), and GUM (the paper's Sec. 5) starts from rows drawn column by column from
the 1-way marginals and, for ``update_iterations`` rounds, visits the selected pairs
(the worst-fitting first) and moves records out of over-full cells into under-full ones:
half of the moved records change only the pair's two values, the others become copies
of a record already in the target cell (the authors' alternation of replacement and
duplication, their "S5" with step decay 0.84^(t // 20)). Not done: merging pairs into
larger cliques (the paper's Algorithm 2) and the consistency step among marginals that
share a column; GUM itself tolerates their small disagreements.

Privacy, under add/remove-one row (the relation of PrivORL-n, PGM and MST): every
marginal's counts move by exactly 1 (one cell), so D concatenated 1-way marginals by
sqrt(D). An InDif score moves by less than 4: adding a row moves sum_ab |c_ab| by 1, and
the product table c_a c_b / n by at most (n + n + 1 + n) / (n + 1) < 3 in L1 (|c| = n,
one new count in a and in b; the paper's Lemma states 4 for replace-one), so the P
scores move by < 4 sqrt(P) in L2 (tested on neighbouring tables). Every release is one
``privacy.GaussianMechanism``, handed to ``on_release`` (a ledger's check and record)
before it is drawn; dp-accounting composes the Gaussians exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np

from privrl_jax.privacy import GaussianMechanism
from privrl_jax.synth._marginal import (
    Clique,
    MarginalFit,
    Measurement,
    OnRelease,
    PublicDiscretisation,
    marginal_counts,
    marginal_sensitivity,
    measure,
)

# The authors' split of rho among selection, 1-way marginals and the selected pairs.
PRIVSYN_SPLIT = (0.1, 0.1, 0.8)
# L2 sensitivity of one InDif score under add/remove-one (module docstring).
INDIF_SENSITIVITY = 4.0


def indif_scores(
    codes: np.ndarray, disc: PublicDiscretisation, pairs: Sequence[Clique]
) -> np.ndarray:
    """InDif of each pair: sum over the pair's cells of |c_ab - c_a c_b / n|.

    It is 0 when the two columns are independent in the data.

    Args:
      codes: [N, D] bin codes.
      disc: the discretisation.
      pairs: (column, column) names of each pair.

    Returns:
      [len(pairs)] float64 scores (not private).
    """
    idx = {n: j for j, n in enumerate(disc.names)}
    codes = np.asarray(codes)
    n = max(codes.shape[0], 1)
    out = np.empty(len(pairs), np.float64)
    for i, (a, b) in enumerate(pairs):
        ka, kb = disc.sizes[idx[a]], disc.sizes[idx[b]]
        joint = np.zeros((ka, kb))
        np.add.at(joint, (codes[:, idx[a]], codes[:, idx[b]]), 1.0)
        prod = np.outer(joint.sum(1), joint.sum(0)) / n
        out[i] = np.abs(joint - prod).sum()
    return out


def dense_marg_select(
    noisy_indif: np.ndarray, cells: Sequence[int], rho_measure: float
) -> tuple[int, ...]:
    """Greedy DenseMarg (PrivSyn Alg. 1): indices of the pairs to measure.

    Adds, one at a time, the pair that most lowers the expected total error
    (sum_S c^(2/3))^(3/2) / sqrt(pi rho) + sum_(not S) InDif, and stops when none does.
    With rho = inf the noise costs nothing and every pair with InDif > 0 is taken.

    Args:
      noisy_indif: [P] released InDif scores.
      cells: [P] cell counts of the pairs' marginals.
      rho_measure: the zCDP rho the selected marginals will share (inf: no noise).

    Returns:
      The chosen pair indices, in the order chosen.
    """
    scores = np.asarray(noisy_indif, np.float64)
    w = np.asarray(cells, np.float64) ** (2.0 / 3.0)
    noise = (
        (lambda s: 0.0)
        if math.isinf(rho_measure)
        else (lambda s: s**1.5 / math.sqrt(math.pi * rho_measure))
    )
    chosen: list[int] = []
    left = set(range(scores.size))
    best = scores.sum()
    while left:
        base = sum(w[chosen])
        gain = {j: noise(base + w[j]) + scores[sorted(left - {j})].sum() for j in left}
        j = min(gain, key=lambda k: (gain[k], k))
        if gain[j] >= best:
            break
        best = gain[j]
        chosen.append(j)
        left.remove(j)
    return tuple(chosen)


def pair_rhos(cells: Sequence[int], rho: float) -> tuple[float, ...]:
    """The rho of each selected marginal: ``rho`` shared in proportion to cells^(2/3).

    PrivSyn Sec. 4.3's optimum for the expected L1 error.

    Args:
      cells: cell counts of the selected marginals.
      rho: the zCDP rho they share.

    Returns:
      One rho per marginal, summing to ``rho``.
    """
    w = [c ** (2.0 / 3.0) for c in cells]
    return tuple(rho * x / sum(w) for x in w)


def _mech(rho: float, l2_sensitivity: float) -> GaussianMechanism | None:
    if math.isinf(rho):
        return None
    return GaussianMechanism.from_zcdp(rho, l2_sensitivity=l2_sensitivity)


def _distribution(counts: np.ndarray) -> np.ndarray:
    """Turns noisy counts into a distribution: negatives clipped to 0, then normalised.

    Uniform when nothing is left.
    """
    p = np.clip(np.asarray(counts, np.float64), 0.0, None)
    return p / p.sum() if p.sum() > 0 else np.full(p.shape, 1.0 / p.size)


def gum(
    rng: np.random.Generator,
    one_way: Sequence[np.ndarray],
    pairs: Sequence[tuple[int, int]],
    pair_dists: Sequence[np.ndarray],
    *,
    num_rows: int,
    iterations: int = 50,
) -> np.ndarray:
    """GUM (PrivSyn Sec. 5): rows whose pair marginals approach ``pair_dists``.

    Args:
      rng: public randomness (GUM is post-processing of the noisy marginals).
      one_way: per column, its distribution over its bins (the initial rows' law).
      pairs: (column index, column index) of each target.
      pair_dists: each target's [k_a, k_b] distribution.
      num_rows: rows to synthesise.
      iterations: update rounds.

    Returns:
      [num_rows, D] int32 bin codes.
    """
    rows = np.stack(
        [rng.choice(len(p), size=num_rows, p=p) for p in one_way], axis=1
    ).astype(np.int32)
    if not pairs:
        return rows

    def error(k):
        a, b = pairs[k]
        kb = pair_dists[k].shape[1]
        cur = np.bincount(rows[:, a] * kb + rows[:, b], minlength=pair_dists[k].size)
        return np.abs(cur / num_rows - pair_dists[k].ravel()).sum(), cur

    for it in range(iterations):
        alpha = 0.84 ** (it // 20)
        duplicate_share = 0.5 if it % 2 == 0 else 1.0
        order = sorted(range(len(pairs)), key=lambda k: -error(k)[0])
        for k in order:
            a, b = pairs[k]
            kb = pair_dists[k].shape[1]
            _, cur = error(k)
            target = pair_dists[k].ravel() * num_rows
            need = np.rint(np.minimum(alpha * (target - cur), target)).astype(int)
            need[cur >= target] = 0
            # Over-full cells give up their excess (the authors' beta = 1), at most
            # what the under-full cells need.
            excess = np.rint(np.maximum(cur - target, 0.0)).astype(int)
            total = min(int(excess.sum()), int(need.sum()))
            if total == 0:
                continue
            cell = rows[:, a] * kb + rows[:, b]
            # Records sorted by cell, in random order within a cell: the first
            # excess[c] of cell c are its donors, and any of them a copy's source.
            by_cell = np.lexsort((rng.random(num_rows), cell))
            first = np.concatenate([[0], np.cumsum(cur)[:-1]])
            rank = np.empty(num_rows, np.int64)
            rank[by_cell] = np.arange(num_rows) - first[cell[by_cell]]
            donors = rng.permutation(np.flatnonzero(rank < excess[cell]))[:total]
            targets = rng.permutation(np.repeat(np.arange(need.size), need))[:total]
            dup = (rng.random(total) < duplicate_share) & (cur[targets] > 0)
            src = by_cell[
                first[targets[dup]]
                + np.floor(rng.random(dup.sum()) * cur[targets[dup]]).astype(int)
            ]
            rows[donors[dup]] = rows[src]
            rows[donors[~dup], a] = targets[~dup] // kb
            rows[donors[~dup], b] = targets[~dup] % kb
    return rows


def fit_privsyn(
    key: jax.Array,
    codes: np.ndarray,
    disc: PublicDiscretisation,
    *,
    noise_multiplier: float,
    num_rows: int,
    update_iterations: int = 50,
    sample_seed: int = 0,
    on_release: OnRelease | None = None,
) -> MarginalFit:
    """PrivSyn on bin codes: select pairs, measure, synthesise ``num_rows`` rows by GUM.

    Args:
      key: the secret noise key (from a ``DPSecret``; a public one makes the run not
        private).
      codes: [N, D] sensitive rows as bin codes of ``disc``; one row is the privacy
        unit (add/remove-one).
      disc: the public discretisation.
      noise_multiplier: sigma of the one Gaussian the run composes to (rho = 1 /
        (2 sigma^2), shared 0.1 / 0.1 / 0.8); 0 releases exact statistics (not
        private).
      num_rows: rows to synthesise (public).
      update_iterations: GUM's rounds.
      sample_seed: public seed of GUM (post-processing).
      on_release: called with (what, mechanism) before each noisy release.

    Returns:
      A `MarginalFit`: the synthesised codes, the 1-way then the selected 2-way
      measurements, every (what, mechanism) in order, and the selected pairs.

    Raises:
      ValueError: ``codes`` is not [N, D] for the D columns of ``disc``.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(disc.names):
        raise ValueError(
            f"expected codes [N, {len(disc.names)}]; got shape {codes.shape}."
        )
    names, sizes = disc.names, dict(zip(disc.names, disc.sizes))
    rho = math.inf if noise_multiplier == 0 else 1.0 / (2.0 * noise_multiplier**2)
    r_sel, r_one, r_pairs = (rho * w for w in PRIVSYN_SPLIT)
    mechanisms: list[tuple[str, GaussianMechanism | None]] = []

    def release(what: str, mech: GaussianMechanism | None) -> None:
        mechanisms.append((what, mech))
        if on_release is not None:
            on_release(what, mech)

    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    m_sel = _mech(r_sel, INDIF_SENSITIVITY * marginal_sensitivity(len(pairs)))
    release(f"PrivSyn: InDif scores of {len(pairs)} pairs (selection)", m_sel)
    scores = indif_scores(codes, disc, pairs)
    noisy = (
        scores
        if m_sel is None
        else np.asarray(
            m_sel.release(jax.random.fold_in(key, 1), scores.astype(np.float32)),
            np.float64,
        )
    )
    cells = [sizes[a] * sizes[b] for a, b in pairs]
    chosen = dense_marg_select(noisy, cells, r_pairs)
    selected = tuple(pairs[j] for j in chosen)

    one_way = [(n,) for n in names]
    m_one = _mech(r_one, marginal_sensitivity(len(one_way)))
    release(f"PrivSyn: {len(one_way)} 1-way marginals", m_one)
    meas = measure(
        jax.random.fold_in(key, 2),
        marginal_counts(codes, disc, one_way),
        one_way,
        m_one,
    )
    rhos = pair_rhos([cells[j] for j in chosen], r_pairs)
    # Pairs of equal size have equal rho: each such group is one Gaussian release of
    # its k count vectors (sensitivity sqrt(k), per-count std 1 / sqrt(2 rho_i)), which
    # is the same noise as k releases and one compile instead of k.
    by_size: dict[int, list[int]] = {}
    for i, j in enumerate(chosen):
        by_size.setdefault(cells[j], []).append(i)
    pair_meas: dict[int, Measurement] = {}
    for size, members in sorted(by_size.items()):
        group = [selected[i] for i in members]
        r = rhos[members[0]]
        mech = _mech(len(group) * r, marginal_sensitivity(len(group)))
        release(f"PrivSyn: {len(group)} 2-way marginals of {size} cells", mech)
        got = measure(
            jax.random.fold_in(key, 100 + size),
            marginal_counts(codes, disc, group),
            group,
            mech,
        )
        pair_meas.update(zip(members, got))
    meas += [pair_meas[i] for i in range(len(selected))]
    idx = {n: j for j, n in enumerate(names)}
    rows = gum(
        np.random.default_rng(sample_seed),
        [_distribution(m.noisy_counts) for m in meas[: len(names)]],
        [(idx[a], idx[b]) for a, b in selected],
        [
            _distribution(m.noisy_counts).reshape(sizes[m.clique[0]], -1)
            for m in meas[len(names) :]
        ],
        num_rows=num_rows,
        iterations=update_iterations,
    )
    return MarginalFit(rows, tuple(meas), tuple(mechanisms), selected=selected)
