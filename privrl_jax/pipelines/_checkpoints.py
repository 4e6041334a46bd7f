"""The pipelines' checkpoints: the DP core's :class:`privrl_jax.privacy.Checkpoints`."""

from privrl_jax.privacy import Checkpoints

__all__ = ["Checkpoints"]
