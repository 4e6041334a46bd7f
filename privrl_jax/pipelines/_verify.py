"""Verify a run directory's privacy record: the ledger's chain, and the heads other
files hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp

from privrl_jax import data, privacy

# Releases whose ledger head sits in a JSON file (GPOPE's weights, POOL's policy
# metadata), and releases that carry no head themselves but must come with such a file
# (POOL's Q tables).
_JSON_RELEASES = ("weights.json", "policy.json")
_RELEASE_COMPANIONS = {"policy.npz": "policy.json"}


def _release_files(run_dir: Path) -> list[Path]:
    names = (*_JSON_RELEASES, *_RELEASE_COMPANIONS)
    return sorted(run_dir.glob("*.hdf5")) + [
        run_dir / n for n in names if (run_dir / n).exists()
    ]


def _json_head(path: Path) -> str:
    try:
        head = json.loads(path.read_text()).get("ledger_head")
    except (OSError, ValueError, AttributeError) as e:
        raise privacy.LedgerError(
            f"the release {path} cannot be read ({e}); its privacy spend is unknown."
        ) from None
    if not isinstance(head, str):
        raise privacy.LedgerError(
            f"the release {path} records no ledger head, so it cannot be matched to "
            f"{privacy.LEDGER_FILE}; "
            "it was edited or is not this run's release."
        )
    return head


def verify_run(run_dir: str | os.PathLike) -> privacy.Ledger:
    """Loads ``run_dir``'s ledger and checks it against every checkpoint and release it
    holds.

    The ledger must verify on its own (hash chain, events against their parameters), and
    the ledger head recorded in each DP checkpoint (``checkpoints/dp``) and in every
    release (each HDF5 file's metadata, GPOPE's ``weights.json``, POOL's
    ``policy.json``, without which its ``policy.npz`` is refused) must be in its chain:
    a truncated or replaced ledger fails here.

    Raises:
      privacy.LedgerError: missing while checkpoints or a release exist, edited,
        truncated or replaced (one line that says which file disagrees).
    """
    run_dir = Path(run_dir)
    dp_dir = run_dir / "checkpoints" / "dp"
    releases = _release_files(run_dir)
    if not (run_dir / privacy.LEDGER_FILE).exists() and (dp_dir.exists() or releases):
        found = [str(p) for p in ([dp_dir] if dp_dir.exists() else []) + releases]
        raise privacy.LedgerError(
            f"{run_dir / privacy.LEDGER_FILE} is missing, but the run holds "
            f"{', '.join(found)}: "
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
        if path.suffix == ".hdf5":
            head = data.read_hdf5_metadata(path).get("ledger_head")
            if head is not None:
                ledger.require_head(str(head), f"the release {path.name}")
        elif path.name in _JSON_RELEASES:
            ledger.require_head(_json_head(path), f"the release {path.name}")
        elif not (run_dir / _RELEASE_COMPANIONS[path.name]).exists():
            raise privacy.LedgerError(
                f"the release {path} is here without its "
                f"{_RELEASE_COMPANIONS[path.name]}, which holds "
                f"the ledger head that ties it to {privacy.LEDGER_FILE}: its privacy "
                "spend is unknown."
            )
    return ledger
