"""One-off: stored rows named by their config's identity hash.

The runner hashes a config's identity (``pipelines.to_dict(cfg, identity=True)``): a
field a section declares hash-neutral (``Section.HASH_NEUTRAL``) is left out while it
holds the value that runs what ran before it existed. Rows stored before this hashed
the whole resolved config; where that hash is today's whole-config hash of the same
cell, the row is of today's config and gets its identity hash. Any other hash is left
as it is (a stale row stays stale). Idempotent.

    python results/rehash_identity.py          # every experiment, results/ and reruns/
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from privrl_jax import experiments
from privrl_jax.experiments._runner import resolve, write_rows
from privrl_jax.experiments._spec import IMPORTED, cell_key

ROOT = Path(__file__).resolve().parents[1]


def _whole_hash(resolved: dict) -> str:
    # The runner's hash before identities: every field of the resolved config.
    text = json.dumps(resolved, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rehash(results_dir: Path, name: str) -> int:
    """Renames the rows of ``name`` stored under today's whole-config hash.

    Args:
      results_dir: the results root (``results`` or ``results/reruns``).
      name: the experiment.

    Returns:
      How many rows got their identity hash.
    """
    rows = experiments.read_rows(results_dir, name)
    exp = experiments.load_experiment(name)
    cells = {cell_key(c): c for c in exp.cells()}
    changed = 0
    for row in rows:
        cell = cells.get(row["key"])
        if cell is None or not row.get("config_hash"):
            continue
        if exp.pipeline_for(cell) == IMPORTED:
            continue
        _, resolved, identity = resolve(exp, cell)
        if row["config_hash"] != identity and row["config_hash"] == _whole_hash(
            resolved
        ):
            row["config_hash"] = identity
            changed += 1
    if changed:
        write_rows(results_dir, name, rows)
    return changed


def main() -> None:
    for results_dir in (ROOT / "results", ROOT / "results" / "reruns"):
        for name in experiments.experiment_names():
            if (results_dir / name / "rows.jsonl").exists():
                n = rehash(results_dir, name)
                if n:
                    print(f"{results_dir.relative_to(ROOT)}/{name}: {n} rows rehashed")


if __name__ == "__main__":
    main()
