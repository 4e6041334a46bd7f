"""Offline-RL datasets: pytrees, D4RL-format HDF5 I/O, normalisation."""

from privrl_jax.data._types import Transitions

__all__ = ["Transitions"]
