"""Verify a run directory's privacy record.

The ledger's chain, and the heads other files hold.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint as ocp
import yaml

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


# Keys under which a run's reports and audits name the ledger head they were written at.
_HEAD_KEYS = ("chain_head", "ledger_head")


def _named_heads(tree: Any, where: str = "") -> list[tuple[str, str]]:
    """``(key path, head)`` for every ledger head a parsed JSON/YAML file names."""
    out: list[tuple[str, str]] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            path = f"{where}.{k}" if where else str(k)
            if k in _HEAD_KEYS and isinstance(v, str):
                out.append((path, v))
            else:
                out += _named_heads(v, path)
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += _named_heads(v, f"{where}[{i}]")
    return out


def _record_files(run_dir: Path) -> list[Path]:
    """The run's reports, config and audits: files that may name a ledger head."""
    names = [p for p in sorted(run_dir.glob("*.json")) if p.name != privacy.LEDGER_FILE]
    names += [p for p in sorted(run_dir.glob("*.yaml"))]
    audit = run_dir / "audit"
    if audit.is_dir():
        names += sorted(audit.rglob("*.json"))
    return [p for p in names if p.name not in _JSON_RELEASES]


def _check_named_heads(run_dir: Path, ledger: privacy.Ledger) -> list[str]:
    """Checks every head the run's reports, config and audits name; returns them."""
    heads = []
    for path in _record_files(run_dir):
        try:
            text = path.read_text()
            tree = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as e:
            raise privacy.LedgerError(
                f"{path} cannot be read ({type(e).__name__}); the run's record is "
                "unreadable, so its privacy spend cannot be verified."
            ) from None
        for key, head in _named_heads(tree):
            ledger.require_head(head, f"{path.relative_to(run_dir)} ({key})")
            heads.append(head)
    return heads


def _evidence_of_releases(run_dir: Path, dp_steps: list[int]) -> list[str]:
    """Files that exist only once a run released something.

    A report, a release, a DP checkpoint past step 0, an audit's result.
    """
    found = [
        p.name for p in (run_dir / "report.json", run_dir / "report.md") if p.exists()
    ]
    found += [p.name for p in _release_files(run_dir)]
    found += [f"checkpoints/dp/{s}" for s in dp_steps if s > 0]
    audit = run_dir / "audit" / "epsilon_lower_bound.json"
    if audit.exists():
        found.append(str(audit.relative_to(run_dir)))
    return found


def verify_run(run_dir: str | os.PathLike) -> privacy.Ledger:
    """Load ``run_dir``'s ledger and check it against every checkpoint and release.

    The ledger must verify on its own (hash chain, events against their parameters), and
    the ledger head recorded in each DP checkpoint (``checkpoints/dp``) and in every
    release (each HDF5 file's metadata, GPOPE's ``weights.json``, POOL's
    ``policy.json``, without which its ``policy.npz`` is refused) must be in its chain,
    and so must every head a report, config or audit names (``chain_head``,
    ``ledger_head``, at any depth): a truncated or replaced ledger fails here, also
    when the release was moved away. A ledger with no release beside files that exist
    only once a run released (a report, a release, a DP checkpoint past step 0, an
    audit's result) is refused too.

    Args:
      run_dir: the run directory.

    Returns:
      The verified :class:`~privrl_jax.privacy.Ledger`.

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
    dp_steps: list[int] = []
    if dp_dir.exists():
        # A step half-deleted by a kill during orbax's clean-up is no checkpoint.
        skip = {int(p.name) for p in privacy.Checkpoints.incomplete_steps(dp_dir)}
        mgr = ocp.CheckpointManager(dp_dir.absolute())
        dp_steps = [s for s in mgr.all_steps() if s not in skip]
        for step in dp_steps:
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
    heads = _check_named_heads(run_dir, ledger)
    heads += [_json_head(p) for p in releases if p.name in _JSON_RELEASES]
    # A run that released nothing accountable (POOL's non_private method) says so: its
    # report names the genesis as its head.
    if not ledger.releases and ledger.genesis not in heads:
        found = _evidence_of_releases(run_dir, dp_steps)
        if found:
            raise privacy.LedgerError(
                f"{run_dir / privacy.LEDGER_FILE} records no release, but the run "
                f"holds {', '.join(found)}: releases happened, so the ledger was "
                "truncated or replaced and the privacy spend is unknown."
            )
    return ledger
