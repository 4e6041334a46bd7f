"""Run in its own process with 4 fake CPU devices (see test_multidevice.py)."""

import json
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from privrl_jax.privacy import DPTrainState, clipped_grad, dpsgd, make_dp_step


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

    clip = clipped_grad(loss, l2_clip_norm=0.5, uses_key=True, microbatch_size=2)
    tx = dpsgd(optax.adam(1e-2), noise_multiplier=1.0, l2_clip_norm=0.5, expected_batch_size=16.0,
               key=jax.random.key(1))
    single = jax.jit(make_dp_step(clip, tx).step)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    multi = jax.jit(make_dp_step(clip, tx, mesh=mesh).step)
    s1 = DPTrainState(params, tx.init(params))
    s4 = jax.device_put(s1, NamedSharding(mesh, P()))
    for t in range(5):
        kx, ky, kl = jax.random.split(jax.random.key(100 + t), 3)
        x = jax.random.normal(kx, (16, 2, 5))
        y = jax.random.normal(ky, (16, 2))
        mask = jnp.ones((16, 2), bool).at[t].set(False)
        s1, m1 = single(s1, (x, y), mask, kl)
        s4, m4 = multi(s4, (x, y), mask, kl)
    leaves1 = jax.tree_util.tree_leaves(s1.params)
    leaves4 = jax.tree_util.tree_leaves(s4.params)
    max_diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(leaves1, leaves4))
    replicas_equal = all(
        all(np.array_equal(np.asarray(sh.data), np.asarray(leaf.addressable_shards[0].data))
            for sh in leaf.addressable_shards)
        for leaf in leaves4
    )
    # Aggregate noise std with zero gradients: sigma*C / (qN) whatever the device count.
    big = {"w": jnp.zeros(400_000)}
    txn = dpsgd(optax.sgd(1.0), noise_multiplier=2.0, l2_clip_norm=0.5, expected_batch_size=1.0,
                key=jax.random.key(3))
    zero_loss = lambda p, x: 0.0 * jnp.sum(p["w"][:1] * x)  # noqa: E731
    stepn = jax.jit(make_dp_step(clipped_grad(zero_loss, l2_clip_norm=0.5), txn, mesh=mesh).step)
    sn = jax.device_put(DPTrainState(big, txn.init(big)), NamedSharding(mesh, P()))
    sn, _ = stepn(sn, jnp.ones((8, 1, 1)), jnp.ones((8, 1), bool))
    json.dump(
        {
            "n_dev": n_dev,
            "max_param_diff": max_diff,
            "replicas_equal": replicas_equal,
            "num_units": int(m4.num_units),
            "num_units_single": int(m1.num_units),
            "noise_std": float(jnp.std(sn.params["w"])),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
