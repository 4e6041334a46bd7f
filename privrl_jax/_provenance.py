"""What a published number ran with: package versions, Python, platform and JAX's
devices."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any

# The packages whose versions can move a number we publish (the stack and its numerics).
PACKAGES = (
    "privrl_jax",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "dp-accounting",
    "chex",
    "orbax-checkpoint",
    "gymnax",
    "numpy",
    "scipy",
    "scikit-learn",
    "h5py",
    "torch",
    "opacus",
    "d3rlpy",
    "mujoco",
    "gymnasium-robotics",
    "jax-privacy",
)


def provenance() -> dict[str, Any]:
    """Versions of the installed stack (absent extras omitted), Python, the OS, the CPU
    and JAX's
    backend and devices, as a JSON-ready dict to store beside a result.

    A deterministic run is reproducible only with the same versions and, for XLA on a
    CPU, the
    same instruction set: the same seed can train differently on another processor.
    """
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    out: dict[str, Any] = {
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    if "jax" in sys.modules:  # never import jax just to describe the run
        jax = sys.modules["jax"]
        out["jax_backend"] = jax.default_backend()
        out["jax_devices"] = [str(d) for d in jax.devices()]
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
