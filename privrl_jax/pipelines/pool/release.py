"""POOL's release: the configured method's Q tables and the files that publish them.

``policy.npz`` holds the private Q tables at the cells with the public geometry and
candidate actions; ``policy.json`` says how to read them and carries the ledger head
that ties them to ``ledger.json``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import planning, privacy
from privrl_jax.pipelines._pool_config import PoolRunConfig
from privrl_jax.pipelines._rundir import atomic_write_bytes, atomic_write_text

POLICY_FILE = "policy.npz"
POLICY_META = "policy.json"


def plan(
    cfg: PoolRunConfig,
    data,
    params,
    geom,
    actions: jax.Array,
    mechanism: privacy.GaussianMechanism | None,
    key: jax.Array,
) -> jax.Array:
    """[H, K] Q tables of the configured method (the release, or computed from it)."""
    pc = planning.PoolConfig(
        bonus_scale=cfg.pool.bonus_scale, failure_prob=cfg.pool.failure_prob
    )
    m = cfg.pool.method
    if m in ("pool", "grid"):
        return planning.pool_plan(key, data, geom, actions, mechanism, pc).q_tables
    if m == "input_perturbation":
        noisy = planning.input_perturbation(key, data, params.boundary, mechanism)
        return planning.pool_plan(key, noisy, geom, actions, None, pc).q_tables
    exact = planning.pool_plan(key, data, geom, actions, None, pc).q_tables
    if m == "output_perturbation":
        return planning.output_perturbation(key, exact, mechanism)
    return exact


def load_policy(path: Path) -> jax.Array:
    """The Q tables of a written ``policy.npz``."""
    with np.load(path) as z:
        return jnp.asarray(z["q_tables"])


def write_policy(path: Path, q_tables: jax.Array, actions, boundary, geom) -> None:
    """``policy.npz``: the Q tables, the candidate actions and the public geometry."""
    buf = io.BytesIO()
    zg = geom.parts if isinstance(geom, planning.AdditiveGeometry) else geom
    np.savez(
        buf,
        q_tables=np.asarray(q_tables),
        actions=np.asarray(actions),
        boundary=np.asarray(boundary),
        **(
            {
                "points": np.asarray(zg.points),
                "coef": np.asarray(zg.coef),
                "origin": np.asarray(zg.origin),
            }
            if hasattr(zg, "points")
            else {}
        ),
    )
    atomic_write_bytes(path, buf.getvalue(), suffix=".json.tmp")


def write_policy_meta(
    path: Path, cfg: PoolRunConfig, geom, *, private: bool, ledger_head: str
) -> dict[str, Any]:
    """Write ``policy.json``: how to read ``policy.npz``, and its ledger head.

    The ledger head is the one the policy was made at.
    """
    meta = {
        "method": cfg.pool.method,
        "geometry": (
            "grid"
            if cfg.pool.method == "grid"
            else "additive l2 zones (one per product, Q_bar = their sum)"
            if isinstance(geom, planning.AdditiveGeometry)
            else "l2 zones"
        ),
        "num_cells": int(geom.num_cells),
        "read": "pi_h(s) = argmax over `actions` of Q_bar_h(s, a) from q_tables[h] "
        "(privrl_jax.planning.greedy_policy with the geometry rebuilt from "
        "config.yaml)",
        "private": private,
        "rho": cfg.privacy.rho,
        "ledger_head": ledger_head,
    }
    atomic_write_text(path, json.dumps(meta, indent=2))
    return meta
