"""What a published number ran with: package versions, Python, platform, devices."""

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
    """The stack a result ran on, as a JSON-ready dict to store beside it.

    Holds the versions of the installed stack (absent extras omitted), Python, the OS,
    the CPU (model and vector instruction sets) and JAX's backend and devices.

    A deterministic run is reproducible only with the same versions and, for XLA on a
    CPU, the same instruction set: the same seed can train differently on another
    processor (issue 26: a PATE-GAN run's fidelity moved with ``--xla_cpu_max_isa``).
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
        "cpu_isa": _cpu_isa(),
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


# The vector extensions XLA's CPU code generation can target (``--xla_cpu_max_isa``
# caps them); "model name" alone is masked on some VMs ("AMD EPYC").
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
)


def _cpu_isa() -> list[str]:
    """The CPU's :data:`ISA_FLAGS` from ``/proc/cpuinfo`` (empty where unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [x for x in ISA_FLAGS if x in have]
    except OSError:
        pass
    return []
