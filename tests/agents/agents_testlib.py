"""Helpers for the agent tests: a tiny one-step bandit with a known best action."""

import jax
import jax.numpy as jnp

from privrl_jax.data import Transitions

BEST_ACTION = jnp.array([0.5, -0.3])
TINY = {"hidden_dims": (32, 32)}


def bandit_dataset(key: jax.Array, n: int = 2048) -> Transitions:
    """One-step bandit: reward -||a - a*||^2, every transition terminal.

    Observations are N(0, I_2) noise (irrelevant to the reward), so the optimal
    policy is the constant a* = (0.5, -0.3). Actions are uniform on [-1, 1]^2: the
    data cover the action box, and behaviour cloning alone would output the data
    mean, 0, at distance |a*| = 0.58 from a*.
    """
    k_obs, k_act = jax.random.split(key)
    obs = jax.random.normal(k_obs, (n, 2))
    actions = jax.random.uniform(k_act, (n, 2), minval=-1.0, maxval=1.0)
    rewards = -jnp.sum((actions - BEST_ACTION) ** 2, axis=-1)
    return Transitions(
        observations=obs,
        actions=actions,
        rewards=rewards,
        next_observations=obs,
        terminals=jnp.ones((n,)),
        timeouts=jnp.zeros((n,)),
    )


# -- side by side with d3rlpy (tests *_vs_d3rlpy.py; torch and d3rlpy imported lazily)


def random_batches(
    seed: int, n: int, batch: int, obs_dim: int, act_dim: int
) -> list[Transitions]:
    """`n` random minibatches; every 7th transition terminal."""
    out = []
    for k in jax.random.split(jax.random.key(seed), n):
        ko, ka, kr, kn = jax.random.split(k, 4)
        out.append(
            Transitions(
                observations=jax.random.normal(ko, (batch, obs_dim)),
                actions=jax.random.uniform(ka, (batch, act_dim), minval=-1, maxval=1),
                rewards=jax.random.normal(kr, (batch,)),
                next_observations=jax.random.normal(kn, (batch, obs_dim)),
                terminals=(jnp.arange(batch) % 7 == 0).astype(jnp.float32),
                timeouts=jnp.zeros((batch,)),
            )
        )
    return out


def torch_minibatch(b: Transitions):
    """The same minibatch as d3rlpy's TorchMiniBatch on the CPU."""
    import d3rlpy
    import numpy as np
    import torch

    t = lambda x: torch.as_tensor(np.array(x, np.float32))
    col = lambda x: t(x).reshape(-1, 1)
    return d3rlpy.torch_utility.TorchMiniBatch(
        observations=t(b.observations),
        actions=t(b.actions),
        rewards=col(b.rewards),
        next_observations=t(b.next_observations),
        next_actions=t(b.actions),
        returns_to_go=col(b.rewards),
        terminals=col(b.terminals),
        intervals=col(jnp.ones(b.rewards.shape[0])),
        device="cpu:0",
        numpy_batch=None,
    )


def dense_from_torch(sd: dict, prefix: str, out: str) -> dict:
    """d3rlpy's 2-layer encoder + head (torch Linear, weight [out, in]) -> our MLP's
    Dense params (kernel [in, out])."""
    names = [
        f"{prefix}_encoder._layers.0",
        f"{prefix}_encoder._layers.2",
        f"{prefix}{out}",
    ]
    return {
        f"Dense_{i}": {
            "kernel": jnp.asarray(sd[n + ".weight"].numpy().T),
            "bias": jnp.asarray(sd[n + ".bias"].numpy()),
        }
        for i, n in enumerate(names)
    }


def max_abs_gap(a, b) -> float:
    """Largest |a - b| over two pytrees of the same structure."""
    return max(
        float(jnp.max(jnp.abs(x - y)))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
