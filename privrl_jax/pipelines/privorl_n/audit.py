"""PrivORL-n's audit. NOT differentially private: never publish it.

It reads the sensitive data without DP: fidelity against the sensitive rows, the
anchors, the plots of real rows, agents trained on the real data and the
membership-inference attacks.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import data
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._rundir import write_png
from privrl_jax.pipelines._synth import anchor_cache
from privrl_jax.pipelines._synth.scores import agent_scores, fidelity_scorer
from privrl_jax.pipelines.privorl_n.report import column_names
from privrl_jax.pipelines.privorl_n.task import PrivORLNTask
from privrl_jax.pipelines.privorl_n.train import synthesize

TSNE_PLOT = "tsne.png"
MARGINALS_PLOT = "marginals.png"


def audit_release(
    task: PrivORLNTask,
    audit_dir: Path,
    *,
    synthetic: data.Transitions,
    sensitive: data.Transitions,
    holdout: data.Transitions,
    params: Any,
    pre_params: Any,
    key: jax.Array,
) -> dict[str, Any]:
    """The audit's entries for the release ``synthetic`` of the model ``params``.

    ``pre_params``: the model before any DP step, or None; plots go into ``audit_dir``.
    ``key`` is the run's public key.
    """
    cfg = task.cfg
    audit: dict[str, Any] = {}
    score = fidelity_scorer(
        sensitive,
        task.layout,
        task.norm,
        cfg.data.sensitive_env,
        rows=len(holdout),
        seed=cfg.seed,
    )
    audit["fidelity"] = score(synthetic)
    if cfg.eval.anchors:
        audit["anchors"] = {"real_holdout": score(holdout)}
        if pre_params is not None:
            # The same sampler, key and size as the release, from the model before any
            # DP step.
            pre_only = synthesize(task, pre_params, jax.random.fold_in(key, 300))
            audit["anchors"]["pretrain_only"] = score(pre_only)
            if cfg.eval.agents and cfg.eval.anchor_agents:
                audit["anchors"]["agents_pretrain_only"] = agent_scores(
                    _anchor_agent_config(cfg), pre_only, jax.random.fold_in(key, 400)
                )
    sens_flat, syn_flat = task.encode(sensitive), task.encode(synthetic)
    if cfg.eval.plots:
        fig, _ = evaluation.plot_tsne(sens_flat, syn_flat, seed=cfg.seed)
        write_png(fig, audit_dir / TSNE_PLOT, dpi=120, tight=True)
        fig = evaluation.plot_marginals(
            sens_flat, syn_flat, names=column_names(task.layout, task.dim)
        )
        write_png(fig, audit_dir / MARGINALS_PLOT, dpi=120, tight=True)
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = real_agent_scores(cfg, sensitive, key)
    if cfg.eval.mia:
        audit |= _mia(task, sens_flat, syn_flat, task.encode(holdout), params, key)
    return audit


def _anchor_agent_config(cfg: Any) -> Any:
    """``cfg`` with the pre-training-only anchor's agent budget."""
    n = cfg.eval.anchor_agent_updates
    if n is None:
        return cfg
    return dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, agent_updates=n))


def real_agent_scores(
    cfg: Any, sensitive: data.Transitions, key: jax.Array
) -> dict[str, Any]:
    """The agents trained on the sensitive training rows (audit anchor).

    Read from ``eval.real_agents_cache`` when it was made for these rows and this
    protocol, else trained with the run's key folded with 400 (the key the cache was
    made with).
    """
    cached, why = anchor_cache.cached_real_agents(cfg, sensitive)
    if cached is not None:
        return cached
    if why:
        print(f"PrivORL-n: {why}", file=sys.stderr, flush=True)
    return agent_scores(cfg, sensitive, jax.random.fold_in(key, 400))


def _mia(
    task: PrivORLNTask,
    sens_flat: np.ndarray,
    syn_flat: np.ndarray,
    hold_flat: np.ndarray,
    params: Any,
    key: jax.Array,
) -> dict[str, Any]:
    """The loss-threshold and distance-to-closest-record membership attacks.

    The loss-threshold attack on the model (white-box) and the
    distance-to-closest-record attack on the release (black-box), members against
    holdout rows.
    """
    ec = task.cfg.eval
    sens_x, hold_x = task.normalise(sens_flat), task.normalise(hold_flat)
    k = min(ec.mia_size, len(hold_x), len(sens_x))
    mkey = jax.random.fold_in(key, 500)
    mem = evaluation.mia_loss_scores(
        task.denoise,
        params,
        jnp.asarray(sens_x[:k]),
        mkey,
        num_noise=ec.mia_noise_draws,
    )
    non = evaluation.mia_loss_scores(
        task.denoise,
        params,
        jnp.asarray(hold_x[:k]),
        mkey,
        num_noise=ec.mia_noise_draws,
    )
    mia = evaluation.loss_threshold_attack(np.asarray(mem), np.asarray(non))
    # The black-box attack a reader of the release can run: distance to the closest
    # synthetic row.
    syn_x = task.normalise(syn_flat)
    return {
        "mia": {k2: v for k2, v in mia.items() if k2 != "per_sigma"},
        "mia_distance": evaluation.mia_metrics(
            evaluation.distance_to_closest_record_scores(sens_x[:k], syn_x),
            evaluation.distance_to_closest_record_scores(hold_x[:k], syn_x),
        ),
    }
