"""GPOPE's audit (NOT differentially private): the release against the truth and LSTD.

LSTD is the data's (non-private) LSTD solution.

Everything here reads the sensitive trajectories (or the chain's model, which a real
data holder would not have) without a DP mechanism; it is written under ``audit/`` and
never published.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import ope
from privrl_jax.pipelines.gpope.task import GPOPETask, lstd_min_norm, true_values

AUDIT_NOTICE = (
    "NOT DIFFERENTIALLY PRIVATE. Everything in this folder was computed from the "
    "sensitive trajectories without a DP mechanism (the off-policy LSTD solution of "
    "the data and the errors against it; the exact values come from the MDP's model, "
    "which a real data holder would not have). It audits the release for the data "
    "owner; "
    "never publish it.\n"
)


@functools.partial(jax.jit, static_argnames="normalization")
def references(
    mdp: ope.ChainMDP, target: jax.Array, data: ope.TrajectoryData, normalization: str
) -> tuple[jax.Array, jax.Array]:
    """Exact V^pi (from the model) and the data's off-policy LSTD theta, in one jit."""
    lstd, _ = ope.lstd_solution(ope.dataset_stats(data, normalization))
    return ope.exact_values(mdp, target), lstd


def audit_release(
    task: GPOPETask, theta: np.ndarray, data: ope.TrajectoryData
) -> dict[str, Any]:
    """Errors of the release against the true V^pi and the data's LSTD (NOT DP)."""
    if not task.chain:
        return _audit_continuous(task, theta, data)
    features = task.features
    exact, lstd = references(task.mdp, task.target, data, task.cfg.gpope.normalization)
    theta = jnp.asarray(theta)
    out: dict[str, Any] = {
        "notice": AUDIT_NOTICE.strip(),
        "exact_values": np.asarray(exact).tolist(),
        "estimated_values": np.asarray(features @ theta).tolist(),
        "mse_vs_exact": float(ope.value_mse(theta, features, exact)),
    }
    if bool(jnp.all(jnp.isfinite(lstd))):
        out |= {
            "lstd_values": np.asarray(features @ lstd).tolist(),
            "mse_vs_lstd": float(ope.value_mse(theta, features, features @ lstd)),
            "lstd_mse_vs_exact": float(ope.value_mse(lstd, features, exact)),
        }
    else:  # a level never visited leaves A singular
        out["lstd_values"] = None
    return out


def _audit_continuous(
    task: GPOPETask, theta: np.ndarray, data: ope.TrajectoryData
) -> dict[str, Any]:
    phi, mc = true_values(task)
    theta = jnp.asarray(theta)
    lstd = lstd_min_norm(data, task.cfg.gpope.normalization)
    return {
        "notice": AUDIT_NOTICE.strip(),
        "metric": (
            "mean over the evaluation states of (theta . phi(s) - V_MC(s))^2; V_MC "
            "from "
            "Monte Carlo rollouts of the target policy (see truth.*)"
        ),
        "mc_values": np.asarray(mc.values).tolist(),
        "mc_stderr": np.asarray(mc.stderr).tolist(),
        "mc_mean_squared_stderr": float(jnp.mean(mc.stderr**2)),
        "estimated_values": np.asarray(phi @ theta).tolist(),
        "mse_vs_exact": float(ope.value_mse(theta, phi, mc.values)),
        "lstd_values": np.asarray(phi @ lstd).tolist(),
        "mse_vs_lstd": float(ope.value_mse(theta, phi, phi @ lstd)),
        "lstd_mse_vs_exact": float(ope.value_mse(lstd, phi, mc.values)),
        "zero_predictor_mse": float(jnp.mean(mc.values**2)),
    }
