"""privrl_jax: differentially private reinforcement learning in JAX.

The subpackages (``privacy``, ``agents``, ``synth``, ``ope``, ``planning``, ``eval``,
...) are the API; modules whose name starts with ``_`` are not, and may change without
notice. ``import privrl_jax`` makes every subpackage an attribute
(``privrl_jax.privacy.fit``), imported on first use (PEP 562), so that the command line
and a config load start without jax.
"""

import importlib as _importlib
from types import ModuleType as _ModuleType

from privrl_jax._provenance import provenance

__version__ = "0.1.0"

SUBPACKAGES = (
    "agents",
    "cli",
    "data",
    "diffusion",
    "envs",
    "eval",
    "experiments",
    "ope",
    "pipelines",
    "planning",
    "privacy",
    "synth",
)

__all__ = ["SUBPACKAGES", "provenance", *SUBPACKAGES]


def __getattr__(name: str) -> _ModuleType:
    if name in SUBPACKAGES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *SUBPACKAGES})
