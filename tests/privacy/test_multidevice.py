"""Data-parallel DP-SGD (vmap and ghost clipping) on 4 CPU devices equals one device
(own process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


@pytest.mark.slow  # CI time (issue 25): runs with -m slow
def test_four_devices_equal_one_device():
    env = dict(
        os.environ,
        XLA_FLAGS=os.environ.get("XLA_FLAGS", "")
        + " --xla_force_host_platform_device_count=4",
        JAX_PLATFORMS="cpu",
    )
    script = Path(__file__).with_name("_multidevice_script.py")
    out = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["n_dev"] == 4
    assert (
        res["max_param_diff"] < 1e-5
    )  # same parameters after 5 steps, up to summation order
    assert res["replicas_equal"]  # noise drawn once from a replicated key
    assert res["num_units"] == res["num_units_single"] == 15
    # Ghost clipping inside the data-parallel step: same parameters as on one device,
    # and as vmap.
    assert res["ghost_max_param_diff"] < 1e-5
    assert res["ghost_vs_vmap_param_diff"] < 1e-5
    assert res["ghost_num_units"] == [15, 15]
    # Noise on the aggregate: sigma*C/(qN) = 2*0.5/1 = 1, not sqrt(4) or 1/4 of it.
    assert abs(res["noise_std"] - 1.0) < 6 / np.sqrt(2 * 400_000)
