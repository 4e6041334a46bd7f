"""``privrl agent train``'s configuration: one agent on one D4RL-format dataset.

No jax: loading a config needs none; the agents and envs load on the first check.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from privrl_jax.pipelines._config import check_modes, coerce_fields
from privrl_jax.pipelines._sections import EvalBackend

# The offline agents (`agents.ALGORITHMS`; tests/cli/test_config_loader.py keeps the
# two equal).
Algo = Literal["td3bc", "iql", "edac"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentTrainConfig:
    """One agent-training run.

    Attributes:
      algo: "td3bc", "iql" or "edac" (an `Algo`).
      dataset: path to a D4RL-format HDF5 file.
      env: evaluation env name (`privrl_jax.envs.make`), e.g. "maze2d-umaze".
      steps: gradient updates: a multiple of `chunk_size`, or fewer than
        `chunk_size` (then one chunk of `steps` updates).
      seed: PRNG seed (canonicalised to a key here, at the boundary).
      batch_size: minibatch size (CORL: 256); at most the dataset's size.
      chunk_size: updates per jitted scan call (at most `steps`, see above).
      eval_every: evaluation period in updates (a multiple of the chunk); None:
        about ten evaluations per run.
      eval_episodes: episodes per evaluation.
      eval_backend: an `EvalBackend`: "jax" (the JAX env) or "mujoco" (real
        MuJoCo, needs the `mujoco` extra: D4RL's point maze for the ``maze2d-*-v1``
        tasks, and the only
        backend of the locomotion / kitchen tasks, e.g. "hopper-medium-v2" or
        "kitchen-mixed-v0"; `envs.mujoco_task`).
      agent: fields of the algorithm's config (`agents.TD3BCConfig`, ...) that
        differ from CORL's defaults, e.g. {"alpha": 2.5}; `--set agent.alpha=2.5`
        on the command line.
    """

    algo: Algo
    dataset: str
    env: str
    steps: int = 100_000
    seed: int = 0
    batch_size: int = 256
    chunk_size: int = 1000
    eval_every: int | None = None
    eval_episodes: int = 100
    eval_backend: EvalBackend = "jax"
    agent: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        check_modes(self)
        # Lazy: the agents and envs pull in jax, which loading a config does not need.
        from privrl_jax import agents, envs  # noqa: PLC0415

        envs.check_eval_backend(self.eval_backend, self.env)
        # Checked and typed here, before the dataset loads, with the same messages as
        # every other config key (YAML lists become the tuples the agents expect).
        _, agent_config = agents.ALGORITHMS[self.algo]
        agent = coerce_fields(agent_config, self.agent, prefix="agent.")
        try:
            agent_config(**agent)  # the agent config's own value checks
        except ValueError as e:
            raise ValueError(f"agent ({self.algo} config): {e}") from None
        object.__setattr__(self, "agent", agent)
        for name in ("steps", "batch_size", "chunk_size", "eval_episodes"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name}={value!r}: expected a positive int")
        if self.steps % self.resolved_chunk():
            raise ValueError(
                f"steps={self.steps} is not a multiple of "
                f"chunk_size={self.chunk_size}; give --steps as a multiple of "
                "--chunk (e.g. "
                f"{self.steps // self.chunk_size * self.chunk_size or self.chunk_size})"
                " or a --chunk that divides it."
            )
        every = self.eval_every
        if every is not None and (
            isinstance(every, bool)
            or not isinstance(every, int)
            or every <= 0
            or every % self.resolved_chunk()
        ):
            raise ValueError(
                f"eval_every={every!r} is not a positive multiple of the chunk "
                f"({self.resolved_chunk()} updates); give --eval-every as a multiple "
                "of --chunk."
            )

    def resolved_chunk(self) -> int:
        """Updates per jitted call: `chunk_size`, or `steps` when that is smaller."""
        return min(self.chunk_size, self.steps)

    def resolved_eval_every(self) -> int:
        """`eval_every`, or about a tenth of the run in whole chunks."""
        chunk = self.resolved_chunk()
        if self.eval_every is not None:
            return self.eval_every
        return max(chunk, (self.steps // 10) // chunk * chunk)
