"""Reference returns for normalised scores (D4RL's convention).

`normalized_score = 100 * (R - R_random) / (R_expert - R_random)`, with R_random the
mean return of actions uniform in [-1, 1]^2 and R_expert the mean return of the
noise-free waypoint expert, each over 1000 episodes from the env's reset distribution
(standard errors: random <= 2.4, expert <= 0.5; see
benchmarks/results/reference_returns.json). Produced by

    PYTHONPATH=. python benchmarks/reference_returns.py --episodes 1000 --seed 0

(jax 0.10.2, CPU). Rerun it after any change to the maze dynamics, layouts,
rewards or the expert, and paste the new means here.

Our dynamics move the ball up to 0.45 cells per step (D4RL's MuJoCo point mass is ~10x
slower per step), so the expert reaches the goal within 20 / 33 / 58 steps and its
return is close to the episode length; these numbers are therefore not comparable to
D4RL's reference scores.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from privrl_jax.envs._registry import MAZE_ENVS, canonical_name

# env name -> (random mean return, expert mean return).
REFERENCE_RETURNS: dict[str, tuple[float, float]] = {
    "maze2d-umaze": (38.282, 290.413),
    "maze2d-umaze-dense": (68.662, 292.177),
    "maze2d-medium": (17.956, 578.914),
    "maze2d-medium-dense": (47.079, 581.106),
    "maze2d-large": (9.381, 771.295),
    "maze2d-large-dense": (36.757, 774.364),
}

assert set(REFERENCE_RETURNS) == set(MAZE_ENVS)


def reference_returns(env_name: str) -> tuple[float, float]:
    """`(R_random, R_expert)` for a maze2d task.

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
      env_name: a maze2d task (D4RL's "-v1" suffix accepted).
      returns: raw episode returns, any shape.

    Returns:
      Normalised scores, same shape as `returns`: 0 = uniform-random policy, 100 = the
      waypoint expert.

    Raises:
      ValueError: unknown env.

    >>> float(normalized_score("maze2d-umaze", reference_returns("maze2d-umaze")[1]))
    100.0
    """
    r_random, r_expert = reference_returns(env_name)
    returns = jnp.asarray(returns, jnp.float32)
    return 100.0 * (returns - r_random) / (r_expert - r_random)
