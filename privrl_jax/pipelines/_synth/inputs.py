"""Inputs of the synthesis pipelines (PrivORL-n, PrivORL-j, the marginal baselines).

The checks before a run writes anything, and the public encoding of transitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import data, diffusion, envs, privacy
from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._rundir import refuse_other_run


def validate_data_sources(d: Any) -> None:
    """Check the env names and data files of a synthesis config's ``data`` section.

    For PrivORL-n and -j.

    Env names must exist (MuJoCo-only tasks need data files); files must exist. One line
    each.
    """
    for name, has_file in (
        (d.sensitive_env, bool(d.sensitive_file)),
        *((n, bool(d.public_files)) for n in d.public_envs),
    ):
        if has_file and name != d.sensitive_env:
            continue
        if not envs.is_mujoco_task_name(name):
            envs.make(
                name
            )  # an unknown name raises a ValueError that lists the valid ones
        elif not has_file:
            raise ValueError(
                f"{name} is a MuJoCo task with no JAX env to collect from; give its "
                "D4RL or Minari data "
                "as data.sensitive_file and data.public_files (it is scored with "
                "eval.backend: mujoco)."
            )
    for f in (*([d.sensitive_file] if d.sensitive_file else []), *d.public_files):
        if not Path(f).is_file():
            raise ValueError(
                f"data file {f} does not exist; give the path of a D4RL-format HDF5 "
                "file."
            )
    if d.sensitive_file:
        check_file_env(d.sensitive_file, d.sensitive_env)


def check_file_env(path: str, env: str) -> None:
    """Refuses a sensitive file that records another env than the task's.

    `data.save_hdf5`'s files (``privrl data collect``) record the env they were
    collected on (attribute ``env``); data of ``maze2d-large-v1`` released as
    ``maze2d-umaze-v1``, or sparse rewards scored as the dense task, would be a wrong
    release, not a weaker one. A file that records no env (D4RL's own) is taken as
    the task's.

    Raises:
      ValueError: the recorded env differs from ``env`` (one line: both names and the
        fix).
    """
    recorded = data.read_hdf5_metadata(path).get("env")
    if recorded is None:
        return
    if envs.canonical_name(str(recorded)) != envs.canonical_name(env):
        raise ValueError(
            f"data.sensitive_file {path} was collected on {recorded}, but the task is "
            f"data.sensitive_env={env}; give a file of {env}, or set "
            f"data.sensitive_env={recorded}."
        )


def begin_run(
    cfg: Any, run_dir: Path, topo: privacy.Topology, method: str
) -> dict[str, Any]:
    """The resolved config, once the run directory and the data sources are checked.

    Process 0 checks that ``run_dir`` is empty or holds this run (only ``eval`` may
    change on a rerun) and that the data sources exist; nothing is written yet.
    """
    resolved = to_dict(cfg)
    if topo.is_primary:  # process 0 checks and owns the directory
        refuse_other_run(run_dir, resolved, method, mutable=("eval", "audit"))
    validate_data_sources(cfg.data)
    return resolved


def dataset_id(d: Any, seed: int, collector: str = "") -> str:
    """Names the sensitive dataset by its source, never by a hash of its contents.

    A content hash is a deterministic function of the private data: published with a
    report it would let anyone test a guessed dataset, outside any DP mechanism
    (docs/design.md, contract 5). ``collector`` appends the pipeline's own collection
    settings.
    """
    if d.sensitive_file:
        return f"file:{Path(d.sensitive_file).resolve()}"
    return (
        f"collected:{d.sensitive_env}:seed={seed}:size={d.sensitive_size}:"
        f"noise={d.action_noise}{collector}"
    )


def check_dataset_size(cfg: Any, n: int, units: str, holdout: str) -> None:
    """Check the declared ``privacy.dataset_size`` against the ``n`` units read.

    The ``n`` sensitive units the run reads; ``units``: their plural name; ``holdout``:
    what was held out, for the message.
    """
    declared = cfg.privacy.dataset_size
    if declared is not None and declared != n:
        raise ValueError(
            f"privacy.dataset_size={declared} is declared, but the sensitive data hold "
            f"{n} {units} (after the {holdout}); declare the size of the data you "
            "train on, or leave it empty."
        )


def check_units(cfg: Any, n: int, units: str, holdout: str) -> None:
    """Check the declared dataset size and the batch size against the ``n`` units.

    The ``n`` sensitive units the run trains on (as :func:`check_dataset_size`).
    """
    check_dataset_size(cfg, n, units, holdout)
    if cfg.finetune.batch_size > n:
        raise ValueError(
            f"finetune.batch_size={cfg.finetune.batch_size} exceeds the {n} sensitive "
            f"{units} "
            "(the sampling rate q = batch / N would exceed 1); lower "
            "finetune.batch_size."
        )


def check_same_dims(public: Any, sensitive: Any) -> tuple[int, int]:
    """(obs_dim, act_dim), the same in the public and the sensitive data (last axis)."""
    obs_dim, act_dim = public.observations.shape[-1], public.actions.shape[-1]
    if (
        sensitive.observations.shape[-1] != obs_dim
        or sensitive.actions.shape[-1] != act_dim
    ):
        raise ValueError(
            "public and sensitive data must have the same observation and action "
            "dimensions."
        )
    return obs_dim, act_dim


def encode(
    transitions: data.Transitions, layout: diffusion.TransitionLayout
) -> np.ndarray:
    """Flat encoded transitions [N, d] (not normalised)."""
    return np.asarray(
        diffusion.flatten_transitions(
            jax.tree_util.tree_map(jnp.asarray, transitions), layout
        )
    )


def public_encoding(cfg: Any, public: data.Transitions, obs_dim: int, act_dim: int):
    """(layout, flat public rows, normaliser) of the public data.

    Contract 5: the normaliser sees public data only.
    """
    layout = diffusion.TransitionLayout(
        obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=cfg.model.next_obs_delta
    )
    pub_flat = encode(public, layout)
    norm = diffusion.fit_normaliser_on_public(
        pub_flat, one_hot_mask=layout.one_hot_mask()
    )
    return layout, pub_flat, norm
