"""privrl_jax: differentially private reinforcement learning in JAX.

The subpackages (``privacy``, ``agents``, ``synth``, ``ope``, ``planning``, ``eval``,
...) are the API; modules whose name starts with ``_`` are not, and may change without
notice.
"""

from privrl_jax._provenance import provenance

__version__ = "0.1.0"

__all__ = ["provenance"]
