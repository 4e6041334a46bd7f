"""Experiments: every published number as a small experiment file.

One runner runs them over the pipelines' ``load`` / ``run``, and the results pages are
generated from the stored rows.

An experiment is ``privrl_jax/experiments/<name>.yaml`` (the pipeline, base config,
overrides, sweep axes, metrics, tables and the paper's number it answers; see
``_spec``). ``privrl experiment run NAME`` runs its grid, one run directory per resolved
config, and stores the rows in ``results/<name>/rows.jsonl``; ``privrl experiment table
NAME`` re-tabulates them (JSON, Markdown, PNG); ``privrl experiment pages`` writes
``docs/results/`` and the scoreboard of the papers' claims (``claims.yaml``).
"""

from privrl_jax.experiments import stats
from privrl_jax.experiments._pages import (
    scoreboard,
    write_pages,
)
from privrl_jax.experiments._runner import (
    parse_only,
    read_rows,
    row_status,
    run_experiment,
)
from privrl_jax.experiments._spec import (
    Experiment,
    experiment_names,
    load_experiment,
)
from privrl_jax.experiments._tables import (
    tabulate,
)

__all__ = [
    "Experiment",
    "experiment_names",
    "load_experiment",
    "parse_only",
    "read_rows",
    "row_status",
    "run_experiment",
    "scoreboard",
    "stats",
    "tabulate",
    "write_pages",
]
