"""Reference returns for normalised scores (D4RL's convention).

`normalized_score = 100 * (R - R_random) / (R_expert - R_random)`.

D4RL's tasks (`maze2d-*-v1`, physics "d4rl") use D4RL's published reference returns,
`REF_MIN_SCORE` / `REF_MAX_SCORE` in d4rl/infos.py (Fu et al., arXiv:2004.07219): the
mean return of uniform random actions (scripts/reference_scores/
generate_ref_min_score.py) and of D4RL's waypoint controller
(scripts/reference_scores/maze2d_controller.py), 100 episodes each. Our own
measurements of the same two policies in the JAX maze are in `MEASURED_D4RL_RETURNS`
(shown next to D4RL's numbers, never used for scoring), from the runs stored as
experiment `maze_vs_mujoco` (results/maze_vs_mujoco; jax 0.10.2, CPU; its script
needed the `mujoco` extra and is in git history):

| task | D4RL random | ours random | D4RL expert | ours expert |
|---|---|---|---|---|
| maze2d-umaze-v1 | 23.85 | 31.03 ± 3.39 | 161.86 | 173.85 ± 7.47 |
| maze2d-medium-v1 | 13.13 | 15.49 ± 2.87 | 277.39 | 252.01 ± 14.91 |
| maze2d-large-v1 | 6.70 | 10.70 ± 2.56 | 273.99 | 306.80 ± 19.45 |
| maze2d-umaze-dense-v1 | 68.54 | 74.92 ± 3.25 | 193.66 | 202.77 ± 5.68 |
| maze2d-medium-dense-v1 | 44.26 | 45.46 ± 4.47 | 297.46 | 273.57 ± 14.20 |
| maze2d-large-dense-v1 | 30.57 | 39.06 ± 5.09 | 303.49 | 334.60 ± 18.63 |

(mean ± standard error over 300 episodes; the expert as D4RL's script runs it, 3
controllers x 100 consecutive episodes. D4RL's own numbers are 100-episode means, so
their standard errors are ~1.7x ours (same spread assumed): every row is within 1.1
combined standard errors of D4RL's, and the same protocol around MuJoCo gives the same
means within 2 standard errors.)

The legacy mazes (`maze2d-*` and `maze2d-*-legacy`) keep their own references: the
mean return of actions uniform in [-1, 1]^2 and of the noise-free stateless waypoint
expert, each over 1000 episodes from the env's reset distribution (standard errors:
random <= 2.4, expert <= 0.5; benchmarks/results/reference_returns.json), from

    PYTHONPATH=. python benchmarks/reference_returns.py --episodes 1000 --seed 0

(jax 0.10.2, CPU). The legacy ball moves up to 0.45 cells per step (D4RL's MuJoCo
point mass about 0.05), so those numbers are not comparable to D4RL's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from privrl_jax.envs._registry import D4RL_MAZE_ENVS, MAZE_ENVS, canonical_name

# D4RL's published (REF_MIN_SCORE, REF_MAX_SCORE), d4rl/infos.py.
D4RL_REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    "maze2d-umaze-v1": (23.85, 161.86),
    "maze2d-medium-v1": (13.13, 277.39),
    "maze2d-large-v1": (6.7, 273.99),
    "maze2d-umaze-dense-v1": (68.537689, 193.66285642381482),
    "maze2d-medium-dense-v1": (44.264742, 297.4552547777125),
    "maze2d-large-dense-v1": (30.569041, 303.4857382709002),
}

# Ours, D4RL's protocol in the JAX maze: (random mean, expert mean), for comparison.
MEASURED_D4RL_RETURNS: dict[str, tuple[float, float]] = {
    "maze2d-umaze-v1": (31.03, 173.85),
    "maze2d-medium-v1": (15.49, 252.01),
    "maze2d-large-v1": (10.70, 306.80),
    "maze2d-umaze-dense-v1": (74.92, 202.77),
    "maze2d-medium-dense-v1": (45.46, 273.57),
    "maze2d-large-dense-v1": (39.06, 334.60),
}

# The legacy maze's own (random mean, expert mean).
_LEGACY_RETURNS: dict[str, tuple[float, float]] = {
    "maze2d-umaze": (38.282, 290.413),
    "maze2d-umaze-dense": (68.662, 292.177),
    "maze2d-medium": (17.956, 578.914),
    "maze2d-medium-dense": (47.079, 581.106),
    "maze2d-large": (9.381, 771.295),
    "maze2d-large-dense": (36.757, 774.364),
}

# env name -> (random mean return, expert mean return), for every maze name.
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    **_LEGACY_RETURNS,
    **{name + "-legacy": ref for name, ref in _LEGACY_RETURNS.items()},
    **D4RL_REFERENCE_RETURNS,
}

assert set(REFERENCE_RETURNS) == set(MAZE_ENVS)
assert set(D4RL_REFERENCE_RETURNS) == set(D4RL_MAZE_ENVS)


def reference_returns(env_name: str) -> tuple[float, float]:
    """`(R_random, R_expert)` for a maze2d task (D4RL's published ones for `-v1`).

    Raises:
      ValueError: no reference for this env (the message lists those with one).
    """
    name = canonical_name(env_name)
    if name not in REFERENCE_RETURNS:
        raise ValueError(
            f"no reference returns for env {env_name!r}; normalised scores exist for "
            + ", ".join(REFERENCE_RETURNS)
        )
    return REFERENCE_RETURNS[name]


def normalized_score(env_name: str, returns: jax.typing.ArrayLike) -> jax.Array:
    """D4RL's normalised score, `100 * (R - R_random) / (R_expert - R_random)`.

    Args:
      env_name: a maze2d task.
      returns: raw episode returns, any shape.

    Returns:
      Normalised scores, same shape as `returns`: 0 = uniform-random policy, 100 = the
      waypoint expert (for `-v1`: D4RL's published reference returns).

    Raises:
      ValueError: unknown env.

    >>> float(normalized_score("maze2d-umaze-v1", 161.86))
    100.0
    """
    r_random, r_expert = reference_returns(env_name)
    returns = jnp.asarray(returns, jnp.float32)
    return 100.0 * (returns - r_random) / (r_expert - r_random)
