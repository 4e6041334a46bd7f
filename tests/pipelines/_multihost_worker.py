"""One process of a DP run for test_multihost.py (run as a script, alone or under
launch_local).

argv[1] is a JSON object: out (run directory prefix), methods, steps, every,
data_parallel, die ("pid:step" makes that process exit abruptly before that step's
collective).
"""

import json
import os
import sys
from pathlib import Path

from privrl_jax.privacy import _distributed as dist

TOPO = dist.initialize(dist.DistributedConfig.from_env())  # before any other JAX call

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from privrl_jax import privacy  # noqa: E402
from privrl_jax.pipelines._checkpoints import Checkpoints  # noqa: E402
from privrl_jax.pipelines._dp_loop import DPSecret, LoopStats, run_dp_loop  # noqa: E402

N, ITEMS, DIM = 24, 2, 5


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.silu(nn.Dense(8)(x)))[0]


def main():
    cfg = json.loads(sys.argv[1])
    model = MLP()
    x = jax.random.normal(jax.random.key(0), (N, ITEMS, DIM))
    y = jnp.sin(x.sum(-1)) * 3
    data = {"x": np.asarray(x), "y": np.asarray(y)}
    params = model.init(jax.random.key(1), jnp.zeros(DIM))
    die_pid, die_step = (int(v) for v in cfg.get("die", "-1:-1").split(":"))

    def loss(
        p, item, key
    ):  # randomised, like EDM's noise levels: each unit keeps its own key
        x = item["x"] + 0.1 * jax.random.normal(key, item["x"].shape)
        return (model.apply(p, x) - item["y"]) ** 2

    def public_rows(state, acc, t):  # no public rows: the hook only simulates a crash
        if TOPO.process_id == die_pid and t == die_step:
            os._exit(3)
        return state, acc

    def params_of(s):
        return s

    def update(s, g):
        return jax.tree_util.tree_map(lambda a, b: a - 0.5 * b, s, g)

    def sgd(clipped):  # one update for every clip method: fit compiles it once
        return privacy.DPMethod(clipped, params_of, update, public_rows)

    sampler = privacy.PoissonSampler(
        dataset_size=N, sampling_rate=0.1, microbatch_size=4
    )
    plan = privacy.DPPlan(
        sampler=sampler, l2_clip_norm=1.0, steps=cfg["steps"], noise_multiplier=1.0
    )
    result = {
        "process_id": TOPO.process_id,
        "num_processes": TOPO.num_processes,
        "devices": jax.local_device_count(),
    }
    for method in cfg["methods"]:
        out = Path(f"{cfg['out']}-{method}")
        ledger = None
        if TOPO.is_primary:
            ledger = privacy.Ledger.open(
                out,
                dataset_id="toy",
                dataset_size=N,
                target_epsilon=100.0,
                target_delta=1e-5,
            )
        stats = LoopStats()
        # Only process 0's secret may count: the others are handed a different one on
        # purpose.
        secret = DPSecret.from_seed(7 + 1000 * TOPO.process_id)
        state, used = run_dp_loop(
            plan,
            sgd(plan.clipped_grad(loss, method=method, uses_key=True)),
            params,
            TOPO.local_block(data),
            ckpt=Checkpoints(out / "ckpt"),
            ledger=ledger,
            what="toy step",
            secret=secret,
            loss_key=jax.random.key(2),
            checkpoint_every=cfg["every"],
            stats=stats,
            topology=TOPO,
            data_parallel=cfg["data_parallel"],
        )
        result[method] = {
            "params": [
                np.asarray(v).ravel().tolist() for v in jax.tree_util.tree_leaves(state)
            ],
            "sampled_units": stats.sampled_units,
            "local_units": stats.local_units,
            "secret": used.words.tolist(),
        }
    Path(f"{cfg['out']}-result-{TOPO.process_id}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
