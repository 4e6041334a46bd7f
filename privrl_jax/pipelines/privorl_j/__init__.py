"""PrivORL-j end to end.

Fragments, curiosity pre-training on public trajectories, trajectory-level DP
fine-tuning, stitched trajectory synthesis, evaluation.

``run(config, run_dir)`` writes the same run directory as PrivORL-n
(:mod:`privrl_jax.pipelines.privorl_n`):

- the **release** (may be published): ``synthetic.hdf5`` (D4RL format, whole
  trajectories with ``timeouts``), ``ledger.json``, ``report.json`` (DP plan, spend,
  agents trained on the synthetic data, stitching quality of the synthetic trajectories)
  and ``config.yaml``;
- the **audit** (``audit/``, reads the sensitive data without DP; never publish):
  fidelity against the sensitive steps, agents trained on the real trajectories,
  stitching quality of the real ones;
- ``checkpoints/`` (hold the secret noise key: never publish) and ``report.md``.

Privacy (docs/design.md, contracts 2-6 and 8; PrivORL Sec. VII): the unit is one
sensitive trajectory. Its fragments are the unit's items; ``run_dp_loop``
Poisson-samples trajectories with q = batch trajectories / N trajectories, the plan
clips each trajectory's whole gradient (summed over its fragments) once, noise is added
once, every step is in the ledger before its checkpoint. The normaliser is fitted on
public data only; ``max_fragments`` and ``horizon`` are config values.

The modules split it by role: :mod:`.task` (the trajectories and the public task, built
once per run and passed down), :mod:`.train` (the synthesizer of ``model.kind``,
pre-training, DP fine-tuning, synthesis), :mod:`.runner` (the run: inputs, ledger,
release, report), :mod:`.audit` (NOT DP: the release against the sensitive
trajectories) and :mod:`.report` (Markdown). Fragment encoding and stitching are
``synth.fragment_items`` / ``synth.stitch_fragments``, stitching gaps
``eval.stitching_gaps``.
"""

from privrl_jax.pipelines._privorl_j_config import (
    DataConfig,
    EvalConfig,
    FinetuneConfig,
    ModelConfig,
    PretrainConfig,
    PrivORLJConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._synth.release import NOT_PRIVATE_SEED
from privrl_jax.pipelines.privorl_j.audit import audit_release
from privrl_jax.pipelines.privorl_j.report import render_markdown
from privrl_jax.pipelines.privorl_j.runner import run
from privrl_jax.pipelines.privorl_j.task import (
    PrivORLJTask,
    build_task,
    dataset_id,
    flat_transitions,
    load_data,
)
from privrl_jax.pipelines.privorl_j.train import (
    DP_STEP,
    Synthesizer,
    finetune,
    make_plan,
    make_synthesizer,
    pretrain,
    synthesize,
)

__all__ = [
    "DP_STEP",
    "NOT_PRIVATE_SEED",
    "DataConfig",
    "EvalConfig",
    "FinetuneConfig",
    "ModelConfig",
    "PretrainConfig",
    "PrivORLJConfig",
    "PrivORLJTask",
    "SynthesisConfig",
    "Synthesizer",
    "audit_release",
    "build_task",
    "dataset_id",
    "finetune",
    "flat_transitions",
    "load",
    "load_data",
    "make_plan",
    "make_synthesizer",
    "pretrain",
    "render_markdown",
    "run",
    "synthesize",
]
