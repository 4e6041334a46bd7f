"""The PATE-GAN baselines' task: public encoding, GAN sizes and networks, vote noise.

Built once per run from the config and the public data and passed down; the vote noise
is calibrated.
"""

from __future__ import annotations

import dataclasses
import math

import dp_accounting
import jax.numpy as jnp
import numpy as np

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.data import Normalizer as Normaliser
from privrl_jax.pipelines._pategan_config import (
    ModelConfig,
    PateGanPipelineConfig,
    check_teachers,
)
from privrl_jax.pipelines._synth.inputs import (
    check_same_dims,
    encode,
    public_encoding,
)

GENERATORS = {
    "pategan": "PATE-GAN (GNMax votes, data-independent accounting)",
    "pategan_pretrained": "PrePATE-GAN (public pre-training; GNMax votes, "
    "data-independent accounting)",
}


def gan_config(m: ModelConfig) -> synth.PateGanConfig:
    """The algorithm's sizes from the config's ``model`` section."""
    return synth.PateGanConfig(
        num_teachers=m.num_teachers,
        latent_dim=m.latent_dim,
        generator_features=tuple(m.generator_features),
        discriminator_features=tuple(m.discriminator_features),
        learning_rate=m.learning_rate,
        teacher_steps=m.teacher_steps,
        teacher_batch_size=m.teacher_batch_size,
        queries_per_round=m.queries_per_round,
        student_steps=m.student_steps,
        generator_batch_size=m.generator_batch_size,
        generator_steps=m.generator_steps,
        soft_labels=m.soft_labels,
    )


def _votes_event(sigma: float, num_queries: int) -> dp_accounting.DpEvent:
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(sigma), num_queries
    )


def vote_noise_multiplier(
    epsilon: float, delta: float, num_queries: int, accountant: str = "rdp"
) -> float:
    """Smallest sigma (to 1e-4 relative) making the vote queries (epsilon, delta)-DP.

    ``num_queries`` Gaussian vote queries of sensitivity 1, under ``accountant``; 0 at
    epsilon = inf.

    The epsilon of every candidate is dp-accounting's (``privacy.compute_epsilon`` of
    ``SelfComposedDpEvent(GaussianDpEvent(sigma), num_queries)``, the event the ledger
    will hold). The search starts from the one-release sigma times sqrt(num_queries)
    (under RDP the T-fold composition of a Gaussian of sigma is the Gaussian of sigma /
    sqrt(T), exactly) and bisects below it for PLD, which is tighter.
    """
    if math.isinf(epsilon):
        return 0.0
    if num_queries < 1:
        raise ValueError(f"num_queries must be >= 1; got {num_queries}.")

    def eps(s: float) -> float:
        return privacy.compute_epsilon(
            _votes_event(s, num_queries), delta, accountant=accountant
        ).epsilon

    one = (
        privacy.GaussianMechanism(l2_sensitivity=1.0)
        .calibrate(epsilon, delta, "rdp")
        .noise_multiplier
    )
    hi = one * math.sqrt(num_queries)
    while eps(hi) > epsilon:  # rounding: step up until the event is within budget
        hi *= 1 + 1e-6
    lo = hi / 2
    if eps(lo) <= epsilon:
        # Not expected (RDP is an upper bound); stay on the safe side.
        return hi
    while hi - lo > 1e-4 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if eps(mid) <= epsilon else (mid, hi)
    return hi


@dataclasses.dataclass(frozen=True, eq=False)
class PateGanTask:
    """The public side of one PATE-GAN / PrePATE-GAN run.

    Attributes:
      cfg: the run's config.
      layout: how a transition is encoded as one row (``model.next_obs_delta``).
      norm: the normaliser, fitted on the public rows only (contract 5).
      public_rows: the public transitions, encoded and normalised (PrePATE-GAN's
        pre-training data).
      gan: the algorithm's sizes (:func:`gan_config`).
      nets: the generator and discriminator networks.
      sigma: the vote noise multiplier for the run's ``model.num_queries`` queries (0
        at epsilon = inf).
    """

    cfg: PateGanPipelineConfig
    layout: diffusion.TransitionLayout
    norm: Normaliser
    public_rows: np.ndarray
    gan: synth.PateGanConfig
    nets: synth.GanNets
    sigma: float

    @property
    def method(self) -> str:
        """The generator's name in reports and the release's metadata."""
        return GENERATORS[self.cfg.model.name]

    def rows(self, transitions: data.Transitions) -> np.ndarray:
        """``transitions`` encoded with the task's layout and public normaliser."""
        return np.asarray(
            diffusion.normalise(
                self.norm, jnp.asarray(encode(transitions, self.layout))
            )
        )


def build_task(
    cfg: PateGanPipelineConfig, public: data.Transitions, sensitive: data.Transitions
) -> PateGanTask:
    """The task of ``cfg``.

    Of the sensitive data only the dimensions (they must be the public data's) and the
    number of rows (enough for every teacher) are read, a ``ValueError`` otherwise.
    """
    obs_dim, act_dim = check_same_dims(public, sensitive)
    check_teachers(cfg.model.num_teachers, len(sensitive))
    layout, pub_flat, norm = public_encoding(cfg, public, obs_dim, act_dim)
    gan = gan_config(cfg.model)
    pc = cfg.privacy
    return PateGanTask(
        cfg=cfg,
        layout=layout,
        norm=norm,
        public_rows=np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat))),
        gan=gan,
        nets=synth.make_nets(gan, layout.encoded_dim),
        sigma=vote_noise_multiplier(
            pc.epsilon, pc.delta, cfg.model.num_queries, pc.accountant
        ),
    )
