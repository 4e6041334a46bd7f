"""Verify a run directory's privacy record: the ledger's chain, and the heads other files hold."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp

from privrl_jax import data, privacy


def verify_run(run_dir: str | os.PathLike) -> privacy.Ledger:
    """Loads ``run_dir``'s ledger and checks it against every checkpoint and release it holds.

    The ledger must verify on its own (hash chain, events against their parameters), and the
    ledger head recorded in each DP checkpoint (``checkpoints/dp``) and in each released HDF5
    file's metadata must be in its chain: a truncated or replaced ledger fails here.

    Raises:
      privacy.LedgerError: missing while checkpoints or a release exist, edited, truncated or
        replaced (one line that says which file disagrees).
    """
    run_dir = Path(run_dir)
    dp_dir = run_dir / "checkpoints" / "dp"
    releases = sorted(run_dir.glob("*.hdf5"))
    if not (run_dir / privacy.LEDGER_FILE).exists() and (dp_dir.exists() or releases):
        found = [str(p) for p in ([dp_dir] if dp_dir.exists() else []) + releases]
        raise privacy.LedgerError(
            f"{run_dir / privacy.LEDGER_FILE} is missing, but the run holds {', '.join(found)}: "
            "releases happened and their privacy spend is unknown."
        )
    ledger = privacy.Ledger.load(run_dir)
    if dp_dir.exists():
        mgr = ocp.CheckpointManager(dp_dir.absolute())
        for step in mgr.all_steps():
            raw = mgr.restore(step)
            if "ledger_head" in raw:
                head = bytes(np.asarray(raw["ledger_head"], np.uint8)).hex()
                ledger.require_head(head, f"the checkpoint of DP step {step}")
    for path in releases:
        head = data.read_hdf5_metadata(path).get("ledger_head")
        if head is not None:
            ledger.require_head(str(head), f"the release {path.name}")
    return ledger
