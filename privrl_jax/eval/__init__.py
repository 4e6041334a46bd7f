"""Evaluation: fidelity, stitching gaps, membership inference, TrajScore, plots."""

from privrl_jax.eval._fidelity import (
    correlation_score,
    free_cell_share,
    marginal_score,
    sliced_wasserstein,
)
from privrl_jax.eval._membership import (
    distance_to_closest_record_scores,
    loss_threshold_attack,
    mia_loss_scores,
    mia_metrics,
)
from privrl_jax.eval._plots import plot_marginals, plot_tsne
from privrl_jax.eval._stitching import stitching_gaps
from privrl_jax.eval._trajscore import (
    fit_trajectory_encoder,
    trajectory_windows,
    trajscore,
)

__all__ = [
    "correlation_score",
    "distance_to_closest_record_scores",
    "fit_trajectory_encoder",
    "free_cell_share",
    "loss_threshold_attack",
    "marginal_score",
    "mia_loss_scores",
    "mia_metrics",
    "plot_marginals",
    "plot_tsne",
    "sliced_wasserstein",
    "stitching_gaps",
    "trajectory_windows",
    "trajscore",
]
