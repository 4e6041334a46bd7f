"""Private selection over a pipeline's grid (``privrl select``).

Run randomly drawn candidates a random number of times, release only the best,
account the whole search.

``run(config, run_dir)`` loads every candidate of ``candidates.grid`` (a GPOPE config
each), checks that one DP event bounds every run (GPOPE's plan, then a Gaussian score),
checks the selection's epsilon (dp-accounting's ``RepeatAndSelectDpEvent``) against
``privacy.epsilon`` before anything runs, then ``privacy.select`` runs them. Each run's
DP score is minus the squared norm of the noisy mean of the clipped per-trajectory TD
directions ``b_i - A_i theta`` (zero at the TD fixed point GPOPE converges to).

It writes into ``run_dir``:

- the **release** (may be published): ``selected.json`` (the chosen candidate, its
  hyper-parameters, DP score and weights), ``ledger.json`` (one entry: the selection),
  ``report.json`` (the grid, the selection's epsilon beside naive composition),
  ``config.yaml``;
- the **audit** (NOT DP, never publish): ``audit/audit.json``: K, every run's candidate,
  score and true MSE, and with ``audit.every_candidate`` one audit run of every
  candidate (the oracle's choice by the true MSE);
- ``checkpoints/select/`` (the secret and every run's result: never publish) and
  ``report.md`` (both parts, labelled).

Rerunning the same command resumes: nothing is charged twice, finished runs are read
back, and the release is the same.

Candidates whose DP events differ (a grid over steps, batch size or epsilon) are
accounted by the pointwise max of their RDP curves (``privacy.Repetitions.event`` of
every candidate's event). ``candidates.pipeline: privorl_n`` selects over PrivORL-n
configs instead: each run a whole PrivORL-n run, scored on the sensitive transitions by
a DP coverage statistic or a DP sliced Wasserstein distance (``score.kind``), the chosen
run's ``synthetic.hdf5`` the release (:mod:`privrl_jax.pipelines.select.privorl_n`).
``candidates.pipeline: maze_agent`` selects a policy among maze agents trained on a
public release, each run scoring one agent's value on the sensitive trajectories by
GPOPE (:mod:`privrl_jax.pipelines.select.maze_policies`).
"""

from privrl_jax.pipelines._select_config import (
    CandidatesConfig,
    RepetitionsConfig,
    ScoreConfig,
    SelectAuditConfig,
    SelectRunConfig,
    load,
)
from privrl_jax.pipelines.select.report import render_markdown
from privrl_jax.pipelines.select.runner import (
    RELEASE_FILE,
    dp_score,
    repetitions,
    run,
    run_event,
    td_directions,
)

__all__ = [
    "RELEASE_FILE",
    "CandidatesConfig",
    "RepetitionsConfig",
    "ScoreConfig",
    "SelectAuditConfig",
    "SelectRunConfig",
    "dp_score",
    "load",
    "render_markdown",
    "repetitions",
    "run",
    "run_event",
    "td_directions",
]
