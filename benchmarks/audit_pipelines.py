"""Epsilon accounted vs demonstrated for every method's shipped mechanism at eps in {1,
10, inf}.

Each row is what ``--set audit.canaries=m`` runs beside a release: the method's DP
mechanism as its pipeline builds it from the shipped config (PrivORL-n quickstart,
PrivORL-j cpu, GPOPE chain with Poisson sampling, POOL default), written into a ledger
and audited by ``privacy.audit.audit_ledger`` with m gradient canaries (one-run bound,
95%; Steinke, Nasr & Jagielski 2023). What is audited is the DP loop as the plan runs it
(sampler, clip, noise, steps) on stand-in data. GPOPE's paper sampler (one-of-m,
replace-one) cannot be audited by adding canaries and is listed.

    python benchmarks/audit_pipelines.py [--canaries 10000]

Writes ``benchmarks/results/audit_pipelines.{json,md}``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import dp_accounting
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import privacy
from privrl_jax.pipelines import gpope, pool, privorl_j, privorl_n
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit import one_run_epsilon_from_counts

ROOT = Path(__file__).resolve().parents[1]


def mechanisms(eps: float) -> list[tuple[str, str, object, int, float]]:
    """(method, what, plan or Gaussian mechanism, count, delta) as each pipeline builds
    them at
    ``eps`` (delta: the shipped config's)."""
    e = f"privacy.epsilon={eps}"
    n = privorl_n.load("privorl_n/quickstart", [e])
    j = privorl_j.load("privorl_j/cpu", [e])
    g = gpope.load("gpope/chain", [e])
    gu = gpope.load("gpope/chain_uniform", [e])
    out = [
        (
            "PrivORL-n",
            "quickstart: Poisson over 100k transitions",
            privorl_n.make_plan(n, n.data.sensitive_size),
            0,
            n.privacy.delta,
        ),
        # The cpu config's ~390 sensitive trajectories (its collector's count at seed
        # 0).
        (
            "PrivORL-j",
            "cpu: Poisson over 390 trajectories",
            privorl_j.make_plan(j, 390),
            0,
            j.privacy.delta,
        ),
        (
            "GPOPE",
            "chain: Poisson over 1000 trajectories",
            gpope.make_plan(g),
            0,
            g.privacy.delta,
        ),
        (
            "GPOPE",
            "chain_uniform: one-of-m (the paper's)",
            gpope.make_plan(gu),
            0,
            gu.privacy.delta,
        ),
    ]
    # POOL's mechanism (planning.pool_mechanism: sensitivity sqrt(3H)) calibrated to eps
    # instead of the config's rho budget. At eps = inf POOL has no mechanism
    # (pool.method=non_private).
    pc = pool.load("pool/default", [])
    h, d = pc.env.horizon, pc.privacy.delta
    if not math.isinf(eps):
        mech = privacy.GaussianMechanism(l2_sensitivity=math.sqrt(3 * h)).calibrate(
            eps, d
        )
        out.append(
            (
                "POOL",
                f"default: zone statistics, sensitivity sqrt(3H), H = {h}",
                mech,
                1,
                d,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--canaries", type=int, default=10_000)
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 10.0, math.inf])
    args = ap.parse_args()
    rows = []
    for eps in args.epsilons:
        for method, what, mech, count, delta in mechanisms(eps):
            with tempfile.TemporaryDirectory() as tmp:
                led = privacy.Ledger.open(
                    tmp,
                    dataset_id="audit-benchmark",
                    dataset_size=10**6,
                    target_epsilon=math.inf,
                    target_delta=delta,
                )
                if isinstance(mech, privacy.DPPlan):
                    led.record(
                        mech.step_event()
                        if mech.private
                        else dp_accounting.NonPrivateDpEvent(),
                        what=what,
                        count=mech.steps,
                        params=mech.describe(),
                    )
                else:
                    led.record(
                        mech.event()
                        if mech.noise_multiplier > 0
                        else dp_accounting.NonPrivateDpEvent(),
                        what=what,
                        count=count,
                        params=mech.describe(),
                    )
                print(f"eps {eps:g}: {method} ({what})", flush=True)
                (row,) = audit.audit_ledger(
                    led, num_canaries=args.canaries, seed=0, progress=True
                )
            rows.append(
                {"target_epsilon": eps, "method": method, "delta": delta, **row}
            )
    lines = [
        f"# Epsilon accounted vs demonstrated, every method (m = {args.canaries} "
        "canaries, 95%)",
        "",
        "| target eps | method | mechanism | delta | steps | epsilon accounted | "
        "epsilon demonstrated | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        acc = f"{r['epsilon_accounted']:.3g}" if r.get("audited") else "-"
        dem = f"{r['epsilon_demonstrated']:.3g}" if r.get("audited") else "not audited"
        note = r.get("blocks", "") if r.get("audited") else r["why"]
        lines.append(
            f"| {r['target_epsilon']:g} | {r['method']} | {r['what']} | {r['delta']:g} "
            f"| {r['count']} | "
            f"{acc} | {dem} | {note} |"
        )
    k = max(1, int(0.01 * args.canaries))
    ceiling = {
        d: one_run_epsilon_from_counts(args.canaries, 2 * k, 2 * k, delta=d)
        for d in {r["delta"] for r in rows}
    }
    lines += [
        "",
        "The most the audit can demonstrate (all 2k guesses right, k = 1% of m): "
        + ", ".join(f"{v:.2f} at delta = {d:g}" for d, v in sorted(ceiling.items()))
        + ".",
        "",
    ]
    md = "\n".join(lines)
    print(md)
    out = ROOT / "benchmarks" / "results"
    dump_json(
        out / "audit_pipelines.json",
        {"canaries": args.canaries, "rows": rows},
        indent=2,
        default=float,
    )
    (out / "audit_pipelines.md").write_text(md)
    bad = [r for r in rows if r.get("violation")]
    assert not bad, f"privacy bug: demonstrated > accounted for {bad}"


if __name__ == "__main__":
    main()
