"""Config sections that pipelines of different methods share.

No jax: loading a config needs none.

``privacy`` is the (epsilon, delta) budget of every epsilon-accounted pipeline:
PrivORL-n, PrivORL-j, the marginal and PATE-GAN baselines, and GPOPE. POOL states its
budget in rho-zCDP (``_pool_config.PoolPrivacyConfig``), another quantity, so it keeps
its own section. The defaults here are the synthetic-data pipelines'; another method's
live in its ``configs/<group>/defaults.yaml`` (GPOPE: epsilon = 1, delta = 1e-5).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from privrl_jax import privacy
from privrl_jax.pipelines._config import MAX_ROWS, Bound, Section, at_least

# Where agents are scored: ``jax`` (our JAX envs) or ``mujoco`` (D4RL's real MuJoCo
# tasks, the ``mujoco`` extra); `envs.check_eval_backend` checks it against the env.
EvalBackend = Literal["jax", "mujoco"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivacyConfig(Section):
    """Target (epsilon, delta) of the run.

    epsilon = inf runs without noise (the non-private ablation).

    ``dataset_size`` declares N, the number of sensitive privacy units (PrivORL-n:
    transitions; PrivORL-j: trajectories), as a public quantity (the sampling rate and
    the normaliser depend on it). Left empty, N is read from the data and the report
    records that it was treated as public, as Opacus and jax_privacy do. GPOPE's N is
    ``env.num_trajectories``, public by construction: leave it empty there.

    ``noise_seed`` fixes the DP noise and the batches for tests and exact reproduction.
    Anyone who reads it can recompute the noise, so such a run is NOT private and its
    report says so. Left empty (the default), the secret comes from the OS's entropy
    source and lives only in the run's checkpoints.
    """

    epsilon: float = 10.0
    delta: float = 1e-6
    accountant: privacy.Accountant = "rdp"
    dataset_size: int | None = None
    noise_seed: int | None = None

    BOUNDS: ClassVar[dict[str, Bound]] = {"dataset_size": at_least(2, MAX_ROWS)}

    SECTION = "privacy"

    def __post_init__(self):
        super().__post_init__()
        if not self.epsilon > 0:
            raise ValueError(
                f"privacy.epsilon must be > 0 (inf for no DP); got {self.epsilon}."
            )
        privacy.validate_delta(self.delta)
