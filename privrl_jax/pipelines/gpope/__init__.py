"""GPOPE end to end on the medical chain MDP, Mountain Car or HIV.

Data, plan, Algorithm 1, report, audit.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``weights.json`` (theta, w; V(s) = theta .
  phi(s)), ``ledger.json``, ``report.json`` (the plan, the calibrated sigma next to the
  paper's Theorem-1 sigma, epsilon spent) and ``config.yaml``;
- the **audit** (reads the sensitive trajectories without DP; never publish):
  ``audit/audit.json``: the MSE of the release against the true V^pi (chain: exact, by a
  linear solve; Mountain Car and HIV: Monte Carlo rollouts of the target policy at
  public evaluation states, ``privrl_jax.ope.mc_values``) and against the off-policy
  LSTD solution of the data;
- with ``plots`` on: ``values.png`` in the release (the estimate V(s) = theta . phi(s)
  per chain state, or sorted over the public evaluation states; from the DP weights and
  public features only) and ``audit/values_vs_truth.png`` in the audit (the estimate
  against the true V^pi and the LSTD solution, MSEs in the legend);
- ``checkpoints/`` (the secret noise key and sampling seed: never publish) and
  ``report.md`` (both parts, labelled).

GPOPE's iterations run in the library's one DP loop (``privacy.fit``) with the library's
one GPOPE update, ``ope.gpope_method``: the unit is one trajectory
(``ope.gpope_units``, item mask ``[m, T]``), and the loop draws the secret batches and
noise, records the ledger before each checkpoint, checks the budget and resumes. The
release is ``ope.gpope`` on ``ope.sample_schedule(plan, secret.sampling_seed)`` with
``secret.noise_key``, bit for bit. Rerunning the same command resumes and spends nothing
twice.

The modules split it by role: :mod:`.task` (the public task, built once per run and
passed down), :mod:`.runner` (plan, DP loop, release, report), :mod:`.audit` (NOT DP:
the release against the truth) and :mod:`.report` (Markdown and plots).
"""

from privrl_jax.pipelines._gpope_config import (
    ChainConfig,
    GPOPEConfig,
    GPOPERunConfig,
    PrivacyConfig,
    TruthConfig,
    load,
)
from privrl_jax.pipelines.gpope.audit import AUDIT_NOTICE, audit_release, references
from privrl_jax.pipelines.gpope.report import (
    AUDIT_PLOT,
    VALUES_PLOT,
    plot_audit_values,
    plot_release_values,
    render_markdown,
)
from privrl_jax.pipelines.gpope.runner import (
    DP_STEP,
    NOT_PRIVATE_SEED,
    WEIGHTS_FILE,
    make_plan,
    run,
)
from privrl_jax.pipelines.gpope.task import (
    GPOPETask,
    build_task,
    collect_data,
    dataset_id,
    features_name,
    lstd_min_norm,
    release_values,
    true_values,
)

__all__ = [
    "AUDIT_NOTICE",
    "AUDIT_PLOT",
    "DP_STEP",
    "NOT_PRIVATE_SEED",
    "VALUES_PLOT",
    "WEIGHTS_FILE",
    "ChainConfig",
    "GPOPEConfig",
    "GPOPERunConfig",
    "GPOPETask",
    "PrivacyConfig",
    "TruthConfig",
    "audit_release",
    "build_task",
    "collect_data",
    "dataset_id",
    "features_name",
    "load",
    "lstd_min_norm",
    "make_plan",
    "plot_audit_values",
    "plot_release_values",
    "references",
    "release_values",
    "render_markdown",
    "run",
    "true_values",
]
