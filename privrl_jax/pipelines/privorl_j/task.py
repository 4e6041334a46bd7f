"""PrivORL-j's task: a run's trajectories and what it knows before its first DP step.

:func:`load_data` reads or collects the public and sensitive transitions as padded
trajectories and splits off the holdout trajectories; :func:`build_task` builds the
frozen :class:`PrivORLJTask` once from the config and the public trajectories (the
encoding, the public normaliser, the public pre-training rows), and the run passes it
down, so nothing is cached at module level and no device array outlives its run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import data, diffusion, envs, synth
from privrl_jax import eval as evaluation
from privrl_jax.pipelines._privorl_j_config import PrivORLJConfig
from privrl_jax.pipelines._synth import inputs


def _collect(
    cfg: PrivORLJConfig, env_name: str, size: int, seed: int
) -> data.Transitions:
    d = cfg.data
    t = envs.collect_dataset(
        jax.random.key(seed),
        env_name,
        size,
        action_noise=d.action_noise,
        num_envs=d.num_envs,
    )
    return jax.tree_util.tree_map(np.asarray, t)


def load_data(
    cfg: PrivORLJConfig,
) -> tuple[list[data.Trajectories], data.Trajectories, data.Trajectories]:
    """The run's padded trajectories: public sets, sensitive members, sensitive holdout.

    (public trajectory sets, one per source; sensitive members; sensitive holdout). The
    holdout is never trained on.
    """
    d = cfg.data
    # The sensitive data first: a bad file is refused before minutes of public
    # collection (each collection has its own key, so the order changes no data).
    full = (
        jax.tree_util.tree_map(np.asarray, data.load_hdf5(d.sensitive_file))
        if d.sensitive_file
        else _collect(cfg, d.sensitive_env, d.sensitive_size, cfg.seed * 1000)
    )
    sens = data.transitions_to_trajectories(full)
    n = len(sens)
    if n <= d.holdout_trajectories + 1:
        raise ValueError(
            f"the sensitive data hold {n} trajectories, too few for a holdout of "
            f"{d.holdout_trajectories}; collect more or lower "
            "data.holdout_trajectories."
        )
    if d.public_files:
        public = [
            jax.tree_util.tree_map(np.asarray, data.load_hdf5(f))
            for f in d.public_files
        ]
    else:
        public = [
            _collect(cfg, e, d.public_size, cfg.seed * 1000 + 1 + i)
            for i, e in enumerate(d.public_envs)
        ]
    pub = [data.transitions_to_trajectories(p) for p in public]
    # The holdout is a fixed function of the seed, not of the data.
    perm = np.random.default_rng([cfg.seed, 7]).permutation(n)
    hold, mem = (
        np.sort(perm[: d.holdout_trajectories]),
        np.sort(perm[d.holdout_trajectories :]),
    )

    def take(t, idx):
        return jax.tree_util.tree_map(lambda x: np.asarray(x)[idx], t)

    return pub, take(sens, mem), take(sens, hold)


def dataset_id(cfg: PrivORLJConfig) -> str:
    """The ledger's name of the sensitive dataset (its source, never a content hash)."""
    return inputs.dataset_id(cfg.data, cfg.seed, f":num_envs={cfg.data.num_envs}")


def flat_transitions(
    trajs: list[data.Trajectories] | data.Trajectories,
) -> data.Transitions:
    """The valid steps of one or several trajectory sets as flat D4RL rows."""
    trajs = trajs if isinstance(trajs, list) else [trajs]
    parts = [
        jax.tree_util.tree_map(np.asarray, data.trajectories_to_transitions(t))
        for t in trajs
    ]
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *parts)


@dataclasses.dataclass(frozen=True, eq=False)
class PrivORLJTask:
    """The public side of one PrivORL-j run.

    Attributes:
      cfg: the run's config.
      layout: how a step is encoded as one row (``model.next_obs_delta``).
      norm: the normaliser, fitted on the public steps only (contract 5).
      obs_dim, act_dim: the observation and action dimensions.
      dim: width of an encoded step.
      public: the public steps as flat rows (TrajScore's encoder trains on them).
      rows: every real public fragment as a packed row (pre-training's data).
    """

    cfg: PrivORLJConfig
    layout: diffusion.TransitionLayout
    norm: Any
    obs_dim: int
    act_dim: int
    dim: int
    public: data.Transitions
    rows: np.ndarray

    def encode(self, transitions: data.Transitions) -> np.ndarray:
        """Flat encoded steps ``[N, dim]`` (not normalised)."""
        return inputs.encode(transitions, self.layout)

    def items(self, trajectories: data.Trajectories) -> dict[str, np.ndarray]:
        """The DP units' items of ``trajectories``: their encoded fragments.

        Fragments of ``data.horizon`` steps, at most ``data.max_fragments`` each,
        encoded (``synth.fragment_items``).
        """
        d = self.cfg.data
        frags = data.trajectories_to_fragments(
            trajectories, horizon=d.horizon, max_fragments=d.max_fragments
        )
        return synth.fragment_items(frags, self.layout, self.norm)

    def windows(self, transitions: data.Transitions, window: int) -> np.ndarray:
        """Normalised encoded steps of each trajectory in windows of ``window`` steps.

        TrajScore's input.
        """
        traj = data.transitions_to_trajectories(transitions)
        b, t = np.asarray(traj.mask).shape
        flat = data.Transitions(
            **{
                k: np.asarray(getattr(traj, k)).reshape(
                    (b * t,) + np.asarray(getattr(traj, k)).shape[2:]
                )
                for k in data.TRANSITION_FIELDS
            }
        )
        x = np.asarray(
            diffusion.normalise(
                self.norm,
                diffusion.flatten_transitions(
                    jax.tree_util.tree_map(jnp.asarray, flat), self.layout
                ),
            )
        )
        return evaluation.trajectory_windows(
            x.reshape(b, t, -1), np.asarray(traj.lengths), window
        )


def build_task(
    cfg: PrivORLJConfig,
    public: list[data.Trajectories],
    sensitive: data.Trajectories,
) -> PrivORLJTask:
    """The task of ``cfg`` on the ``public`` trajectory sets.

    Of ``sensitive`` only the shapes are read: the public and the sensitive data must
    have the same observation and action dimensions (a ``ValueError`` otherwise).
    """
    obs_dim, act_dim = inputs.check_same_dims(public[0], sensitive)
    pub_t = flat_transitions(public)
    layout, pub_flat, norm = inputs.public_encoding(cfg, pub_t, obs_dim, act_dim)
    return PrivORLJTask(
        cfg=cfg,
        layout=layout,
        norm=norm,
        obs_dim=obs_dim,
        act_dim=act_dim,
        dim=pub_flat.shape[1],
        public=pub_t,
        rows=synth.public_fragment_rows(public, layout, norm, cfg.data.horizon),
    )
