"""Run in its own process with 4 fake CPU devices (see test_multidevice.py)."""

import json
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from privrl_jax.privacy import DPTrainState
from privrl_jax.privacy._aggregation import dpsgd, make_dp_step
from privrl_jax.privacy._clipping import clipped_grad


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.silu(nn.Dense(32)(x)))[0]


def main():
    n_dev = len(jax.devices())
    model = MLP()
    params = model.init(jax.random.key(0), jnp.zeros(5))

    def loss(p, item, key):
        x, y = item
        return (model.apply(p, x + 0.01 * jax.random.normal(key, x.shape)) - y) ** 2

    mesh = Mesh(np.array(jax.devices()), ("data",))

    def train(method, devices):
        """Five DP-SGD steps; ``devices`` 1 (plain jit) or all (data-parallel over the
        mesh)."""
        clip = clipped_grad(
            loss, l2_clip_norm=0.5, uses_key=True, microbatch_size=2, method=method
        )
        tx = dpsgd(
            optax.adam(1e-2),
            noise_multiplier=1.0,
            l2_clip_norm=0.5,
            expected_batch_size=16.0,
            key=jax.random.key(1),
        )
        step = jax.jit(make_dp_step(clip, tx, mesh=mesh if devices > 1 else None).step)
        state = DPTrainState(params, tx.init(params))
        if devices > 1:
            state = jax.device_put(state, NamedSharding(mesh, P()))
        for t in range(5):
            kx, ky, kl = jax.random.split(jax.random.key(100 + t), 3)
            x = jax.random.normal(kx, (16, 2, 5))
            y = jax.random.normal(ky, (16, 2))
            mask = jnp.ones((16, 2), bool).at[t].set(False)
            state, metrics = step(state, (x, y), mask, kl)
        return jax.tree_util.tree_leaves(state.params), metrics

    def max_diff(a, b):
        return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(a, b))

    leaves1, m1 = train("vmap", 1)
    leaves4, m4 = train("vmap", n_dev)
    ghost1, g1 = train("ghost", 1)
    ghost4, g4 = train("ghost", n_dev)
    replicas_equal = all(
        all(
            np.array_equal(
                np.asarray(sh.data), np.asarray(leaf.addressable_shards[0].data)
            )
            for sh in leaf.addressable_shards
        )
        for leaf in leaves4 + ghost4
    )
    # Aggregate noise std with zero gradients: sigma*C / (qN) whatever the device count.
    big = {"w": jnp.zeros(400_000)}
    txn = dpsgd(
        optax.sgd(1.0),
        noise_multiplier=2.0,
        l2_clip_norm=0.5,
        expected_batch_size=1.0,
        key=jax.random.key(3),
    )
    zero_loss = lambda p, x: 0.0 * jnp.sum(p["w"][:1] * x)  # noqa: E731
    stepn = jax.jit(
        make_dp_step(clipped_grad(zero_loss, l2_clip_norm=0.5), txn, mesh=mesh).step
    )
    sn = jax.device_put(DPTrainState(big, txn.init(big)), NamedSharding(mesh, P()))
    sn, _ = stepn(sn, jnp.ones((8, 1, 1)), jnp.ones((8, 1), bool))
    json.dump(
        {
            "n_dev": n_dev,
            "max_param_diff": max_diff(leaves1, leaves4),
            "ghost_max_param_diff": max_diff(ghost1, ghost4),  # ghost, 4 devices vs 1
            "ghost_vs_vmap_param_diff": max_diff(
                ghost4, leaves1
            ),  # ghost, 4 devices vs vmap, 1
            "ghost_num_units": [int(g1.num_units), int(g4.num_units)],
            "replicas_equal": replicas_equal,
            "num_units": int(m4.num_units),
            "num_units_single": int(m1.num_units),
            "noise_std": float(jnp.std(sn.params["w"])),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
