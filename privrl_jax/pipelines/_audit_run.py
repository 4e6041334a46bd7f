"""The audit every DP pipeline can run beside its release.

Epsilon demonstrated next to epsilon accounted (``--set audit.canaries=m``, or ``privrl
privacy audit RUN_DIR`` afterwards).

The audit reruns each mechanism the run's ledger records (the plan's sampler, clip norm,
sigma and steps; POOL's Gaussian mechanism) with m canaries on stand-in data, through
the same DP loop (:func:`privrl_jax.privacy.audit.audit_ledger`). It reads neither the
sensitive data nor the release, so its result is public and goes into ``report.json``;
the release never holds a canary. A demonstrated epsilon above the accounted one is a
privacy bug: the run stops with :class:`~privrl_jax.privacy.audit.PrivacyAuditError`
after writing what it found.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

from privrl_jax import privacy
from privrl_jax.pipelines._config import MAX_STEPS, Bound, Section, at_least
from privrl_jax.pipelines._rundir import atomic_write_text

AUDIT_FILE = Path("audit") / "epsilon_lower_bound.json"
CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditConfig(Section):
    """The ``audit`` section: the one-run canary audit beside the release.

    ``canaries``: m gradient canaries of the one-run audit (0: no audit; the bound it
    can show grows with m: at most 1.8 at m = 1,000 and 4.2 at m = 10,000 with 1%
    guesses each way, at delta = 1e-6); ``seed``: draws the canaries' inclusion bits and
    the audit's noise (public: the audit is no release).
    """

    canaries: int = 0
    seed: int = 0

    BOUNDS: ClassVar[dict[str, Bound]] = {"canaries": at_least(0, MAX_STEPS)}

    SECTION = "audit"

    def __post_init__(self):
        super().__post_init__()
        if self.canaries != 0 and self.canaries < 100:
            raise ValueError(
                "audit.canaries must be 0 (no audit) or >= 100 (1% of them are "
                "guessed each way); "
                f"got {self.canaries}."
            )


def audit_run(
    run_dir: Path,
    ledger: privacy.Ledger,
    *,
    canaries: int,
    seed: int = 0,
    progress: bool = True,
    accountant: str = "rdp",
) -> dict[str, Any]:
    """Audit every mechanism in ``ledger``; write ``audit/epsilon_lower_bound.json``.

    Each recorded mechanism is rerun with m canaries on stand-in data
    (:func:`privrl_jax.privacy.audit.audit_ledger`); neither the sensitive data nor the
    release is read, so the result is public.

    Args:
      run_dir: the run directory; the result goes to
        ``run_dir/audit/epsilon_lower_bound.json``.
      ledger: the run's (verified) privacy ledger.
      canaries: m, the number of canaries per audited mechanism.
      seed: draws the canaries' inclusion bits and the audit's noise (public).
      progress: show a progress bar.
      accountant: the accountant the run was accounted with (``"rdp"`` or ``"pld"``).

    Returns:
      What it wrote, with the run, delta, canaries, seed, confidence, accountant, the
      ledger head read, provenance, and ``rows`` (one per ledger group, as
      :func:`~privrl_jax.privacy.audit.audit_ledger` gives them).
    """
    from privrl_jax import provenance  # noqa: PLC0415 -- keeps this module's import light
    from privrl_jax.privacy import audit  # noqa: PLC0415

    rows = audit.audit_ledger(
        ledger,
        num_canaries=canaries,
        seed=seed,
        confidence=CONFIDENCE,
        progress=progress,
        accountant=accountant,
    )
    out = {
        "run": str(run_dir),
        "delta": ledger.target_delta,
        "canaries": canaries,
        "seed": seed,
        "confidence": CONFIDENCE,
        "accountant": accountant,
        "rows": rows,
        # The ledger this audit read: privacy report checks it against the ledger.
        "ledger_head": ledger.head,
        "provenance": provenance(),
    }
    (run_dir / AUDIT_FILE).parent.mkdir(exist_ok=True)
    atomic_write_text(run_dir / AUDIT_FILE, json.dumps(out, indent=2))
    return out


def raise_on_violation(out: dict[str, Any]) -> None:
    """Raise PrivacyAuditError when a row demonstrated more epsilon than it accounted.

    Args:
      out: an audit's result, as :func:`audit_run` returns it.

    Raises:
      PrivacyAuditError: a row is marked as a violation (a privacy bug).
    """
    from privrl_jax.privacy.audit import PrivacyAuditError  # noqa: PLC0415

    bad = [r["what"] for r in out["rows"] if r.get("violation")]
    if bad:
        raise PrivacyAuditError(
            "privacy bug: the audit demonstrated more epsilon than accounted for "
            f"{bad} "
            f"(see {AUDIT_FILE}); do not publish this run's release."
        )


def audit_lines(out: dict[str, Any]) -> list[str]:
    """One line per ledger group, for the report.

    Each reads "epsilon accounted a; epsilon demonstrated >= b (95%, m = ...)", or says
    why the group was not audited.

    Args:
      out: an audit's result, as :func:`audit_run` returns it.

    Returns:
      The lines, in the order of ``out["rows"]``.
    """
    lines = []
    for r in out["rows"]:
        if r["audited"] and "selection_audit" in r:
            sel = r["selection_audit"]
            lines.append(
                f"{r['count']} x {r['what']}: epsilon accounted "
                f"{r['epsilon_accounted']:.4g} "
                f"({r['epsilon_accounted_per_selection']:.4g} a selection); epsilon "
                f"demonstrated >= {r['epsilon_demonstrated']:.3g} for one selection "
                f"({CONFIDENCE:.0%}, many-run audit, {sel['trials']:,} draws a side"
                f"{_ceiling(r)}"
            )
        elif r["audited"]:
            lines.append(
                f"{r['count']} x {r['what']}: epsilon accounted "
                f"{r['epsilon_accounted']:.4g}; "
                f"epsilon demonstrated >= {r['epsilon_demonstrated']:.3g} "
                f"({CONFIDENCE:.0%}, m = {out['canaries']} canaries{_ceiling(r)}"
            )
        else:
            lines.append(f"{r['count']} x {r['what']}: not audited ({r['why']})")
    return lines


def _ceiling(r: dict[str, Any]) -> str:
    # "; at most X at this size): status" -- what the audit could have shown, and
    # whether it could have failed at all
    if "epsilon_ceiling" not in r:
        return ")"
    return f"; at most {r['epsilon_ceiling']:.3g} at this size): {r['status']}"


def report_section(out: dict[str, Any]) -> dict[str, Any]:
    """What ``report.json`` keeps of an audit (the file has the details)."""
    return {
        "file": str(AUDIT_FILE),
        "canaries": out["canaries"],
        "confidence": out["confidence"],
        "lines": audit_lines(out),
        "rows": [
            {
                k: r[k]
                for k in (
                    "what",
                    "count",
                    "audited",
                    "epsilon_accounted",
                    "epsilon_demonstrated",
                    "epsilon_ceiling",
                    "status",
                    "epsilon_accounted_per_selection",
                    "violation",
                    "why",
                )
                if k in r
            }
            for r in out["rows"]
        ],
    }


def audit_into_report(
    cfg: AuditConfig,
    run_dir: Path,
    ledger: privacy.Ledger,
    report: dict[str, Any],
    *,
    accountant: str = "rdp",
) -> None:
    """With ``cfg.canaries`` > 0, audit the run into ``report["epsilon_audit"]``.

    A demonstrated epsilon above the accounted one then stops the run
    (PrivacyAuditError).
    """
    if cfg.canaries:
        out = audit_run(
            run_dir,
            ledger,
            canaries=cfg.canaries,
            seed=cfg.seed,
            accountant=accountant,
        )
        report["epsilon_audit"] = report_section(out)
        raise_on_violation(out)


def markdown_rows(report: dict[str, Any]) -> list[str]:
    """The report.md table rows of a report's ``epsilon_audit`` section.

    None without one.
    """
    sec = report.get("epsilon_audit")
    if not sec:
        return []
    return [
        "| epsilon audit (one-run canary audit, Steinke, Nasr & Jagielski 2023; "
        "selections: many-run audit) | "
        f"{line} |"
        for line in sec["lines"]
    ]
