"""The marginal baselines' task: the public bins, the cliques, the noise multiplier.

Built once per run from the config and the public data and passed down; the noise
multiplier is calibrated.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from privrl_jax import data, diffusion, envs, privacy, synth
from privrl_jax.data import Normalizer as Normaliser
from privrl_jax.pipelines._marginal_config import MarginalConfig
from privrl_jax.pipelines._synth.inputs import check_same_dims, encode

GENERATORS = {
    "pgm": "PGM (mbi)",
    "mst": "MST (mbi)",
    "aim": "AIM (mbi)",
    "privsyn": "PrivSyn (GUM)",
}


def public_discretisation(
    cfg: MarginalConfig, obs_dim: int, act_dim: int
) -> synth.PublicDiscretisation:
    """The bins from the config's declared bounds, else the sensitive env's spaces.

    Both are public.
    """
    m = cfg.model
    if m.obs_low and m.act_low:
        obs_low, obs_high, act_low, act_high = (
            m.obs_low,
            m.obs_high,
            m.act_low,
            m.act_high,
        )
    else:
        if envs.is_mujoco_task_name(cfg.data.sensitive_env):
            raise ValueError(
                f"{cfg.data.sensitive_env} has no JAX env whose spaces bound the "
                "columns; declare "
                "model.obs_low, model.obs_high, model.act_low and model.act_high."
            )
        env, params = envs.make(cfg.data.sensitive_env)
        o, a = env.observation_space(params), env.action_space(params)
        obs_low, obs_high = (
            (m.obs_low, m.obs_high)
            if m.obs_low
            else (np.asarray(o.low), np.asarray(o.high))
        )
        act_low, act_high = (
            (m.act_low, m.act_high)
            if m.act_low
            else (
                np.broadcast_to(np.asarray(a.low, float), (act_dim,)),
                np.broadcast_to(np.asarray(a.high, float), (act_dim,)),
            )
        )
    if len(obs_low) != obs_dim or len(act_low) != act_dim:
        raise ValueError(
            f"the bounds give {len(obs_low)} observation and {len(act_low)} action "
            "coordinates; the "
            f"data have {obs_dim} and {act_dim}."
        )
    return synth.transition_discretisation(
        obs_low=obs_low,
        obs_high=obs_high,
        act_low=act_low,
        act_high=act_high,
        reward_range=m.reward_range,
        obs_bins=m.obs_bins,
        act_bins=m.act_bins,
        reward_bins=m.reward_bins,
        next_obs_delta_bound=m.next_obs_delta_bound or None,
    )


def noise_multiplier(cfg: MarginalConfig) -> float:
    """The noise multiplier (sigma) of one Gaussian release at (epsilon, delta).

    By dp-accounting; 0 at epsilon = inf.
    """
    pc = cfg.privacy
    if math.isinf(pc.epsilon):
        return 0.0
    return (
        privacy.GaussianMechanism(l2_sensitivity=1.0)
        .calibrate(pc.epsilon, pc.delta, pc.accountant)
        .noise_multiplier
    )


@dataclasses.dataclass(frozen=True, eq=False)
class MarginalTask:
    """The public side of one PGM / MST / PrivSyn run.

    Attributes:
      cfg: the run's config.
      obs_dim, act_dim: the observation and action dimensions.
      disc: the public discretisation of a transition's columns.
      cliques: the measured cliques (PGM; MST selects its own).
      sigma: the noise multiplier of the one Gaussian release (0 at epsilon = inf).
      layout, norm: the audit's encoding, PrivORL-n's default (s' - s) with its
        normaliser fitted on the public rows, so the fidelity scores sit beside
        PrivORL-n's.
    """

    cfg: MarginalConfig
    obs_dim: int
    act_dim: int
    disc: synth.PublicDiscretisation
    cliques: tuple[tuple[str, ...], ...]
    sigma: float
    layout: diffusion.TransitionLayout
    norm: Normaliser

    @property
    def method(self) -> str:
        """The generator's name in reports and the release's metadata."""
        return GENERATORS[self.cfg.model.name]


def build_task(
    cfg: MarginalConfig, public: data.Transitions, sensitive: data.Transitions
) -> MarginalTask:
    """The task of ``cfg``.

    Of the sensitive data only the dimensions are read (they must be the public data's,
    a ``ValueError`` otherwise), and the cliques must name known columns.
    """
    obs_dim, act_dim = check_same_dims(public, sensitive)
    disc = public_discretisation(cfg, obs_dim, act_dim)
    cliques = tuple(
        tuple(c) for c in cfg.model.cliques
    ) or synth.default_transition_cliques(obs_dim, act_dim)
    if cfg.model.name == "aim" and cfg.model.aim_rounds <= len(disc.names):
        raise ValueError(
            f"model.aim_rounds must be > the {len(disc.names)} columns (AIM prices "
            f"the 1-way marginals as that many rounds); got {cfg.model.aim_rounds}."
        )
    if cfg.model.name == "aim" and cfg.model.aim_max_clique_size > len(disc.names):
        raise ValueError(
            f"model.aim_max_clique_size must be <= the {len(disc.names)} columns; "
            f"got {cfg.model.aim_max_clique_size}."
        )
    unknown = sorted({c for cl in cliques for c in cl} - set(disc.names))
    if unknown:
        raise ValueError(
            f"model.cliques names unknown columns {unknown}; the columns are "
            f"{list(disc.names)}."
        )
    layout = diffusion.TransitionLayout(
        obs_dim=obs_dim, act_dim=act_dim, next_obs_delta=True
    )
    return MarginalTask(
        cfg=cfg,
        obs_dim=obs_dim,
        act_dim=act_dim,
        disc=disc,
        cliques=cliques,
        sigma=noise_multiplier(cfg),
        layout=layout,
        norm=diffusion.fit_normaliser_on_public(
            encode(public, layout), one_hot_mask=layout.one_hot_mask()
        ),
    )
