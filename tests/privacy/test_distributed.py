"""The pieces of a multi-process DP step that need no second process: the split, the
local
microbatches and the settings (the end-to-end runs are in
tests/pipelines/test_multihost.py)."""

import numpy as np
import pytest

from privrl_jax import privacy
from privrl_jax.privacy import _distributed as dist
from privrl_jax.privacy._sampling import IndexBatch


@pytest.mark.parametrize("n,p", [(10, 1), (10, 3), (7, 7), (1000, 4), (13, 2)])
def test_the_blocks_partition_the_units_in_order(n, p):
    ranges = [dist.Topology(i, p).unit_range(n) for i in range(p)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, disjoint
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1  # balanced, whatever the data


def test_local_microbatches_hold_exactly_the_sampled_units_of_each_block():
    sampler = privacy.PoissonSampler(
        dataset_size=100, sampling_rate=0.3, microbatch_size=8
    )
    for t in range(5):
        batch = sampler.sample(np.random.default_rng(t))
        wanted = np.sort(batch.indices[batch.mask])
        got = []
        for pid in range(3):
            lo, hi = dist.Topology(pid, 3).unit_range(100)
            local = dist.local_microbatches(batch, lo, hi)
            assert (
                local.indices.shape[1:] == (8,)
                and local.mask.shape == local.indices.shape
            )
            # As few microbatches as the block needs, padding masked.
            assert local.indices.shape[0] == -(-local.size // 8)
            units = local.indices[local.mask] + lo
            assert ((units >= lo) & (units < hi)).all()
            got.append(units)
        np.testing.assert_array_equal(np.sort(np.concatenate(got)), wanted)


def test_an_empty_share_gives_no_microbatch():
    batch = IndexBatch(np.array([[1, 2, 0, 0]]), np.array([[True, True, False, False]]))
    local = dist.local_microbatches(batch, 50, 100)
    assert local.indices.shape == (0, 4) and local.size == 0


def test_settings_from_the_environment():
    assert dist.DistributedConfig.from_env({}) is None
    cfg = dist.DistributedConfig.from_env(
        {
            "PRIVRL_COORDINATOR": "h:1",
            "PRIVRL_NUM_PROCESSES": "4",
            "PRIVRL_PROCESS_ID": "3",
        }
    )
    assert (cfg.coordinator_address, cfg.num_processes, cfg.process_id, cfg.auto) == (
        "h:1",
        4,
        3,
        False,
    )
    assert dist.DistributedConfig.from_env({"PRIVRL_DISTRIBUTED": "auto"}).auto
    with pytest.raises(ValueError, match="coordinator address"):
        dist.DistributedConfig.from_env(
            {"PRIVRL_NUM_PROCESSES": "2", "PRIVRL_PROCESS_ID": "0"}
        )
    with pytest.raises(ValueError, match=r"process id must be in \[0, 2\)"):
        dist.DistributedConfig("h:1", 2, 2)
    with pytest.raises(ValueError, match="host:port"):
        dist.DistributedConfig("h", 2, 0)
    with pytest.raises(ValueError, match="must be integers"):
        dist.DistributedConfig.from_env(
            {"PRIVRL_NUM_PROCESSES": "two", "PRIVRL_PROCESS_ID": "0"}
        )
