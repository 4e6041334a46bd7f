"""PrivORL-j's audit (NOT differentially private: it reads the sensitive trajectories
without DP; never publish it): fidelity against the sensitive steps, stitching of the
real trajectories, TrajScore and agents trained on the real trajectories.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from privrl_jax import data
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._synth.scores import agent_scores
from privrl_jax.pipelines.privorl_j.task import PrivORLJTask, flat_transitions


def audit_release(
    task: PrivORLJTask,
    *,
    synthetic: data.Transitions,
    sensitive: data.Trajectories,
    key: jax.Array,
) -> dict[str, Any]:
    """The audit's entries for the release ``synthetic`` against the ``sensitive``
    member trajectories; ``key`` is the run's public key."""
    cfg, d = task.cfg, task.cfg.data
    real = flat_transitions(sensitive)
    real_flat, syn_flat = task.encode(real), task.encode(synthetic)
    audit: dict[str, Any] = {
        "fidelity": {
            "marginal": evaluation.marginal_score(real_flat, syn_flat),
            "correlation": evaluation.correlation_score(real_flat, syn_flat),
        },
        "real_stitching": evaluation.stitching_gaps(real, d.horizon),
        "truncated_trajectories": int(
            np.sum(np.asarray(sensitive.lengths) > d.horizon * d.max_fragments)
        ),
    }
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
        else:
            audit["trajscore"] = {
                "f1": None,
                "note": f"no trajectory of {d.horizon} steps in one of the sets",
            }
    if cfg.eval.agents and cfg.eval.train_real_agents:
        audit["agents_real"] = agent_scores(cfg, real, jax.random.fold_in(key, 400))
    return audit
