"""PrivORL-n end to end.

Data, curiosity-driven pre-training, DP fine-tuning, synthesis, evaluation.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``synthetic.hdf5``, ``ledger.json``,
  ``report.json`` (the DP plan, the privacy spent, scores of agents trained on the
  synthetic data) and ``config.yaml``;
- the **audit** (reads the sensitive data without DP; never publish): ``audit/`` with
  fidelity against the sensitive rows, agents trained on the real data, the
  membership-inference attack and the t-SNE / marginal plots of real rows;
- ``checkpoints/`` (holds the secret noise key: never publish) and ``report.md`` (both
  parts, labelled).

Rerunning the same command after an interruption resumes from the last checkpoint: the
DP steps run in the library's one DP loop (``_dp_loop.run_dp_loop``), which records
every step in the ledger before the checkpoint that contains it and replays batches and
noise from the checkpointed secret.

Privacy (docs/design.md, contracts 2-6 and 8): the unit is one sensitive transition;
Poisson sampling with q = B / N, sigma calibrated for the target (epsilon, delta) over
the planned steps, all bound in one ``privacy.DPPlan``; the normaliser is fitted on
public data only; the agent trained on synthetic data normalises with synthetic
statistics.

The modules split it by role: :mod:`.task` (the data and the public task, built once
per run and passed down), :mod:`.train` (pre-training, DP fine-tuning with FineCur,
synthesis), :mod:`.runner` (the run: inputs, ledger, release, report), :mod:`.audit`
(NOT DP: the release against the sensitive data) and :mod:`.report` (Markdown).
"""

from privrl_jax.pipelines._config import to_dict
from privrl_jax.pipelines._privorl_n_config import (
    DataConfig,
    EvalConfig,
    FinetuneConfig,
    ModelConfig,
    PretrainConfig,
    PrivacyConfig,
    PrivORLNConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._synth.anchor_cache import (
    cached_real_agents,
    data_fingerprint,
    real_agents_key,
    resolve_cache_path,
    write_real_agents_cache,
)
from privrl_jax.pipelines._synth.inputs import validate_data_sources
from privrl_jax.pipelines._synth.release import AUDIT_NOTICE, NOT_PRIVATE_SEED
from privrl_jax.pipelines._synth.scores import agent_scores, fidelity_scorer
from privrl_jax.pipelines.privorl_n.audit import (
    MARGINALS_PLOT,
    TSNE_PLOT,
    audit_release,
    real_agent_scores,
)
from privrl_jax.pipelines.privorl_n.report import column_names, render_markdown
from privrl_jax.pipelines.privorl_n.runner import run
from privrl_jax.pipelines.privorl_n.task import (
    PrivORLNTask,
    build_task,
    collect_transitions,
    dataset_id,
    load_data,
)
from privrl_jax.pipelines.privorl_n.train import (
    DP_STEP,
    finetune,
    make_plan,
    pretrain,
    pretrain_dir,
    synthesize,
)

__all__ = [
    "AUDIT_NOTICE",
    "DP_STEP",
    "MARGINALS_PLOT",
    "NOT_PRIVATE_SEED",
    "TSNE_PLOT",
    "DataConfig",
    "EvalConfig",
    "FinetuneConfig",
    "ModelConfig",
    "PretrainConfig",
    "PrivORLNConfig",
    "PrivORLNTask",
    "PrivacyConfig",
    "SynthesisConfig",
    "agent_scores",
    "audit_release",
    "build_task",
    "cached_real_agents",
    "collect_transitions",
    "column_names",
    "data_fingerprint",
    "dataset_id",
    "fidelity_scorer",
    "finetune",
    "load",
    "load_data",
    "make_plan",
    "pretrain",
    "pretrain_dir",
    "real_agent_scores",
    "real_agents_key",
    "render_markdown",
    "resolve_cache_path",
    "run",
    "synthesize",
    "to_dict",
    "validate_data_sources",
    "write_real_agents_cache",
]
