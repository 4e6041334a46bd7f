"""PrivORL-n's task: the data of a run and what it knows before its first DP step.

:func:`load_data` reads or collects the public and sensitive transitions and splits off
the holdout; :func:`build_task` builds the frozen :class:`PrivORLNTask` once from the
config and the public data (the encoding, the public normaliser, the denoiser and its
initial parameters), and the run passes it down, so nothing is cached at module level
and no device array outlives its run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import data, diffusion, envs
from privrl_jax.pipelines._privorl_n_config import PrivORLNConfig
from privrl_jax.pipelines._synth import inputs


def collect_transitions(
    env_name: str, size: int, seed: int, noise: float
) -> data.Transitions:
    """``size`` transitions of ``env_name`` from the library's collector.

    Key ``seed``, action noise ``noise``.
    """
    return envs.collect_dataset(
        jax.random.key(seed), env_name, size, action_noise=noise
    )


def load_data(
    cfg: Any,
) -> tuple[data.Transitions, data.Transitions, data.Transitions]:
    """(public, sensitive members, sensitive holdout) of ``cfg.data``.

    For PrivORL-n and the marginal baselines. The holdout is never trained on.
    """
    d = cfg.data
    # The sensitive data first: a file with missing keys or too few rows is refused
    # before minutes of public collection (every collection has its own key, so the
    # order changes no data).
    if d.sensitive_file:
        full = data.load_hdf5(d.sensitive_file)
    else:
        full = collect_transitions(
            d.sensitive_env,
            d.sensitive_size + d.holdout_size,
            cfg.seed * 1000,
            d.action_noise,
        )
    full = jax.tree_util.tree_map(np.asarray, full)
    n = len(full)
    if n <= d.holdout_size + 1:
        raise ValueError(
            f"the sensitive dataset has {n} transitions, too few for a holdout of "
            f"{d.holdout_size}."
        )
    if d.public_files:
        parts = [data.load_hdf5(f) for f in d.public_files]
    else:
        parts = [
            collect_transitions(
                e, d.public_size, cfg.seed * 1000 + 1 + i, d.action_noise
            )
            for i, e in enumerate(d.public_envs)
        ]
    public = jax.tree_util.tree_map(
        lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts
    )
    # The holdout split is a fixed function of the seed, not of the data.
    perm = np.random.default_rng([cfg.seed, 7]).permutation(n)
    hold, mem = perm[: d.holdout_size], np.sort(perm[d.holdout_size :])
    take = lambda idx: jax.tree_util.tree_map(lambda x: x[idx], full)  # noqa: E731
    return public, take(mem), take(hold)


def dataset_id(cfg: Any) -> str:
    """The ledger's name of the sensitive dataset (its source, never a content hash)."""
    return inputs.dataset_id(cfg.data, cfg.seed)


@dataclasses.dataclass(frozen=True, eq=False)
class PrivORLNTask:
    """The public side of one PrivORL-n run.

    Attributes:
      cfg: the run's config.
      layout: how a transition is encoded as one row (``model.next_obs_delta``).
      norm: the normaliser, fitted on the public rows only (contract 5).
      public_x: ``[N_pub, dim]`` normalised public rows (pre-training's data).
      net: the denoiser network (``diffusion.ResidualMLP``).
      denoise: the EDM denoiser around ``net``.
      init_params: the network's initial parameters (public seed).
    """

    cfg: PrivORLNConfig
    layout: diffusion.TransitionLayout
    norm: Any
    public_x: np.ndarray
    net: Any
    denoise: diffusion.EDMDenoiser
    init_params: Any

    @property
    def dim(self) -> int:
        """Width of an encoded row."""
        return self.public_x.shape[1]

    def encode(self, transitions: data.Transitions) -> np.ndarray:
        """Flat encoded rows ``[N, dim]`` (not normalised)."""
        return inputs.encode(transitions, self.layout)

    def normalise(self, flat: np.ndarray) -> np.ndarray:
        """Encoded rows in the public normaliser's scale (the model's input)."""
        return np.asarray(diffusion.normalise(self.norm, jnp.asarray(flat)))


def build_task(
    cfg: PrivORLNConfig, public: data.Transitions, sensitive: data.Transitions
) -> PrivORLNTask:
    """The task of ``cfg`` on the ``public`` transitions.

    Of ``sensitive`` only the shapes are read: the public and the sensitive data must
    have the same observation and action dimensions (a ``ValueError`` otherwise).
    """
    obs_dim, act_dim = inputs.check_same_dims(public, sensitive)
    layout, pub_flat, norm = inputs.public_encoding(cfg, public, obs_dim, act_dim)
    m = cfg.model
    net = diffusion.ResidualMLP(
        width=m.width, depth=m.depth, fourier_dim=m.fourier_dim, layer_norm=m.layer_norm
    )
    dim = pub_flat.shape[1]
    # Public randomness only: the key of the seed, folded as the run always folded it.
    params = net.init(
        jax.random.fold_in(jax.random.key(cfg.seed), 0), jnp.zeros(dim), jnp.zeros(())
    )
    return PrivORLNTask(
        cfg=cfg,
        layout=layout,
        norm=norm,
        public_x=np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat))),
        net=net,
        denoise=diffusion.EDMDenoiser(net.apply),
        init_params=params,
    )
