"""Empirical privacy auditing: ``from privrl_jax.privacy import audit``.

Epsilon lower bounds from canaries (one-run, Clopper-Pearson, Gaussian DP) and the
canaries themselves (white-box gradient directions, black-box out-of-distribution rows),
the black-box audit of a synthetic-data generator (:func:`audit_synthesizer`) and the
many-run audit of a private selection (:func:`audit_selection`, AIM's exponential
mechanism).
The implementation lives in :mod:`privrl_jax.privacy._audit`; see its docstring for the
papers.
"""

from privrl_jax.privacy._audit import (
    AuditResult,
    GaussianDpEstimate,
    GradientCanaries,
    clopper_pearson_epsilon_lower_bound,
    dirac_canaries,
    gaussian_dp_epsilon_estimate,
    one_run_epsilon_ceiling,
    one_run_epsilon_lower_bound,
    out_of_distribution_canaries,
    random_direction_canaries,
)
from privrl_jax.privacy._audit_blackbox import (
    Synthesizer,
    SyntheticDataAudit,
    audit_synthesizer,
    empty_cell_canaries,
)
from privrl_jax.privacy._audit_fit import (
    FitAudit,
    PrivacyAuditError,
    audit_fit,
    audit_ledger,
    audit_status,
    canary_step_score,
)
from privrl_jax.privacy._audit_selection import (
    Selection,
    SelectionAudit,
    audit_selection,
    selection_epsilon,
)

__all__ = [
    "AuditResult",
    "FitAudit",
    "GaussianDpEstimate",
    "GradientCanaries",
    "PrivacyAuditError",
    "Selection",
    "SelectionAudit",
    "Synthesizer",
    "SyntheticDataAudit",
    "audit_fit",
    "audit_ledger",
    "audit_selection",
    "audit_status",
    "audit_synthesizer",
    "canary_step_score",
    "clopper_pearson_epsilon_lower_bound",
    "dirac_canaries",
    "empty_cell_canaries",
    "gaussian_dp_epsilon_estimate",
    "one_run_epsilon_ceiling",
    "one_run_epsilon_lower_bound",
    "out_of_distribution_canaries",
    "random_direction_canaries",
    "selection_epsilon",
]
