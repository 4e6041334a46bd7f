"""POOL end to end on lost-sales inventory: data, private plan, policy, report.

``run(config, run_dir)`` writes into ``run_dir``:

- the **release** (may be published): ``policy.npz`` (the private Q tables at the
  cells, the public geometry and candidate actions) with ``policy.json`` (how to
  read it), ``ledger.json`` (the zCDP release: one ``GaussianDpEvent`` per run,
  rho = 1 / (2 sigma^2)), ``report.json`` / ``report.md`` (rho, epsilon, the
  relative optimality gap against the SAA benchmark), ``config.yaml`` and
  ``plots/`` -- the evaluation runs the released policy in the simulator and
  never reads the sensitive episodes;
- ``checkpoints/dp/``: the secret noise key, in the DP loop's store
  (``privacy.load_or_create_secret``; never publish).

The sensitive episodes are simulated from the public ``seed`` (a data holder
would load its own records). The noise comes from ``DPSecret.fresh()``; with
``privacy.noise_seed`` set the run is NOT PRIVATE and every output says so. The
ledger's budget is ``privacy.rho_budget`` in zCDP rho (``Ledger.open(rho_budget=)``),
checked before any noise is drawn: the run's rho plus what the ledger already holds
must fit it. A rerun of a finished run spends nothing; a run killed after its ledger
entry recomputes the same release from the stored secret.

The modules split it by role: :mod:`.task` (the public task, built once per run and
passed down), :mod:`.runner` (ledger, secret, release, report), :mod:`.release` (the
method's Q tables and the policy files), :mod:`.evaluate` (the release in the
simulator against the SAA benchmark) and :mod:`.report` (Markdown and plots).
"""

from privrl_jax.pipelines._pool_config import (
    EvalConfig,
    InventoryEnvConfig,
    PoolAlgoConfig,
    PoolPrivacyConfig,
    PoolRunConfig,
    load,
)
from privrl_jax.pipelines.pool.evaluate import evaluate
from privrl_jax.pipelines.pool.release import (
    POLICY_FILE,
    POLICY_META,
    load_policy,
    plan,
    write_policy,
    write_policy_meta,
)
from privrl_jax.pipelines.pool.report import (
    GAPS_PLOT,
    POLICY_PLOT,
    render_markdown,
    write_plots,
)
from privrl_jax.pipelines.pool.runner import (
    NOT_PRIVATE_SEED,
    SECRET_DIR,
    WHAT,
    open_ledger,
    release_secret,
    run,
)
from privrl_jax.pipelines.pool.task import (
    BaseStockBehaviour,
    PoolTask,
    build,
    build_params,
    build_task,
    dataset_id,
    demand_series,
    make_geometry,
    make_mechanism,
)

__all__ = [
    "GAPS_PLOT",
    "NOT_PRIVATE_SEED",
    "POLICY_FILE",
    "POLICY_META",
    "POLICY_PLOT",
    "SECRET_DIR",
    "WHAT",
    "BaseStockBehaviour",
    "EvalConfig",
    "InventoryEnvConfig",
    "PoolAlgoConfig",
    "PoolPrivacyConfig",
    "PoolRunConfig",
    "PoolTask",
    "build",
    "build_params",
    "build_task",
    "dataset_id",
    "demand_series",
    "evaluate",
    "load",
    "load_policy",
    "make_geometry",
    "make_mechanism",
    "open_ledger",
    "plan",
    "release_secret",
    "render_markdown",
    "run",
    "write_plots",
    "write_policy",
    "write_policy_meta",
]
