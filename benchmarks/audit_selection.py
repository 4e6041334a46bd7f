"""Epsilon accounted vs demonstrated for a private selection (AIM's exponential
mechanism).

A many-run audit (``privacy.audit.audit_selection``): the mechanism draws ``--trials``
selections on each side of the worst-case neighbouring score pair (every score moved by
the sensitivity, candidate 0 up, the rest down), and the Clopper-Pearson bound on the
event "candidate 0" is the epsilon demonstrated (95%, pure DP). Rows:

- AIM's selection on the umaze table (78 candidates, sensitivity 22) at the epsilon_t
  ``fit_aim`` gives a round at target epsilon 1 and 10 (rho of the one Gaussian the
  other baselines calibrate, 24 rounds, 10% of a round on the selection), and after one
  annealing (rho_t x 4, epsilon_t x 2);
- the same mechanism at epsilon 1 with 100 candidates (what ``audit_ledger`` runs);
- a fault: logits eps * score / Delta (the factor 1/2 missing), which must be caught.

Usage: ``python benchmarks/audit_selection.py [--trials 10000000]``; writes
benchmarks/results/audit_selection.{json,md}.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import privacy
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit_selection import worst_case_score_pair

RESULTS = Path(__file__).resolve().parent / "results"
DELTA = 1e-6  # the marginal baselines' delta
ROUNDS = 24  # fit_aim's default ``rounds``
SELECT_SHARE = 0.1  # a round's share spent on the selection (fit_aim)
UMAZE_CANDIDATES = 78  # 12 one-way and 66 two-way marginals
UMAZE_SENSITIVITY = 22.0  # the largest candidate weight


class MissingHalf(privacy.ExponentialMechanism):
    """The injected fault: logits eps * score / Delta, twice the accounted epsilon."""

    def logits(self, scores):
        return 2.0 * super().logits(scores)


def aim_round_epsilon(target: float, anneals: int = 0) -> float:
    """epsilon_t of one AIM selection at a target epsilon: rho = 1 / (2 sigma^2) of the
    calibrated Gaussian, rho_t = rho / ROUNDS (x 4 per annealing)."""
    sigma = (
        privacy.GaussianMechanism(l2_sensitivity=1.0)
        .calibrate(target, DELTA, "rdp")
        .noise_multiplier
    )
    rho_t = 1.0 / (2 * sigma**2) / ROUNDS * 4**anneals
    return math.sqrt(8 * SELECT_SHARE * rho_t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cases = []
    for target in (1.0, 10.0):
        for anneals in (0, 1):
            cases.append(
                (
                    f"AIM selection, target eps = {target:g}, "
                    + ("first rounds" if not anneals else "after one annealing"),
                    privacy.ExponentialMechanism(
                        epsilon=aim_round_epsilon(target, anneals),
                        sensitivity=UMAZE_SENSITIVITY,
                    ),
                    UMAZE_CANDIDATES,
                )
            )
    em1 = privacy.ExponentialMechanism(epsilon=1.0, sensitivity=UMAZE_SENSITIVITY)
    cases.append(("exponential mechanism, eps = 1 (audit_ledger's pair)", em1, 100))
    bad = MissingHalf(epsilon=1.0, sensitivity=UMAZE_SENSITIVITY)
    cases.append(("fault: factor 1/2 missing, eps = 1 accounted", bad, 100))
    rows = []
    t0 = time.time()
    for name, mech, k in cases:
        scores, neighbour = worst_case_score_pair(k, mech.sensitivity)
        res = audit.audit_selection(
            mech, scores, neighbour, trials=args.trials, seed=args.seed
        )
        rows.append({"row": name, "candidates": k, **res.to_dict()})
        print(
            f"{name}: accounted {res.epsilon_accounted:.4g}, pair "
            f"{res.epsilon_of_pair:.4g}, demonstrated >= "
            f"{res.epsilon_demonstrated:.4g} ({time.time() - t0:.0f} s)",
            flush=True,
        )
    if any(r["violation"] for r in rows if not r["row"].startswith("fault")):
        raise SystemExit("a correct mechanism was shown to leak: see the JSON")
    if not rows[-1]["violation"]:
        raise SystemExit("the injected fault was not caught: the audit is blind")
    RESULTS.mkdir(exist_ok=True)
    dump_json(
        RESULTS / "audit_selection.json",
        {"trials": args.trials, "seed": args.seed, "delta": DELTA, "rows": rows},
    )
    lines = [
        "# Private selection: epsilon accounted vs demonstrated",
        "",
        f"`python benchmarks/audit_selection.py --trials {args.trials}`: "
        f"{args.trials:,} selections on each side of the worst-case score pair, "
        "event 'candidate 0', Clopper-Pearson 95%, pure DP.",
        "",
        "| row | candidates | epsilon accounted (one selection) | epsilon of the pair "
        "(exact) | epsilon demonstrated (95%) | candidate 0 drawn, D / D' |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['row']} | {r['candidates']} | {r['epsilon_accounted']:.4g} | "
            f"{r['epsilon_of_pair']:.4g} | {r['epsilon_demonstrated']:.4g}"
            + (" (violation)" if r["violation"] else "")
            + f" | {r['hits']:,} / {r['neighbour_hits']:,} |"
        )
    (RESULTS / "audit_selection.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
