"""Evaluation: fidelity scores, stitching gaps, membership inference,
TrajScore, plots."""

from privrl_jax.eval._fidelity import (
    correlation_score,
    free_cell_share,
    ks_statistics,
    marginal_score,
    sliced_wasserstein,
)
from privrl_jax.eval._membership import (
    DEFAULT_MIA_SIGMAS,
    distance_to_closest_record_scores,
    loss_threshold_attack,
    mia_loss_scores,
    mia_metrics,
    tpr_at_fpr,
)
from privrl_jax.eval._plots import plot_marginals, plot_tsne
from privrl_jax.eval._stitching import stitching_gaps
from privrl_jax.eval._trajscore import (
    TrajEncoder,
    fit_trajectory_encoder,
    trajectory_windows,
    trajscore,
    trajscore_from_embeddings,
)

__all__ = [
    "DEFAULT_MIA_SIGMAS",
    "TrajEncoder",
    "correlation_score",
    "distance_to_closest_record_scores",
    "fit_trajectory_encoder",
    "free_cell_share",
    "ks_statistics",
    "loss_threshold_attack",
    "marginal_score",
    "mia_loss_scores",
    "mia_metrics",
    "plot_marginals",
    "plot_tsne",
    "sliced_wasserstein",
    "stitching_gaps",
    "tpr_at_fpr",
    "trajectory_windows",
    "trajscore",
    "trajscore_from_embeddings",
]
