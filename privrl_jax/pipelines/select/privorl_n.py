"""``privrl select`` over a PrivORL-n grid: the synthesizer tuned on the sensitive data.

A candidate is a PrivORL-n configuration (e.g. a learning rate and a noise
multiplicity K, ``finetune.learning_rate`` and ``finetune.num_noise``); one run of it is
a whole PrivORL-n run (pre-training on public data, DP fine-tuning on the sensitive
transitions, synthesis) into ``checkpoints/select/runs/<run>/`` (secret: never
publish), then a DP score of its release on the sensitive data
(:func:`dp_coverage_score`). The best run's synthetic data is the selection's release,
``synthetic.hdf5``.

The score. For each sensitive transition x_i (on the public normaliser's scale, the
rows the model is trained on), d_i = min(c, distance from x_i to its nearest
synthetic transition): how well the release covers it. The released score is minus
``(sum_i d_i + N(0, (sigma c)^2)) / n``, n the public number of sensitive transitions.
Its sensitivity is c under add/remove-one and replace-one alike: the synthetic rows are
the run's earlier DP release, fixed when the score is computed (adaptive composition),
so a transition's presence moves only its own term, which lies in [0, c]; replacing
one moves one term within [0, c] too (not 2c: the terms are scalars of one sign). So
one run is the PrivORL-n plan then a Gaussian of noise multiplier sigma, composed.
Lower coverage distance rewards a release that puts samples near every real
transition (mode coverage, which a collapsed or under-trained model lacks); it is
blind to samples far from any real one, which the audit's sliced Wasserstein distance
(the true score here, NOT DP) also sees.

``score.kind: sliced_wasserstein`` scores the release instead by a DP sliced Wasserstein
distance to the sensitive transitions (:mod:`privrl_jax.pipelines.select.sw_score`: a
DP histogram of their projections on public directions), the quantity the audit
measures; one run is then the PrivORL-n plan composed with that histogram's Gaussian.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import numpy as np
import scipy.stats

from privrl_jax import data, privacy
from privrl_jax import eval as evaluation
from privrl_jax.pipelines import privorl_n
from privrl_jax.pipelines._config import qualify_config, to_dict
from privrl_jax.pipelines._rundir import (
    private_dir,
    refuse_other_run,
)
from privrl_jax.pipelines._select_config import SelectRunConfig
from privrl_jax.pipelines.select import sw_score

RELEASE_FILE = "synthetic.hdf5"
# Draws of each audit run's DP score behind the audit's expected choice.
SCORE_DRAWS = 200
# PrivORL-n's own evaluation is left out of a candidate run: the score is the
# selection's, and the audit reads each run's fidelity (computed anyway).
CANDIDATE_EVAL = [
    "eval.agents=[]",
    "eval.mia=false",
    "eval.anchors=false",
    "eval.plots=false",
]


def coverage_distances(
    sensitive_x: np.ndarray, synthetic_x: np.ndarray, clip: float
) -> np.ndarray:
    """NOT DP: each sensitive row's distance to its nearest synthetic row, clipped.

    Args:
      sensitive_x: [n, d] sensitive rows (the public normaliser's scale).
      synthetic_x: [N, d] synthetic rows, N >= 1, same scale.
      clip: c > 0, the largest distance a row may contribute.

    Returns:
      [n] float64 distances in [0, c].

    Raises:
      ValueError: a clip that is not a positive finite number, or bad shapes.
    """
    if not (math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be a positive finite number; got {clip!r}.")
    nearest = -evaluation.distance_to_closest_record_scores(sensitive_x, synthetic_x)
    return np.minimum(nearest, clip)


def coverage_mechanism(
    cfg: SelectRunConfig, plan: privacy.DPPlan
) -> privacy.GaussianMechanism:
    """The Gaussian mechanism of the coverage score's clipped sum (module doc).

    Args:
      cfg: the selection's config (its ``score`` section: c and sigma).
      plan: a candidate's plan (its neighbouring relation).

    Returns:
      The mechanism, of L2 sensitivity c under either relation.
    """
    s = cfg.score
    return privacy.GaussianMechanism(
        l2_sensitivity=s.l2_clip_norm,
        noise_multiplier=s.noise_multiplier,
        neighboring=plan.neighboring,
    )


def dp_coverage_score(
    sensitive_x: np.ndarray,
    synthetic_x: np.ndarray,
    mechanism: privacy.GaussianMechanism,
    key: jax.Array,
) -> float:
    """Minus the noisy mean clipped coverage distance: a DP score (higher is better).

    Args:
      sensitive_x: [n, d] the sensitive rows; n is public.
      synthetic_x: [N, d] the candidate run's release (already DP).
      mechanism: :func:`coverage_mechanism` (its sensitivity is the clip c).
      key: the noise's PRNG key.

    Returns:
      ``-(sum_i min(c, d_i) + noise) / n``.
    """
    d = coverage_distances(sensitive_x, synthetic_x, mechanism.l2_sensitivity)
    noisy = mechanism.release(key, np.asarray([d.sum()], np.float32))
    return -float(np.asarray(noisy)[0]) / len(sensitive_x)


def candidate_configs(cfg: SelectRunConfig) -> list[privorl_n.PrivORLNConfig]:
    """Every candidate's PrivORL-n config, its evaluation left out.

    Args:
      cfg: the selection's config (its ``candidates`` section).

    Returns:
      One config per candidate, in the grid's product order.

    Raises:
      ValueError: a bad grid key or value (naming the candidate).
    """
    return cfg.candidates.load_each(privorl_n.load, CANDIDATE_EVAL)


def score_mechanism(
    cfg: SelectRunConfig, plan: privacy.DPPlan
) -> privacy.GaussianMechanism:
    """The Gaussian mechanism of ``cfg.score``'s kind (coverage or sliced Wasserstein).

    Args:
      cfg: the selection's config (its ``score`` section).
      plan: a candidate's plan (its neighbouring relation).

    Returns:
      The score's mechanism.
    """
    s = cfg.score
    if s.kind == "sliced_wasserstein":
        return sw_score.mechanism(
            s.num_projections, s.noise_multiplier, plan.neighboring
        )
    return coverage_mechanism(cfg, plan)


@dataclasses.dataclass(frozen=True)
class Scorer:
    """A run's score on the sensitive rows.

    Attributes:
      mechanism: the score's Gaussian mechanism.
      statistic: NOT DP: the noiseless distance of a release's rows (lower is better).
      dp_score: ``(release rows, key) -> DP score`` (higher is better).
    """

    mechanism: privacy.GaussianMechanism
    statistic: Callable[[np.ndarray], float]
    dp_score: Callable[[np.ndarray, jax.Array], float]


def make_scorer(
    cfg: SelectRunConfig, plan: privacy.DPPlan, sensitive_x: np.ndarray
) -> Scorer:
    """The score of ``cfg.score.kind`` on the normalised sensitive rows.

    Args:
      cfg: the selection's config (its ``score`` section).
      plan: a candidate's plan (its neighbouring relation).
      sensitive_x: [n, d] the normalised sensitive transitions.

    Returns:
      The scorer.
    """
    s = cfg.score
    mech = score_mechanism(cfg, plan)
    if s.kind == "sliced_wasserstein":
        dirs = sw_score.directions(s.num_projections, sensitive_x.shape[1])
        counts = sw_score.projection_counts(sensitive_x, dirs, s.l2_clip_norm, s.bins)
        n = len(sensitive_x)

        def statistic(y: np.ndarray) -> float:
            other = sw_score.projection_counts(y, dirs, s.l2_clip_norm, s.bins)
            return sw_score.binned_distance(counts, n, other, len(y), s.l2_clip_norm)

        return Scorer(
            mech,
            statistic,
            lambda y, k: sw_score.dp_score(counts, n, y, dirs, s.l2_clip_norm, mech, k),
        )
    return Scorer(
        mech,
        lambda y: float(coverage_distances(sensitive_x, y, s.l2_clip_norm).mean()),
        lambda y, k: dp_coverage_score(sensitive_x, y, mech, k),
    )


def run_event(cfg: SelectRunConfig, plan: privacy.DPPlan) -> dp_accounting.DpEvent:
    """One run's event: the PrivORL-n plan's steps, then the score's Gaussian.

    Args:
      cfg: the selection's config.
      plan: the candidate's plan.

    Returns:
      The DP event of one run.
    """
    return dp_accounting.ComposedDpEvent(
        [plan.event(), score_mechanism(cfg, plan).event()]
    )


def _run_seed(key: jax.Array) -> int:
    # The candidate run's noise seed: 62 bits of the selection's secret run key (its
    # config, under checkpoints/, is as secret as the key).
    bits = np.asarray(jax.random.bits(key, (2,), np.uint32)).astype(np.uint64)
    return int((bits[0] << np.uint64(30)) ^ bits[1])


def run_name(ccfg: privorl_n.PrivORLNConfig, seed: int, prefix: str = "") -> str:
    """A candidate run's directory name: its noise seed and its config's tag.

    The seed alone does not name a run: two selections sharing ``candidates.runs_dir``
    (same key, another K distribution or total epsilon) may give run j's key to
    another candidate or epsilon. The tag, a hash of the config's identity without
    its noise seed and ``eval`` section (a resume may change ``eval``), keeps such
    runs apart; equal runs still share a directory.

    Args:
      ccfg: the run's PrivORL-n config (its noise seed is ignored).
      seed: the run's noise seed.
      prefix: put before the name (e.g. ``"total-eps-"``).

    Returns:
      ``f"{prefix}{seed:016x}-{tag}"``, the tag 8 hex digits.
    """
    ident = to_dict(ccfg, identity=True)
    ident["privacy"].pop("noise_seed", None)
    ident.pop("eval", None)
    text = json.dumps(ident, sort_keys=True, default=str)
    return f"{prefix}{seed:016x}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def make_candidate(
    ccfg: privorl_n.PrivORLNConfig,
    plan: privacy.DPPlan,
    sensitive_x: np.ndarray,
    task: privorl_n.PrivORLNTask,
    cfg: SelectRunConfig,
    runs_dir: Path,
) -> Callable[[jax.Array], tuple[dict[str, Any], float]]:
    """``run(key) -> (release, DP score)``: one PrivORL-n candidate.

    Deterministic given ``key``: the run's noise seed and directory derive from it, and
    a rerun reads the finished run back (PrivORL-n resumes).

    Args:
      ccfg: the candidate's PrivORL-n config.
      plan: its DP plan.
      sensitive_x: [n, d] the normalised sensitive transitions.
      task: the public task (its encoding and normaliser).
      cfg: the selection's config (its ``score`` section).
      runs_dir: where the candidate runs go (secret).

    Returns:
      The candidate's run: ``{"run_dir", "fidelity", "statistic"}`` (NOT DP: the
      audit's; ``statistic`` is the score's noiseless distance) and its DP score.
    """
    scorer = make_scorer(cfg, plan, sensitive_x)

    def run(key: jax.Array) -> tuple[dict[str, Any], float]:
        k_run, k_score = jax.random.split(key)
        seed = _run_seed(k_run)
        rcfg = dataclasses.replace(
            ccfg, privacy=dataclasses.replace(ccfg.privacy, noise_seed=seed)
        )
        sub = runs_dir / run_name(rcfg, seed)
        report = privorl_n.run(rcfg, sub)
        synthetic = data.load_hdf5(sub / RELEASE_FILE)
        syn_x = task.normalise(task.encode(synthetic))
        score = scorer.dp_score(syn_x, k_score)
        release = {
            "run_dir": str(sub),
            "fidelity": report["audit"]["fidelity"],
            "statistic": scorer.statistic(syn_x),
        }
        return release, score

    return run


def run(cfg: SelectRunConfig, run_dir: Path, topo: Any) -> dict[str, Any]:
    """Runs (or resumes) a private selection over a PrivORL-n grid into ``run_dir``.

    Args:
      cfg: the selection's config (``candidates.pipeline: privorl_n``).
      run_dir: the run directory (locked by the caller).
      topo: the process topology (one process only).

    Returns:
      The report (+ ``audit``).

    Raises:
      ValueError: a bad grid, or candidates reading different data.
      BudgetExceededError: the selection does not fit the budget; nothing ran.
    """
    from privrl_jax.pipelines.select import runner  # noqa: PLC0415 -- its helpers

    if not topo.is_primary:
        raise ValueError("privrl select runs in one process; drop the launcher.")
    t0 = time.time()
    resolved = to_dict(cfg)
    refuse_other_run(run_dir, resolved, "select")
    configs = candidate_configs(cfg)
    ids = {privorl_n.dataset_id(c) for c in configs}
    if len(ids) > 1:
        raise ValueError(
            "the candidates read different data sets; a grid may vary only the "
            "method's hyper-parameters."
        )
    public, sensitive, _ = privorl_n.load_data(configs[0])
    plans = [privorl_n.make_plan(c, len(sensitive)) for c in configs]
    events = [run_event(cfg, p) for p in plans]
    reps = runner.repetitions(cfg)
    selection_event = reps.event(events)
    release_file = run_dir / RELEASE_FILE
    ledger = runner.open_ledger(
        cfg, run_dir, resolved, ids.pop(), len(sensitive), selection_event
    )
    task = privorl_n.build_task(configs[0], public, sensitive)
    sens_x = task.normalise(task.encode(sensitive))
    secret = runner._secret(run_dir, cfg)
    runs_dir = private_dir(
        run_dir / cfg.candidates.runs_dir
        if cfg.candidates.runs_dir is not None
        else run_dir / "checkpoints" / "select" / "runs"
    )
    cands = [
        make_candidate(c, q, sens_x, task, cfg, runs_dir)
        for c, q in zip(configs, plans, strict=True)
    ]
    result, history = runner.select_recorded(
        cands, events, reps, secret, ledger, lambda r: r
    )
    chosen = result.candidate
    if chosen is not None:
        shutil.copyfile(Path(result.release["run_dir"]) / RELEASE_FILE, release_file)
    runner.write_selected(
        run_dir / "selected.json",
        cfg,
        result,
        ledger,
        "private selection over PrivORL-n",
        None if chosen is None else RELEASE_FILE,
    )
    mixed = runner.heterogeneous(events)
    run_section = {
        "privorl_n": [q.describe() for q in plans] if mixed else plans[0].describe(),
        "score": score_mechanism(cfg, plans[0]).describe()
        | {"kind": cfg.score.kind, "clip": cfg.score.l2_clip_norm},
    }
    report = runner.selection_report(
        cfg,
        resolved,
        reps,
        events,
        selection_event,
        result,
        ledger,
        run_section,
        [RELEASE_FILE, "selected.json", "ledger.json", "report.json", "config.yaml"],
    )
    audit = _audit(
        cfg,
        configs,
        cands,
        result,
        history,
        secret,
        runs_dir,
        (make_scorer(cfg, plans[0], sens_x), task, reps, report["epsilon_spent"]),
    )
    return runner.write_report(run_dir, report, audit, t0)


def _base_values(cfg: SelectRunConfig) -> dict[str, Any]:
    """The grid keys' values in the base config with the shared overrides.

    The stand-in rule's choice: what a run of the shipped config would use.
    """
    c = cfg.candidates
    from privrl_jax.pipelines._select_config import flatten  # noqa: PLC0415

    base = privorl_n.load(
        str(qualify_config(c.config, "privorl_n")),
        [f"{k}={json.dumps(v)}" for k, v in flatten(c.overrides).items()],
    )
    flat = flatten(to_dict(base))
    return {k: flat.get(k) for k in flatten(c.grid)}


def expected_choice(
    true_sw: np.ndarray,
    score_draws: np.ndarray,
    reps: privacy.Repetitions,
    rng: np.random.Generator,
    num_draws: int = 20_000,
) -> float:
    """NOT DP: the expected true distance of the selection's choice, by simulation.

    Over the selection's own randomness: K drawn from ``reps``, each run a uniformly
    drawn candidate, its score one of that candidate's ``score_draws``, the best
    score released. One selection draws K once; this averages over K, which a handful
    of data sets cannot (with E[K] = 2 about half the selections run once and choose
    at random).

    Args:
      true_sw: [C] each candidate's true distance (its audit run's).
      score_draws: [C, M] DP scores of each candidate's audit run (fresh noise each).
      reps: the distribution of K.
      rng: the simulation's generator.
      num_draws: simulated selections.

    Returns:
      The mean true distance of the choice over selections that release (K >= 1).
    """
    num_c, m = score_draws.shape
    total, released = 0.0, 0
    for _ in range(num_draws):
        k = reps.sample(rng)
        if k == 0:
            continue
        cand = rng.integers(num_c, size=k)
        scores = score_draws[cand, rng.integers(m, size=k)]
        total += float(true_sw[cand[int(np.argmax(scores))]])
        released += 1
    return total / max(released, 1)


def _stand_in_at(
    ccfg: privorl_n.PrivORLNConfig, epsilon: float, key: jax.Array, runs_dir: Path
) -> dict[str, Any]:
    """NOT DP: one run of the stand-in's config calibrated to ``epsilon``."""
    seed = _run_seed(key)
    rcfg = dataclasses.replace(
        ccfg,
        privacy=dataclasses.replace(ccfg.privacy, epsilon=epsilon, noise_seed=seed),
    )
    report = privorl_n.run(rcfg, runs_dir / run_name(rcfg, seed, "total-eps-"))
    return {
        "epsilon": epsilon,
        "sliced_wasserstein": float(report["audit"]["fidelity"]["sliced_wasserstein"]),
    }


def _audit(
    cfg: SelectRunConfig,
    configs: list[privorl_n.PrivORLNConfig],
    cands: list[Callable[[jax.Array], tuple[dict[str, Any], float]]],
    result: privacy.SelectionResult,
    history: list[dict[str, Any]],
    secret: privacy.DPSecret,
    runs_dir: Path,
    context: tuple[Scorer, privorl_n.PrivORLNTask, privacy.Repetitions, float],
) -> dict[str, Any]:
    """NOT DP: K, every run, and (``audit.every_candidate``) one audit run of each.

    The true score is the release's sliced Wasserstein distance to the sensitive rows
    (lower is better; PrivORL-n's audit). With every candidate run once: the oracle
    (least true distance), a uniformly random candidate (the mean), the stand-in rule
    (the candidate whose values are the base config's, when the grid has it; with
    ``audit.stand_in_at_total_epsilon`` also one run of it at the selection's total
    epsilon), the rank agreement (Kendall's tau) of the score's noiseless statistic
    with the true distance over the candidates, and the selection's expected choice
    (:func:`expected_choice`). ``context``: the scorer, the task, K's distribution and
    the selection's total epsilon.
    """
    from privrl_jax.pipelines.select import runner  # noqa: PLC0415 -- its helpers

    scorer, task, reps, total_epsilon = context

    def sw(release: dict[str, Any]) -> float:
        return float(release["fidelity"]["sliced_wasserstein"])

    out: dict[str, Any] = {
        "notice": "NOT DP: never publish.",
        "score_kind": cfg.score.kind,
        "runs": result.audit["runs"],
        "history": [
            {
                "candidate": h["candidate"],
                "score": h["score"],
                "statistic": h["statistic"],
                "sliced_wasserstein": sw(h),
            }
            for h in history
        ],
        "chosen_sw": None if result.release is None else sw(result.release),
        "chosen_statistic": None
        if result.release is None
        else result.release["statistic"],
    }
    if not cfg.audit.every_candidate:
        return out
    audit_key = jax.random.fold_in(secret.noise_key, runner.AUDIT_STREAM)
    every, draws = [], []
    for i, fn in enumerate(cands):
        release, score = fn(jax.random.fold_in(audit_key, i))
        every.append(
            {
                "score": score,
                "statistic": release["statistic"],
                "sliced_wasserstein": sw(release),
            }
        )
        syn = data.load_hdf5(Path(release["run_dir"]) / RELEASE_FILE)
        syn_x = task.normalise(task.encode(syn))
        # Fresh noise for each draw, apart from every run's key (a third stream).
        draw_key = jax.random.fold_in(jax.random.fold_in(audit_key, 1_000_003), i)
        draws.append(
            [
                scorer.dp_score(syn_x, jax.random.fold_in(draw_key, j))
                for j in range(SCORE_DRAWS)
            ]
        )
    out["every_candidate"] = every
    sws = np.array([e["sliced_wasserstein"] for e in every])
    stats = np.array([e["statistic"] for e in every])
    best = int(np.argmin(sws))
    out["oracle"] = {"candidate": best, "sliced_wasserstein": float(sws[best])}
    out["random_sw"] = float(np.mean(sws))
    grid = cfg.candidates.candidates()
    base = _base_values(cfg)
    stand_in = next((i for i, g in enumerate(grid) if g == base), None)
    if stand_in is not None:
        out["stand_in"] = {
            "candidate": stand_in,
            "sliced_wasserstein": float(sws[stand_in]),
        }
        if cfg.audit.stand_in_at_total_epsilon:
            key = jax.random.fold_in(audit_key, len(cands))
            out["stand_in_total_epsilon"] = _stand_in_at(
                configs[stand_in], total_epsilon, key, runs_dir
            )
    if out["chosen_sw"] is not None:
        out["gap_to_oracle"] = out["chosen_sw"] - float(sws[best])
    # The scorer: its DP score's error against the noiseless statistic (the score is
    # minus the statistic plus noise), and the statistic's ranking against the truth.
    out["score_error_rmse"] = float(
        np.sqrt(np.mean([(e["score"] + e["statistic"]) ** 2 for e in every]))
    )
    out["rank_agreement"] = (
        float(scipy.stats.kendalltau(stats, sws).statistic) if len(sws) > 1 else None
    )
    rng = np.random.default_rng(np.asarray(jax.random.key_data(audit_key)))
    out["expected_chosen_sw"] = expected_choice(sws, np.asarray(draws), reps, rng)
    return out
