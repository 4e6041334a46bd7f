"""PrivORL-j's audit. NOT differentially private: never publish it.

It reads the sensitive trajectories without DP: fidelity against the sensitive steps,
the anchors, stitching of the real trajectories, TrajScore and agents trained on the
real trajectories.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from privrl_jax import data
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._synth.scores import agent_scores, fidelity_scorer
from privrl_jax.pipelines.privorl_j.task import PrivORLJTask, flat_transitions
from privrl_jax.pipelines.privorl_j.train import Synthesizer, synthesize


def audit_release(
    task: PrivORLJTask,
    *,
    synthetic: data.Transitions,
    sensitive: data.Trajectories,
    holdout: data.Trajectories,
    model: Synthesizer,
    pre_params: Any,
    key: jax.Array,
) -> dict[str, Any]:
    """The audit's entries for the release ``synthetic``.

    Scored against the ``sensitive`` member trajectories; ``holdout``: the sensitive
    trajectories never trained on, ``pre_params``: ``model``'s parameters before any DP
    step (None without pre-training); ``key`` is the run's public key.
    """
    cfg, d = task.cfg, task.cfg.data
    real = flat_transitions(sensitive)
    real_holdout = flat_transitions(holdout)
    score = fidelity_scorer(
        real,
        task.layout,
        task.norm,
        d.sensitive_env,
        rows=len(real_holdout),
        seed=cfg.seed,
    )
    audit: dict[str, Any] = {
        "fidelity": score(synthetic),
        "real_stitching": evaluation.stitching_gaps(real, d.horizon),
        "truncated_trajectories": int(
            np.sum(np.asarray(sensitive.lengths) > d.horizon * d.max_fragments)
        ),
    }
    anchor_sets: dict[str, data.Transitions] = {}
    if cfg.eval.anchors:
        anchor_sets["real_holdout"] = real_holdout
        if pre_params is not None:
            # The same sampler, key and size as the release, from the model before any
            # DP step.
            anchor_sets["pretrain_only"] = synthesize(
                task, model, pre_params, jax.random.fold_in(key, 300)
            )
        audit["anchors"] = {k: score(v) for k, v in anchor_sets.items()}
    if cfg.eval.trajscore:
        pub_w = task.windows(task.public, d.horizon)
        real_w = task.windows(real, d.horizon)
        syn_w = task.windows(synthetic, d.horizon)
        if len(pub_w) and len(real_w) and len(syn_w):
            enc = evaluation.fit_trajectory_encoder(
                jax.random.fold_in(key, 600),
                pub_w,
                window=d.horizon,
                steps=cfg.eval.trajscore_steps,
            )
            audit["trajscore"] = evaluation.trajscore(enc, real_w, syn_w)
            # The anchors with the same encoder and window, so their F1 compares.
            for name, trans in anchor_sets.items():
                w = task.windows(trans, d.horizon)
                audit["anchors"][name]["trajscore_f1"] = (
                    evaluation.trajscore(enc, real_w, w)["f1"] if len(w) else None
                )
        else:
            audit["trajscore"] = {
                "f1": None,
                "note": f"no trajectory of {d.horizon} steps in one of the sets",
            }
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = agent_scores(cfg, real, jax.random.fold_in(key, 400))
    return audit
