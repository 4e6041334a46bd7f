"""Does the white-box audit catch a run whose noise is half the accounted noise, and
does it ever flag a correct run? The one-run bound on two canary scores side by side:
the sum of a canary's coordinate over the steps (the earlier default) and the per-step
likelihood ratio (``audit_fit``'s default now, :func:`canary_step_score`).

The tables simulate the auditor's white-box view exactly as ``audit_fit`` builds it:
m Dirac canaries (100,000 by default), each in with probability 1/2, clipped to
exactly C, so in units of C a release shows ``[in and sampled] + N(0, (f sigma)^2)``
on each canary's coordinate (f = 1 correct, f = 0.5 the fault; sigma calibrated to
the plan's epsilon, RDP, delta 1e-5), 1% of the canaries guessed each way, 95%.
``--loop`` also runs ``audit_fit`` through the real DP loop once per (plan, fault).

    python benchmarks/audit_power.py --seeds 3 --false-alarm-seeds 20
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from _results import dump_json

from privrl_jax import privacy
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit import draw_inclusion

DELTA, CONF = 1e-5, 0.95
M = 100_000  # canaries (--canaries)
PLANS = {"q=0.01 x 500": (0.01, 500), "q=0.25 x 10": (0.25, 10), "full x 1": (1.0, 1)}


def _plan(q: float, steps: int, eps: float) -> privacy.DPPlan:
    n = 10_000
    sampler = (
        privacy.FullBatchSampler(dataset_size=n, microbatch_size=256)
        if q >= 1
        else privacy.PoissonSampler(
            dataset_size=n, sampling_rate=q, microbatch_size=256
        )
    )
    return privacy.DPPlan(sampler=sampler, l2_clip_norm=1.0, steps=steps).calibrate(
        eps, DELTA
    )


def simulate(plan: privacy.DPPlan, fault: float, seed: int) -> dict[str, float]:
    """The one-run bounds of both scores for one simulated white-box run."""
    rng = np.random.default_rng(seed)
    q, sigma = plan.sampling_rate, plan.noise_multiplier
    inclusion = draw_inclusion(rng, M)
    scores = {"sum": np.zeros(M), "likelihood": np.zeros(M)}
    fns = {
        name: audit.canary_step_score(name, sampling_rate=q, noise_multiplier=sigma)
        for name in scores
    }
    for _ in range(plan.steps):
        sampled = inclusion & (rng.random(M) < q)
        x = sampled + fault * sigma * rng.standard_normal(M)
        for name in scores:
            scores[name] += np.asarray(fns[name](x))
    k = M // 100
    out = {}
    for name, s in scores.items():
        r = audit.one_run_epsilon_lower_bound(
            s, inclusion, delta=DELTA, k_positive=k, k_negative=k, confidence=CONF
        )
        out[name] = r.epsilon_lower_bound
        out["ceiling"] = r.epsilon_ceiling
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--false-alarm-seeds", type=int, default=20)
    ap.add_argument("--canaries", type=int, default=100_000)
    ap.add_argument("--loop", action="store_true", help="also audit_fit once each")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    global M  # noqa: PLW0603 -- the canary count of every simulated run
    M = args.canaries
    result: dict = {"canaries": M, "detection": [], "false_alarm": [], "loop": []}
    print(f"m = {M:,} canaries, {M // 100:,} guesses each way, delta {DELTA:g}\n")

    print("## Detection of the 0.5x-noise fault (plan accounted at eps 1)\n")
    print("| plan | eps that ran | sum: flagged | likelihood: flagged | bounds (LR) |")
    print("|---|---|---|---|---|")
    for name, (q, steps) in PLANS.items():
        plan = _plan(q, steps, 1.0)
        ran = dataclasses.replace(plan, noise_multiplier=plan.noise_multiplier / 2)
        eps_ran = ran.epsilon(DELTA).epsilon
        runs = [simulate(plan, 0.5, 1000 + s) for s in range(args.seeds)]
        flag = {k: sum(r[k] > 1.0 for r in runs) for k in ("sum", "likelihood")}
        bounds = ", ".join(f"{r['likelihood']:.2f}" for r in runs)
        print(
            f"| {name} | {eps_ran:.2f} | {flag['sum']}/{args.seeds} | "
            f"{flag['likelihood']}/{args.seeds} | {bounds} |"
        )
        result["detection"].append(
            {"plan": name, "eps_ran": eps_ran, "runs": runs, "flagged": flag}
        )

    print("\n## False alarms on correct runs (bound > accounted)\n")
    print("| plan | eps | ceiling | sum: alarms | likelihood: alarms | max LR bound |")
    print("|---|---|---|---|---|---|")
    for name, (q, steps) in PLANS.items():
        for eps in (1.0, 4.0, 8.0):
            plan = _plan(q, steps, eps)
            runs = [simulate(plan, 1.0, s) for s in range(args.false_alarm_seeds)]
            alarms = {k: sum(r[k] > eps for r in runs) for k in ("sum", "likelihood")}
            ceiling = runs[0]["ceiling"]
            status = "" if eps < ceiling else " (not auditable)"
            print(
                f"| {name} | {eps:g}{status} | {ceiling:.2f} | "
                f"{alarms['sum']}/{len(runs)} | {alarms['likelihood']}/{len(runs)} | "
                f"{max(r['likelihood'] for r in runs):.2f} |"
            )
            result["false_alarm"].append(
                {"plan": name, "eps": eps, "runs": runs, "alarms": alarms}
            )

    if args.loop:
        print("\n## The real loop (audit_fit), seed 0\n")
        import jax.numpy as jnp  # noqa: PLC0415
        import optax  # noqa: PLC0415

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class Halved(privacy.DPPlan):
            @property
            def noise_stds(self):
                return tuple(s / 2 for s in super().noise_stds)

        x = np.random.default_rng(0).normal(size=(64, 1, 2)).astype(np.float32)
        loss = lambda p, item: (jnp.dot(p["w"], item[0]) - item[1]) ** 2  # noqa: E731
        for name, (q, steps) in PLANS.items():
            base = _plan(q, steps, 1.0)
            sampler = dataclasses.replace(base.sampler, dataset_size=64)
            for fault, cls in ((1.0, privacy.DPPlan), (0.5, Halved)):
                plan = cls(
                    sampler=sampler,
                    l2_clip_norm=1.0,
                    steps=steps,
                    noise_multiplier=base.noise_multiplier,
                )
                res = audit.audit_fit(
                    plan,
                    loss,
                    optax.sgd(0.0),
                    {"w": jnp.zeros(2)},
                    (x, x.sum(-1)),
                    num_canaries=M,
                    k_positive=M // 100,
                    delta=DELTA,
                    seed=0,
                    raise_on_violation=False,
                )
                print(f"- {name}, noise x{fault}: {res.line()}")
                result["loop"].append(
                    {"plan": name, "fault": fault, "line": res.line()}
                )
    if args.out:
        dump_json(args.out, result, indent=2)


if __name__ == "__main__":
    main()
