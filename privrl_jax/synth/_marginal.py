"""Marginal-based DP synthesis of transition tables: PGM, MST and AIM, via ``mbi``.

A transition (s, a, r, s', done) is one row of a table whose columns are the coordinates
of s, a, r, s' and done. The baselines of PrivORL's Table I treat it exactly so:
discretise every column with bins fixed by public bounds, measure a set of low-order
marginals (count tables) with the Gaussian mechanism, fit a graphical model to the noisy
counts, sample discrete rows from it and map them back to numbers.

- **PGM** (McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and
  inference for differential privacy", https://arxiv.org/abs/1901.09136): a *fixed,
  public* set of marginals is measured once; the graphical model is the one whose
  marginals best fit the noisy counts.
- **MST** (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest: A scalable and
  general approach to differentially private synthetic data",
  https://arxiv.org/abs/2108.04978): measure every 1-way marginal, *select* a maximum
  spanning tree of 2-way marginals by how badly the 1-way product explains them, then
  measure the tree's 2-way marginals.
- **AIM** (McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative
  Mechanism for Differentially Private Synthetic Data", https://arxiv.org/abs/2201.12677):
  measure every 1-way marginal, then repeatedly pick the marginal the current model
  gets most wrong (net of the noise a measurement would add) with the exponential
  mechanism, measure it, re-fit; the budget per round grows when a measurement stops
  changing the model (:func:`fit_aim`).

The estimation of the graphical model and the sampling from it are ``mbi``'s
(Private-PGM 2.x, the optional extra ``pip install -e ".[baselines]"``), imported only
when a model is fitted, so this module loads without it; the discretisation, the counts
and their sensitivity, the selection and all accounting are ours and run without it.

What runs where: everything here is host-side NumPy except the noise (our
``privacy.GaussianMechanism``, JAX) and ``mbi``'s estimation (JAX).

Privacy. The unit is one transition (one row) under add/remove-one. Adding or removing a
row adds or removes one count in exactly one cell of every marginal, so the
concatenation of k measured count vectors moves by exactly sqrt(k) in L2
(:func:`marginal_sensitivity`). Each measurement is one ``GaussianMechanism`` of that
sensitivity; its ``GaussianDpEvent`` is what a ledger records, and every epsilon comes
from dp-accounting. MST's selection is *not* the
exponential mechanism of the original: it releases every candidate pair's score with one
more Gaussian mechanism (each score moves by at most 1, so the vector of P scores by at
most sqrt(P)) and picks the tree from the noisy scores, which is post-processing. That
keeps every event a ``GaussianDpEvent``, which dp-accounting composes exactly under RDP
and PLD, at the price of a noisier selection than the exponential mechanism's for the
same rho. AIM keeps the original's exponential mechanism
(``privacy.ExponentialMechanism``): an epsilon-DP selection whose privacy loss has
bounded range, hence epsilon^2 / 8-zCDP (Cesar & Rogers 2021), recorded as a
``ZCDpEvent``. dp-accounting's RDP accountant composes it with the Gaussian events
exactly (both are linear in the Renyi order); its PLD accountant does not take it, so
AIM runs account under RDP only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Callable, Sequence

import jax
import numpy as np

from privrl_jax import data
from privrl_jax.privacy import ExponentialMechanism, GaussianMechanism

Clique = tuple[str, ...]
Mechanism = GaussianMechanism | ExponentialMechanism
# Called with (what, mechanism) just *before* each noisy release, so a ledger records
# (and a budget guard may refuse) every release before it exists; mechanism None: a
# noiseless release. Only AIM's selections are exponential mechanisms.
OnRelease = Callable[[str, "Mechanism | None"], None]


# --------------------------------------------------------------------------------- bins
@dataclasses.dataclass(frozen=True, kw_only=True)
class ColumnBins:
    """How one column is discretised: equal-width bins on public bounds, or values.

    Attributes:
      name: the column's name (an ``mbi`` attribute).
      low: the public lower bound of a continuous column (None for a discrete one).
      high: the public upper bound of a continuous column (None for a discrete one).
      num_bins: number of equal-width bins on [low, high]; values outside are put in the
        edge bins.
      values: the values of a discrete column (e.g. ``(0.0, 1.0)`` for done), None
        otherwise.
    """

    name: str
    low: float | None = None
    high: float | None = None
    num_bins: int | None = None
    values: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.values is not None:
            if (
                len(self.values) < 1
                or self.low is not None
                or self.num_bins is not None
            ):
                raise ValueError(
                    f"column {self.name}: give either values or (low, high, num_bins)."
                )
            object.__setattr__(self, "values", tuple(float(v) for v in self.values))
            return
        if self.low is None or self.high is None or self.num_bins is None:
            raise ValueError(
                f"column {self.name}: a continuous column needs low, high and num_bins."
            )
        if not (
            math.isfinite(self.low)
            and math.isfinite(self.high)
            and self.low < self.high
        ):
            raise ValueError(
                f"column {self.name}: bounds must be finite with low < high; got "
                f"[{self.low}, {self.high}]."
            )
        if (
            isinstance(self.num_bins, bool)
            or not isinstance(self.num_bins, int)
            or self.num_bins < 1
        ):
            raise ValueError(
                f"column {self.name}: num_bins must be an int >= 1; got "
                f"{self.num_bins!r}."
            )
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))

    @property
    def size(self) -> int:
        """Number of discrete values of the column."""
        return len(self.values) if self.values is not None else int(self.num_bins)

    @property
    def edges(self) -> np.ndarray | None:
        """The num_bins + 1 bin edges of a continuous column (None if discrete)."""
        if self.values is not None:
            return None
        return np.linspace(self.low, self.high, self.num_bins + 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PublicDiscretisation:
    """The bins of every column of a table, built from public bounds only.

    Nothing here is fitted on data: the bins are a function of declared bounds, so they
    reveal nothing about the sensitive rows and need no privacy budget (docs/design.md,
    contract 5). A value outside its bounds is put in the nearest edge bin; that
    clipping is itself data-independent.
    """

    columns: tuple[ColumnBins, ...]

    def __post_init__(self):
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"column names must be unique and non-empty; got {names}.")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.columns)

    def discretise(self, table: np.ndarray) -> np.ndarray:
        """Maps float rows to bin codes; values outside the bounds go to the edge bins.

        A discrete column's value maps to the index of its nearest declared value.

        Args:
          table: [N, D] float rows, columns in ``names`` order.

        Returns:
          [N, D] int32 bin codes.

        Raises:
          ValueError: a table of the wrong shape, or holding NaN or inf.
        """
        table = np.asarray(table, np.float64)
        if table.ndim != 2 or table.shape[1] != len(self.columns):
            raise ValueError(
                f"expected a table [N, {len(self.columns)}]; got shape {table.shape}."
            )
        if not np.isfinite(table).all():
            raise ValueError("the table holds NaN or inf; clean the transitions first.")
        codes = np.empty(table.shape, np.int32)
        for j, col in enumerate(self.columns):
            x = table[:, j]
            if col.values is not None:
                codes[:, j] = np.abs(x[:, None] - np.asarray(col.values)[None]).argmin(
                    axis=1
                )
            else:
                pos = np.floor((x - col.low) / (col.high - col.low) * col.num_bins)
                codes[:, j] = np.clip(pos, 0, col.num_bins - 1)
        return codes

    def undiscretise(self, key: jax.Array, codes: np.ndarray) -> np.ndarray:
        """Maps bin codes back to float rows, uniform within each continuous bin.

        Uniform within the bin, not the bin's midpoint: midpoints would put every
        synthetic value on a lattice of atoms, which the KS marginal score and the
        sliced Wasserstein distance penalise although it is an artefact of the decoding;
        the uniform draw is the density the histogram itself describes. The draw is
        public randomness (post-processing).

        Args:
          key: public PRNG key of the within-bin draws.
          codes: [N, D] bin codes.

        Returns:
          [N, D] float64 rows; a discrete column gets its declared values.
        """
        codes = np.asarray(codes)
        u = np.asarray(
            jax.random.uniform(key, codes.shape, dtype=jax.numpy.float32), np.float64
        )
        out = np.empty(codes.shape, np.float64)
        for j, col in enumerate(self.columns):
            if col.values is not None:
                out[:, j] = np.asarray(col.values)[codes[:, j]]
            else:
                width = (col.high - col.low) / col.num_bins
                out[:, j] = col.low + (codes[:, j] + u[:, j]) * width
        return out


def transition_columns(obs_dim: int, act_dim: int) -> tuple[str, ...]:
    """Column names of a transition table: obs*, act*, reward, next_obs*, terminal.

    Args:
      obs_dim: state dimension.
      act_dim: action dimension.

    Returns:
      The 2 obs_dim + act_dim + 2 names in table order.
    """
    return (
        *(f"obs{i}" for i in range(obs_dim)),
        *(f"act{j}" for j in range(act_dim)),
        "reward",
        *(f"next_obs{i}" for i in range(obs_dim)),
        "terminal",
    )


def transition_discretisation(
    *,
    obs_low: Sequence[float],
    obs_high: Sequence[float],
    act_low: Sequence[float],
    act_high: Sequence[float],
    reward_range: tuple[float, float],
    obs_bins: int | Sequence[int],
    act_bins: int,
    reward_bins: int,
    next_obs_delta_bound: Sequence[float] | None = None,
) -> PublicDiscretisation:
    """Builds the public bins of (s, a, r, s', done); s and s' share the state bounds.

    With ``next_obs_delta_bound`` (b_i > 0 per coordinate, declared from the task's
    physics, e.g. one step moves a maze ball at most dt * v_max), the ``next_obs``
    columns hold s'_i - s_i on [-b_i, b_i] instead of s'_i (use ``transition_table(...,
    next_obs_delta=True)``): bins sized to one step's change, where s' binned on the
    whole space and decoded apart from s would make s' - s mostly decoding noise.

    Args:
      obs_low: [obs_dim] lower bounds of the observation space (e.g. the env's
        ``observation_space``), never the data's range.
      obs_high: [obs_dim] upper bounds of the observation space.
      act_low: [act_dim] lower bounds of the action space.
      act_high: [act_dim] upper bounds of the action space.
      reward_range: declared (low, high) of the reward (the task's definition; e.g. (0,
        1) for the dense maze reward exp(-distance)).
      obs_bins: bins per observation coordinate (one int, or one per coordinate); the
        next-state columns use the same counts.
      act_bins: bins per action coordinate.
      reward_bins: bins of the reward.
      next_obs_delta_bound: [obs_dim] positive bounds b_i of s'_i - s_i, or None to
        bin s' on the observation bounds.

    Returns:
      The `PublicDiscretisation` of the :func:`transition_columns`; ``terminal`` is
      discrete with values (0, 1).

    Raises:
      ValueError: bounds of mismatched shapes or invalid (not finite, low >= high), a
        wrong number of ``obs_bins`` or ``next_obs_delta_bound`` entries, a bound b_i
        <= 0, or a bin count < 1.
    """
    obs_low, obs_high = np.asarray(obs_low, float), np.asarray(obs_high, float)
    act_low, act_high = np.asarray(act_low, float), np.asarray(act_high, float)
    if obs_low.shape != obs_high.shape or act_low.shape != act_high.shape:
        raise ValueError("low and high bounds must have the same shape.")
    ob = (
        [int(obs_bins)] * obs_low.size
        if np.isscalar(obs_bins)
        else [int(b) for b in obs_bins]
    )
    if len(ob) != obs_low.size:
        raise ValueError(
            f"obs_bins has {len(ob)} entries for {obs_low.size} observation "
            "coordinates."
        )
    names = transition_columns(obs_low.size, act_low.size)
    o, a = obs_low.size, act_low.size
    obs = lambda i, name: ColumnBins(
        name=name, low=obs_low[i], high=obs_high[i], num_bins=ob[i]
    )  # noqa: E731
    cols = [obs(i, names[i]) for i in range(o)]
    cols += [
        ColumnBins(
            name=names[o + j], low=act_low[j], high=act_high[j], num_bins=act_bins
        )
        for j in range(a)
    ]
    cols.append(
        ColumnBins(
            name="reward",
            low=reward_range[0],
            high=reward_range[1],
            num_bins=reward_bins,
        )
    )
    if next_obs_delta_bound is None:
        cols += [obs(i, names[o + a + 1 + i]) for i in range(o)]
    else:
        b = np.asarray(next_obs_delta_bound, float)
        if b.shape != (o,) or not (b > 0).all():
            raise ValueError(
                f"next_obs_delta_bound needs {o} positive numbers; got {list(b)}."
            )
        cols += [
            ColumnBins(name=names[o + a + 1 + i], low=-b[i], high=b[i], num_bins=ob[i])
            for i in range(o)
        ]
    cols.append(ColumnBins(name="terminal", values=(0.0, 1.0)))
    return PublicDiscretisation(columns=tuple(cols))


def transition_table(
    transitions: data.Transitions, *, next_obs_delta: bool = False
) -> np.ndarray:
    """Flattens transitions into a float table in :func:`transition_columns` order.

    Args:
      transitions: [N] transitions (timeouts are dropped).
      next_obs_delta: store s' - s in the next-state columns instead of s'.

    Returns:
      [N, 2 obs_dim + act_dim + 2] float64 table.
    """
    t = jax.tree_util.tree_map(np.asarray, transitions)
    nxt = (
        t.next_observations - t.observations if next_obs_delta else t.next_observations
    )
    return np.concatenate(
        [t.observations, t.actions, t.rewards[:, None], nxt, t.terminals[:, None]],
        axis=1,
    ).astype(np.float64)


def table_transitions(
    table: np.ndarray, obs_dim: int, act_dim: int, *, next_obs_delta: bool = False
) -> data.Transitions:
    """Turns a table back into transitions; inverse of :func:`transition_table`.

    Args:
      table: [N, 2 obs_dim + act_dim + 2] rows in :func:`transition_columns` order.
      obs_dim: state dimension.
      act_dim: action dimension.
      next_obs_delta: the next-state columns hold s' - s (s is added back).

    Returns:
      float32 NumPy `Transitions` [N] with ``timeouts`` = 0, as PrivORL-n's release.
    """
    t = np.asarray(table, np.float64)
    o, a = obs_dim, act_dim
    terminals = t[:, 2 * o + a + 1].astype(np.float32)
    nxt = t[:, o + a + 1 : 2 * o + a + 1] + (t[:, :o] if next_obs_delta else 0.0)
    return data.Transitions(
        observations=t[:, :o].astype(np.float32),
        actions=t[:, o : o + a].astype(np.float32),
        rewards=t[:, o + a].astype(np.float32),
        next_observations=nxt.astype(np.float32),
        terminals=terminals,
        timeouts=np.zeros_like(terminals),
    )


# ---------------------------------------------------------------------------- marginals
def default_transition_cliques(obs_dim: int, act_dim: int) -> tuple[Clique, ...]:
    """PGM's fixed public marginal set: every 1-way marginal and a tree of 2-way ones.

    The tree is chosen from the form of a transition, not from data: the state's
    coordinates in a chain (obs_i, obs_{i+1}); each coordinate with its successor
    (obs_i, next_obs_i); action j with the j-th of the last ``act_dim`` next-state
    coordinates (in a point mass, and in many control tasks, the action drives the
    velocities, stored last); reward and done with the first next-state coordinate. A
    tree keeps ``mbi``'s junction tree as small as the cliques themselves. PrivORL does
    not say which marginals its PGM baseline measured.

    Args:
      obs_dim: state dimension (>= 1).
      act_dim: action dimension.

    Returns:
      The cliques (tuples of column names of :func:`transition_columns`): the
      2 obs_dim + act_dim + 2 one-way ones, then the pairs.
    """
    names = transition_columns(obs_dim, act_dim)
    obs = lambda i: f"obs{i}"  # noqa: E731
    nxt = lambda i: f"next_obs{i}"  # noqa: E731
    pairs = [(obs(i), obs(i + 1)) for i in range(obs_dim - 1)]
    pairs += [(obs(i), nxt(i)) for i in range(obs_dim)]
    pairs += [
        (f"act{j}", nxt(max(0, obs_dim - act_dim) + j % obs_dim))
        for j in range(act_dim)
    ]
    pairs += [("reward", nxt(0)), ("terminal", nxt(0))]
    return tuple((n,) for n in names) + tuple(pairs)


def marginal_counts(
    codes: np.ndarray, disc: PublicDiscretisation, cliques: Sequence[Clique]
) -> list[np.ndarray]:
    """The flattened count table of each clique (C order over the clique's columns).

    Args:
      codes: [N, D] bin codes from ``disc.discretise``.
      disc: the discretisation (names and sizes of the columns).
      cliques: column-name tuples.

    Returns:
      One float64 vector per clique, of length prod(sizes of its columns), summing to N.
    """
    codes = np.asarray(codes)
    index = {n: j for j, n in enumerate(disc.names)}
    out = []
    for cl in cliques:
        cols = [index[n] for n in cl]
        shape = tuple(disc.sizes[j] for j in cols)
        flat = np.ravel_multi_index(tuple(codes[:, j] for j in cols), shape)
        out.append(np.bincount(flat, minlength=math.prod(shape)).astype(np.float64))
    return out


def marginal_sensitivity(num_marginals: int) -> float:
    """L2 sensitivity of k concatenated count vectors under add/remove-one row: sqrt(k).

    One row is one count in one cell of each marginal, so adding or removing it moves
    each count vector by exactly 1 in L2, and all k together by sqrt(k). (Under
    replace-one it would be sqrt(2k): two cells of each marginal.) Attained by every
    row, not only a worst case.
    """
    if num_marginals < 1:
        raise ValueError(f"num_marginals must be >= 1; got {num_marginals}.")
    return math.sqrt(num_marginals)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A released marginal: its clique, noisy counts and the noise std of each count."""

    clique: Clique
    noisy_counts: np.ndarray
    noise_std: float


def measure(
    key: jax.Array,
    counts: Sequence[np.ndarray],
    cliques: Sequence[Clique],
    mechanism: GaussianMechanism | None,
) -> list[Measurement]:
    """Releases the concatenated count vectors with one Gaussian mechanism.

    ``mechanism.l2_sensitivity`` must be :func:`marginal_sensitivity` of
    ``len(counts)``; every count then gets noise of std sigma * sqrt(k) (k marginals
    with sensitivity 1 each, each rho_i = 1 / (2 k sigma^2), together rho = 1 / (2
    sigma^2): the mechanism's own rho).

    Args:
      key: the secret noise key.
      counts: one flattened count vector per clique (:func:`marginal_counts`).
      cliques: the cliques, in the order of ``counts``.
      mechanism: the Gaussian mechanism, or None for an exact (not private) release.

    Returns:
      One `Measurement` per clique (noise std 0 when ``mechanism`` is None).

    Raises:
      ValueError: no counts, a count vector per clique missing, or a mechanism whose
        sensitivity is not the one these counts have.
    """
    if len(counts) != len(cliques) or not counts:
        raise ValueError("give one count vector per clique (at least one).")
    if mechanism is not None:
        need = marginal_sensitivity(len(counts))
        if not math.isclose(mechanism.l2_sensitivity, need, rel_tol=1e-12):
            raise ValueError(
                f"{len(counts)} marginals have L2 sensitivity {need:.6g}; the "
                "mechanism "
                f"assumes {mechanism.l2_sensitivity:.6g}."
            )
    flat = np.concatenate([np.asarray(c, np.float64) for c in counts])
    if mechanism is None:
        noisy, std = flat, 0.0
    else:
        noisy = np.asarray(
            mechanism.release(key, jax.numpy.asarray(flat, jax.numpy.float32)),
            np.float64,
        )
        std = mechanism.noise_std
    out, start = [], 0
    for cl, c in zip(cliques, counts):
        out.append(Measurement(tuple(cl), noisy[start : start + c.size], std))
        start += c.size
    return out


# ------------------------------------------------------------------------ MST selection
def pair_scores(
    codes: np.ndarray,
    disc: PublicDiscretisation,
    one_way: Sequence[Measurement],
    pairs: Sequence[Clique],
) -> np.ndarray:
    """MST's score of each candidate pair: L1 error of the independent model's counts.

    score(i, j) = || C_ij - N_hat p_i (x) p_j ||_1, with C_ij the true 2-way counts and
    p_i the (clipped, normalised) *noisy* 1-way marginals, N_hat their mean total: a
    function of the data and of earlier releases only. One row moves C_ij by one count
    in one cell, so each score by at most 1 (triangle inequality) and the vector of P
    scores by at most sqrt(P) in L2.

    Args:
      codes: [N, D] sensitive bin codes.
      disc: the public discretisation.
      one_way: the released 1-way marginals, one per column.
      pairs: the P candidate pairs.

    Returns:
      [P] float64 scores (not yet private: release them with :func:`release_scores`).
    """
    probs = {}
    totals = []
    for m in one_way:
        y = np.clip(m.noisy_counts, 0.0, None)
        totals.append(float(np.sum(m.noisy_counts)))
        probs[m.clique[0]] = (
            y / y.sum() if y.sum() > 0 else np.full(y.size, 1.0 / y.size)
        )
    n_hat = max(1.0, float(np.mean(totals)))
    counts = marginal_counts(codes, disc, pairs)
    return np.array(
        [
            np.abs(c - n_hat * np.outer(probs[a], probs[b]).ravel()).sum()
            for c, (a, b) in zip(counts, pairs)
        ]
    )


def release_scores(
    key: jax.Array, scores: np.ndarray, mechanism: GaussianMechanism | None
) -> np.ndarray:
    """Releases the P pair scores with Gaussian noise of sensitivity sqrt(P).

    Args:
      key: the secret noise key.
      scores: [P] pair scores (:func:`pair_scores`).
      mechanism: the Gaussian mechanism, or None for an exact (not private) release.

    Returns:
      [P] float64 noisy scores.

    Raises:
      ValueError: the mechanism assumes another sensitivity than the scores' sqrt(P).
    """
    scores = np.asarray(scores, np.float64)
    if mechanism is None:
        return scores
    need = marginal_sensitivity(scores.size)  # each score moves by <= 1
    if not math.isclose(mechanism.l2_sensitivity, need, rel_tol=1e-12):
        raise ValueError(
            f"{scores.size} scores have L2 sensitivity {need:.6g}; the mechanism "
            f"assumes {mechanism.l2_sensitivity:.6g}."
        )
    return np.asarray(
        mechanism.release(key, jax.numpy.asarray(scores, jax.numpy.float32)), np.float64
    )


def max_spanning_tree(
    names: Sequence[str], pairs: Sequence[Clique], weights: np.ndarray
) -> tuple[Clique, ...]:
    """Kruskal's maximum spanning tree of the named columns.

    Args:
      names: the columns (the tree's nodes).
      pairs: candidate edges.
      weights: [len(pairs)] edge weights; ties go to the earlier pair.

    Returns:
      The tree's edges in the order taken; a forest when the pairs do not connect
      every name.
    """
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    tree = []
    for k in np.argsort(-np.asarray(weights), kind="stable"):
        a, b = pairs[k]
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
            tree.append((a, b))
    return tuple(tree)


# ---------------------------------------------------------------------------------- mbi
def require_mbi():
    """Imports ``mbi`` on first use (the optional ``baselines`` extra).

    Returns:
      The ``mbi`` module.

    Raises:
      ImportError: ``mbi`` is not installed; the message says how to install it.
    """
    try:
        with warnings.catch_warnings():
            # mbi warns at import that JAX runs in float32; the tables here are < 1e6
            # rows, where its own note says float32 estimation is fine. Turning on x64
            # globally would change every other computation of the process.
            warnings.simplefilter("ignore")
            import mbi
            import mbi.extensions
    except ImportError as e:
        raise ImportError(
            "the marginal-based baselines need mbi (Private-PGM): pip install -e "
            '".[baselines]" '
            "(or pip install mbi==2.0.0)."
        ) from e
    return mbi


def _linear_measurements(mbi, measurements: Sequence[Measurement]) -> list:
    """Converts measurements to mbi's L2-loss measurements weighted by 1 / their std.

    Exact counts of a noiseless run get weight 1.
    """
    return [
        mbi.LinearMeasurement(
            np.asarray(m.noisy_counts, np.float32),
            m.clique,
            stddev=m.noise_std if m.noise_std > 0 else 1.0,
        )
        for m in measurements
    ]


def estimate_model(
    disc: PublicDiscretisation,
    measurements: Sequence[Measurement],
    *,
    iters: int,
    warm_start=None,
):
    """``mbi``'s graphical model fitted to the measurements (an ``mbi`` model).

    The estimator is mbi's mirror descent (McKenna et al. 2019, Algorithm 1) on the L2
    loss, each measurement weighted by 1 / its noise std; the total is mbi's
    minimum-variance estimate from the noisy counts, never the private N.
    ``warm_start`` (an earlier model) starts from its potentials, as AIM re-estimates
    after each new measurement.
    """
    mbi = require_mbi()
    domain = mbi.Domain(disc.names, disc.sizes)
    return mbi.estimation.MirrorDescent().estimate(
        domain,
        _linear_measurements(mbi, measurements),
        iters=iters,
        warm_start=warm_start,
    )


def sample_model(
    model, disc: PublicDiscretisation, *, num_rows: int, seed: int
) -> np.ndarray:
    """Samples rows of codes from an mbi model with a public seed.

    The model is already a DP release, so how it is sampled is post-processing.

    Args:
      model: a fitted mbi model (``MarkovRandomField``).
      disc: the discretisation (column order of the output).
      num_rows: rows to sample.
      seed: public seed of NumPy's generator for this call (the caller's global
        stream is restored).

    Returns:
      [num_rows, D] int32 bin codes.
    """
    # mbi's NumPy sampler (randomized rounding, its default) draws from NumPy's global
    # generator: seed it for this call and restore it, so the caller's global stream is
    # left as it was. (mbi.extensions.synthetic_data takes a seed, but compiles one
    # program per column: 90 s on our 2-core CPU for a 12-column table, against 8 s
    # here.)
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        rows = model.synthetic_data(num_rows)
    finally:
        np.random.set_state(state)
    return np.stack([np.asarray(rows.data[n]) for n in disc.names], axis=1).astype(
        np.int32
    )


def estimate_and_sample(
    disc: PublicDiscretisation,
    measurements: Sequence[Measurement],
    *,
    num_rows: int,
    iters: int,
    seed: int,
) -> np.ndarray:
    """Fits ``mbi``'s graphical model to the measurements and samples it.

    :func:`estimate_model`, then :func:`sample_model`.

    Args:
      disc: the public discretisation.
      measurements: the released marginals.
      num_rows: rows to sample.
      iters: mirror-descent iterations.
      seed: public seed of the sampler.

    Returns:
      [num_rows, D] int32 bin codes.
    """
    model = estimate_model(disc, measurements, iters=iters)
    return sample_model(model, disc, num_rows=num_rows, seed=seed)


# ----------------------------------------------------------------------- the mechanisms
@dataclasses.dataclass(frozen=True)
class MarginalFit:
    """What a marginal-based synthesizer released and sampled.

    Attributes:
      codes: [num_rows, D] sampled bin codes.
      measurements: every noisy marginal released (the DP release the model is fitted
        on).
      mechanisms: (what, mechanism or None) of each noisy release, in order.
      selected: MST's selected 2-way cliques, AIM's selected cliques in order (empty
        for PGM).
    """

    codes: np.ndarray
    measurements: tuple[Measurement, ...]
    mechanisms: tuple[tuple[str, Mechanism | None], ...]
    selected: tuple[Clique, ...] = ()


def _release(on_release: OnRelease | None, what: str, mech: Mechanism | None) -> None:
    if on_release is not None:
        on_release(what, mech)


def _with_sensitivity(
    mech: GaussianMechanism | None, k: int
) -> GaussianMechanism | None:
    """The mechanism of noise multiplier ``mech.noise_multiplier`` on k blocks.

    Each block has sensitivity 1, so together sqrt(k).
    """
    if mech is None:
        return None
    return dataclasses.replace(mech, l2_sensitivity=marginal_sensitivity(k))


def fit_pgm(
    key: jax.Array,
    codes: np.ndarray,
    disc: PublicDiscretisation,
    *,
    cliques: Sequence[Clique],
    noise_multiplier: float,
    num_rows: int,
    iters: int = 1000,
    sample_seed: int = 0,
    on_release: OnRelease | None = None,
) -> MarginalFit:
    """PGM with a fixed public marginal set (McKenna et al. 2019).

    Measures all marginals in one release, estimates the graphical model, samples it.

    Args:
      key: the secret noise key (from a ``DPSecret``; a public one makes the run not
        private).
      codes: [N, D] sensitive rows as bin codes; one row is the privacy unit
        (add/remove-one).
      disc: the public discretisation.
      cliques: the public marginal set (e.g. :func:`default_transition_cliques`).
      noise_multiplier: sigma of the one Gaussian release of all k marginals (noise std
        sigma sqrt(k) per count); 0 releases exact counts (not private).
      num_rows: rows to sample (public).
      iters: mirror-descent iterations of mbi's estimator.
      sample_seed: public seed of mbi's sampler.
      on_release: called before the release (e.g. to check and record it in a ledger).

    Returns:
      A `MarginalFit` with ``num_rows`` sampled codes, the k measurements and the one
      mechanism; ``selected`` is empty.

    Raises:
      ImportError: ``mbi`` is not installed.
    """
    mech = (
        None
        if noise_multiplier == 0
        else _with_sensitivity(
            GaussianMechanism(l2_sensitivity=1.0, noise_multiplier=noise_multiplier),
            len(cliques),
        )
    )
    what = f"PGM: {len(cliques)} marginals"
    _release(on_release, what, mech)
    meas = measure(key, marginal_counts(codes, disc, cliques), cliques, mech)
    rows = estimate_and_sample(
        disc, meas, num_rows=num_rows, iters=iters, seed=sample_seed
    )
    return MarginalFit(rows, tuple(meas), ((what, mech),))


# MST splits rho into thirds: 1-way marginals, selection, the tree's 2-way marginals (as
# in the NIST-contest MST; McKenna et al. 2021, Sec. 4).
MST_SPLIT = (1 / 3, 1 / 3, 1 / 3)


def mst_noise_multipliers(
    noise_multiplier: float, split: Sequence[float] = MST_SPLIT
) -> tuple[float, ...]:
    """Per-stage sigmas whose composition is one Gaussian of ``noise_multiplier``.

    Stage i gets the share w_i of rho = 1 / (2 sigma^2), i.e. sigma_i = sigma /
    sqrt(w_i); then sum_i sigma_i^-2 = sigma^-2 (the effective noise multiplier of
    the three is sigma), so a sigma calibrated for one Gaussian release is the run's
    sigma for the whole MST.

    Args:
      noise_multiplier: sigma of the whole run; 0 for no noise.
      split: the three shares of rho, positive and summing to 1.

    Returns:
      The three sigmas (all 0 when ``noise_multiplier`` is 0).

    Raises:
      ValueError: ``split`` is not three positive shares summing to 1.
    """
    split = tuple(float(w) for w in split)
    if (
        len(split) != 3
        or any(w <= 0 for w in split)
        or not math.isclose(sum(split), 1.0)
    ):
        raise ValueError(
            f"the MST split must be three positive shares summing to 1; got {split}."
        )
    if noise_multiplier == 0:
        return (0.0, 0.0, 0.0)
    return tuple(noise_multiplier / math.sqrt(w) for w in split)


def fit_mst(
    key: jax.Array,
    codes: np.ndarray,
    disc: PublicDiscretisation,
    *,
    noise_multiplier: float,
    num_rows: int,
    iters: int = 1000,
    sample_seed: int = 0,
    split: Sequence[float] = MST_SPLIT,
    on_release: OnRelease | None = None,
) -> MarginalFit:
    """MST (McKenna et al. 2021) with a Gaussian-noisy-scores selection.

    Three releases, each one ``GaussianMechanism`` (sigmas from
    :func:`mst_noise_multipliers`): (1) every 1-way marginal; (2) the score of every
    pair (:func:`pair_scores`, sensitivity sqrt(P)), the maximum spanning tree of the
    noisy scores being post-processing; (3) the tree's 2-way marginals. The original
    selects with the exponential mechanism; a Gaussian release of the scores keeps
    every event of the run a ``GaussianDpEvent`` (see the module docstring).

    Args:
      key: the secret noise key (from a ``DPSecret``; a public one makes the run not
        private).
      codes: [N, D] sensitive rows as bin codes; one row is the privacy unit
        (add/remove-one).
      disc: the public discretisation.
      noise_multiplier: sigma of the one Gaussian the three releases compose to; 0
        releases exact statistics (not private).
      num_rows: rows to sample (public).
      iters: mirror-descent iterations of mbi's estimator.
      sample_seed: public seed of mbi's sampler.
      split: the shares of rho of the three releases.
      on_release: called before each release (e.g. to check and record it in a ledger).

    Returns:
      A `MarginalFit`: the sampled codes, the 1-way and tree measurements, the three
      mechanisms, and the tree's pairs as ``selected``.

    Raises:
      ValueError: an invalid ``split``.
      ImportError: ``mbi`` is not installed.
    """
    s1, s2, s3 = mst_noise_multipliers(noise_multiplier, split)
    names = disc.names
    one_way = [(n,) for n in names]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    mk = lambda s, k: (
        None
        if s == 0
        else GaussianMechanism(
            l2_sensitivity=marginal_sensitivity(k),  # noqa: E731
            noise_multiplier=s,
        )
    )
    m1, m2 = mk(s1, len(one_way)), mk(s2, len(pairs))
    w1 = f"MST: {len(one_way)} 1-way marginals"
    _release(on_release, w1, m1)
    meas1 = measure(
        jax.random.fold_in(key, 1), marginal_counts(codes, disc, one_way), one_way, m1
    )
    w2 = f"MST: scores of {len(pairs)} pairs (selection)"
    _release(on_release, w2, m2)
    scores = pair_scores(codes, disc, meas1, pairs)
    noisy = release_scores(jax.random.fold_in(key, 2), scores, m2)
    tree = max_spanning_tree(names, pairs, noisy)
    m3 = mk(s3, len(tree))
    w3 = f"MST: {len(tree)} selected 2-way marginals"
    _release(on_release, w3, m3)
    meas3 = measure(
        jax.random.fold_in(key, 3), marginal_counts(codes, disc, tree), tree, m3
    )
    rows = estimate_and_sample(
        disc, [*meas1, *meas3], num_rows=num_rows, iters=iters, seed=sample_seed
    )
    return MarginalFit(
        rows, (*meas1, *meas3), ((w1, m1), (w2, m2), (w3, m3)), selected=tree
    )


# ---------------------------------------------------------------------------------- AIM
# AIM's split of each round's rho: 90% to the measurement, 10% to the selection
# (McKenna et al. 2022, Algorithm 2).
AIM_MEASURE_SHARE = 0.9
# E||noise||_1 / n of a Gaussian of std 1 per cell: sqrt(2 / pi).
_HALF_NORMAL_MEAN = math.sqrt(2.0 / math.pi)


def aim_candidates(
    names: Sequence[str], max_clique_size: int
) -> tuple[tuple[Clique, ...], np.ndarray]:
    """AIM's candidate cliques and weights for the workload of all k-way marginals.

    The workload W is every clique of k = ``max_clique_size`` columns (weight 1 each);
    the candidates are its downward closure (every clique of 1..k columns), and
    candidate r's weight is sum_{q in W} |r & q|: how many workload columns it informs
    (AIM, Sec. 4). Public: a function of the column names only.

    Args:
      names: the column names.
      max_clique_size: k, in [1, len(names)].

    Returns:
      The candidate cliques (by size, then in ``itertools.combinations`` order) and
      their float weights.

    Raises:
      ValueError: ``max_clique_size`` outside [1, len(names)].
    """
    k = int(max_clique_size)
    if not 1 <= k <= len(names):
        raise ValueError(
            f"max_clique_size must be in [1, {len(names)}] (the number of columns); "
            f"got {max_clique_size!r}."
        )
    workload = [set(q) for q in itertools.combinations(names, k)]
    cands = tuple(c for j in range(1, k + 1) for c in itertools.combinations(names, j))
    weights = np.array([sum(len(set(c) & q) for q in workload) for c in cands], float)
    return cands, weights


def aim_scores(
    counts: Sequence[np.ndarray],
    estimates: Sequence[np.ndarray],
    weights: np.ndarray,
    noise_std: float,
) -> np.ndarray:
    """AIM's quality score of each candidate clique (McKenna et al. 2022, Sec. 4).

        q_r = w_r * (||x_r - x_hat_r||_1 - sqrt(2 / pi) * noise_std * n_r),

    x_r the data's counts, x_hat_r the current model's (a function of earlier
    releases), n_r the number of cells and noise_std the per-count noise std the
    measurement of r would get this round: the L1 error a measurement could remove,
    minus the L1 error its own noise would bring. One row moves x_r by one count in one
    cell, hence q_r by at most w_r (triangle inequality); the rest is data-independent.

    Args:
      counts: the data's flattened counts of each candidate.
      estimates: the model's counts of each candidate (:func:`model_marginal`).
      weights: [R] candidate weights (:func:`aim_candidates`).
      noise_std: per-count noise std of this round's measurement.

    Returns:
      [R] float64 scores.

    Raises:
      ValueError: the three inputs differ in length.
    """
    weights = np.asarray(weights, np.float64)
    if not len(counts) == len(estimates) == weights.size:
        raise ValueError("give one count vector, estimate and weight per candidate.")
    return np.array(
        [
            w * (np.abs(c - e).sum() - _HALF_NORMAL_MEAN * noise_std * c.size)
            for c, e, w in zip(counts, estimates, weights)
        ]
    )


def model_marginal(model, clique: Clique) -> np.ndarray:
    """An ``mbi`` model's counts on a clique, by variable elimination in NumPy.

    mbi's own ``project`` jits the elimination per clique and per model structure:
    a compile for each candidate, each AIM round (~1 s each on our CPU). The factors
    here are small (a tree of 2-way cliques), so NumPy's einsum costs milliseconds.
    Each factor is exponentiated after subtracting its maximum and each product is
    rescaled the same way (the constants cancel in the final normalisation).

    Args:
      model: a fitted mbi model.
      clique: column names.

    Returns:
      The counts, flattened in C order over the clique, summing to the model's total.

    Raises:
      ValueError: the model does not cover the clique.
    """
    clique = tuple(clique)
    factors = []
    for f in model.potentials.tables.values():
        v = np.asarray(f.values, np.float64)
        factors.append((tuple(f.domain.attributes), np.exp(v - v.max())))
    letters = {}
    for attrs, _ in factors:
        for x in attrs:
            letters.setdefault(x, chr(ord("a") + len(letters)))
    for x in clique:
        letters.setdefault(x, chr(ord("a") + len(letters)))
    sizes = dict(zip(model.domain.attributes, model.domain.shape))

    def product(group, keep):
        spec = ",".join("".join(letters[x] for x in attrs) for attrs, _ in group)
        out = np.einsum(
            f"{spec}->{''.join(letters[x] for x in keep)}", *(t for _, t in group)
        )
        return keep, out / max(out.max(), np.finfo(np.float64).tiny)

    elim = {x for attrs, _ in factors for x in attrs} - set(clique)
    while elim:
        # Greedy: eliminate the variable whose product factor is smallest.
        def cost(z):
            scope = {x for attrs, _ in factors if z in attrs for x in attrs}
            return math.prod(sizes[x] for x in scope)

        z = min(sorted(elim), key=cost)
        group = [f for f in factors if z in f[0]]
        factors = [f for f in factors if z not in f[0]]
        keep = tuple(sorted({x for attrs, _ in group for x in attrs} - {z}))
        factors.append(product(group, keep))
        elim.discard(z)
    _, joint = product(factors, clique) if factors else (clique, None)
    if joint is None or any(x not in letters for x in clique):
        raise ValueError(f"the model does not cover {clique}.")
    # Attributes of the clique absent from every factor are uniform.
    joint = np.broadcast_to(joint, tuple(sizes[x] for x in clique)).astype(np.float64)
    return (float(model.total) * joint / joint.sum()).ravel()


def fit_aim(
    key: jax.Array,
    codes: np.ndarray,
    disc: PublicDiscretisation,
    *,
    noise_multiplier: float,
    num_rows: int,
    iters: int = 1000,
    sample_seed: int = 0,
    max_clique_size: int = 2,
    max_model_size: float = 20.0,
    rounds: int = 24,
    round_iters: int = 1000,
    on_release: OnRelease | None = None,
) -> MarginalFit:
    """AIM: adaptive, iterative selection and measurement of marginals.

    McKenna, Mullins, Sheldon & Miklau 2022, "AIM: An Adaptive and Iterative Mechanism
    for Differentially Private Synthetic Data", https://arxiv.org/abs/2201.12677.

    The budget is rho = 1 / (2 noise_multiplier^2), the zCDP of the one Gaussian the
    pipeline calibrated at the target (epsilon, delta); its RDP epsilon is the target.
    AIM first prices a round at rho / ``rounds`` (90% measurement, 10% selection) and:

    1. measures every 1-way marginal at a round's measurement noise (one
       ``GaussianMechanism`` of sensitivity sqrt(d));
    2. each round, among the candidates of :func:`aim_candidates` whose junction tree
       stays under ``max_model_size`` MB times the share of rho spent so far, selects
       one with the exponential mechanism (``privacy.ExponentialMechanism``, epsilon_t
       = sqrt(8 * 0.1 * rho_t), sensitivity max_r w_r) on :func:`aim_scores`, measures
       it with a Gaussian of rho 0.9 rho_t, and re-estimates the model warm-started
       (``round_iters`` mirror-descent steps);
    3. anneals: when the new measurement moved the model's marginal by less than its
       own expected noise, rho_t is multiplied by 4 (sigma halved, epsilon doubled);
    4. ends with a round that spends exactly the rho left, once less than two rounds'
       worth remains; then fits the model with ``iters`` steps and samples it.

    The selection's event is ``ZCDpEvent(epsilon_t^2 / 8)`` (the bounded-range bound
    of Cesar & Rogers 2021), each measurement's a ``GaussianDpEvent``; they compose to
    rho exactly.

    Args:
      key: the secret noise key (from a ``DPSecret``; a public one makes the run not
        private).
      codes: [N, D] sensitive rows as bin codes; one row is the privacy unit
        (add/remove-one).
      disc: the public discretisation of the d = D columns.
      noise_multiplier: sigma of the one Gaussian the run's rho equals; 0 runs the
        noiseless algorithm (greedy selection, exact counts, ``rounds - d`` rounds):
        not private.
      num_rows: rows to sample (public).
      iters: mirror-descent iterations of the final fit.
      sample_seed: public seed of mbi's sampler.
      max_clique_size: k of the workload of all k-way marginals.
      max_model_size: junction-tree size limit of the final model, in MB.
      rounds: rounds the budget is first divided into, > d.
      round_iters: mirror-descent iterations of each round's re-estimate.
      on_release: called before every selection and measurement is drawn.

    Returns:
      A `MarginalFit`: the sampled codes, every measurement, every (what, mechanism)
      in order, and the selected cliques in order.

    Raises:
      ValueError: ``rounds`` not an int > d, ``max_model_size`` <= 0, or an invalid
        ``max_clique_size``.
      ImportError: ``mbi`` is not installed.
    """
    names, d = disc.names, len(disc.names)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds <= d:
        raise ValueError(
            f"AIM's rounds must be an int > the {d} columns (the 1-way marginals are "
            f"priced as {d} rounds' measurements); got {rounds!r}."
        )
    if not max_model_size > 0:
        raise ValueError(f"max_model_size must be > 0 MB; got {max_model_size!r}.")
    mbi = require_mbi()
    domain = mbi.Domain(names, disc.sizes)
    cands, weights = aim_candidates(names, max_clique_size)
    counts = marginal_counts(codes, disc, cands)
    sensitivity = float(weights.max())
    private = noise_multiplier > 0
    rho = 0.5 / noise_multiplier**2 if private else math.inf
    rho_t = rho / rounds

    def gaussian(r: float, k: int) -> GaussianMechanism | None:
        if not private:
            return None
        return GaussianMechanism.from_zcdp(r, l2_sensitivity=marginal_sensitivity(k))

    one_way = [(n,) for n in names]
    used = d * AIM_MEASURE_SHARE * rho_t
    m1 = gaussian(used, d)
    w1 = f"AIM: {d} 1-way marginals"
    _release(on_release, w1, m1)
    index = {c: i for i, c in enumerate(cands)}
    meas = measure(
        jax.random.fold_in(key, 1), [counts[index[c]] for c in one_way], one_way, m1
    )
    mechanisms: list = [(w1, m1)]
    model = estimate_model(disc, meas, iters=round_iters)
    selected: list[Clique] = []
    t = 0
    done = False
    while not done:
        t += 1
        if private:
            if rho - used < 2 * rho_t:  # the last round: whatever is left
                rho_t, done = rho - used, True
            used = rho if done else used + rho_t
            std = 1.0 / math.sqrt(2 * AIM_MEASURE_SHARE * rho_t)
            share = used / rho
        else:
            done = t >= rounds - d
            std, share = 0.0, t / (rounds - d)
        # Only models that fit the size allowed so far (public: earlier cliques only).
        model_cliques = list({m.clique for m in meas})
        ok = [
            i
            for i, c in enumerate(cands)
            if any(set(c) <= set(m) for m in model_cliques)
            or mbi.junction_tree.hypothetical_model_size(domain, [*model_cliques, c])
            <= max_model_size * share
        ]
        est = [model_marginal(model, cands[i]) for i in ok]
        scores = aim_scores([counts[i] for i in ok], est, weights[ok], std)
        if private:
            em = ExponentialMechanism(
                epsilon=math.sqrt(8 * (1 - AIM_MEASURE_SHARE) * rho_t),
                sensitivity=sensitivity,
            )
            what = f"AIM round {t}: selection among {len(ok)} candidates"
            _release(on_release, what, em)
            mechanisms.append((what, em))
            pick = int(em.select(jax.random.fold_in(key, 2 * t), scores))
        else:
            mechanisms.append((f"AIM round {t}: greedy selection", None))
            pick = int(np.argmax(scores))
        cl = cands[ok[pick]]
        selected.append(cl)
        mech = gaussian(AIM_MEASURE_SHARE * rho_t, 1)
        what = f"AIM round {t}: marginal {'/'.join(cl)}"
        _release(on_release, what, mech)
        mechanisms.append((what, mech))
        meas += measure(
            jax.random.fold_in(key, 2 * t + 1), [counts[ok[pick]]], [cl], mech
        )
        before = est[pick]
        model = estimate_model(disc, meas, iters=round_iters, warm_start=model)
        moved = np.abs(model_marginal(model, cl) - before).sum()
        if private and moved <= _HALF_NORMAL_MEAN * std * before.size:
            rho_t *= 4.0  # sigma / 2, epsilon * 2 (AIM's annealing)
    model = estimate_model(disc, meas, iters=iters, warm_start=model)
    rows = sample_model(model, disc, num_rows=num_rows, seed=sample_seed)
    return MarginalFit(rows, tuple(meas), tuple(mechanisms), selected=tuple(selected))
