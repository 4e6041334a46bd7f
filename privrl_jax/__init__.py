"""privrl_jax: differentially private reinforcement learning in JAX."""

__version__ = "0.1.0"
