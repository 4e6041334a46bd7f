"""Epsilon accounted vs epsilon demonstrated: one-run audits of the mechanisms the
methods run.

Rows (each at a target epsilon of 1, 10 and inf, delta = 1e-5, m canaries, 1% of them
guessed "in" and 1% "out", 95% confidence):

- ``fit, full batch``: one step of privacy.fit (the loop PrivORL-n, PrivORL-j, the
  DP-Transformer and GPOPE run) on all units: a Gaussian mechanism, where the one-run
  bound is tightest;
- ``fit, Poisson q = 0.25, 10 steps``: DP-SGD as the methods run it (sampling amplifies
  privacy; a one-run audit of a sampled, multi-step run is loose, as Steinke et al.
  report);
- ``GaussianMechanism (POOL)``: the zCDP Gaussian mechanism POOL releases its statistics
  with (``planning.pool_mechanism``), audited on Dirac canaries of its statistics
  vector;
- ``fault: noise halved``: the full-batch step with half the accounted noise: the audit
  must demonstrate more epsilon than the plan accounts (the run raises PrivacyAuditError
  otherwise).

Usage: ``python benchmarks/audit_epsilon.py [--canaries 10000]``; writes
benchmarks/results/audit_epsilon.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax import planning, privacy
from privrl_jax.privacy import audit
from privrl_jax.privacy._audit import draw_inclusion, one_run_epsilon_from_counts

RESULTS = Path(__file__).resolve().parent / "results"
DELTA = 1e-5
TARGETS = (1.0, 10.0, math.inf)


@dataclasses.dataclass(frozen=True, kw_only=True)
class HalvedNoisePlan(privacy.DPPlan):
    """The injected fault: half the accounted noise runs."""

    @property
    def noise_stds(self):
        return tuple(s / 2 for s in super().noise_stds)


def _problem():
    x = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    model = nn.Dense(1)
    loss = lambda p, item: (model.apply(p, item[0])[0] - item[1]) ** 2  # noqa: E731
    return loss, model.init(jax.random.key(0), x[0]), (x[:, None], x.sum(1)[:, None])


def _fit_row(name, plan, m, seed):
    loss, params, data = _problem()
    res = audit.audit_fit(
        plan,
        loss,
        optax.sgd(0.01),
        params,
        data,
        num_canaries=m,
        k_positive=m // 100,
        delta=DELTA,
        seed=seed,
        secret=privacy.DPSecret.from_seed(seed),
        raise_on_violation=False,
    )
    return {"row": name, **res.to_dict()}


def _mechanism_row(name, mech: privacy.GaussianMechanism, m, seed):
    # Canary i adds the mechanism's sensitivity to coordinate i (one unit's whole
    # budget).
    inclusion = draw_inclusion(seed, m)
    value = jnp.asarray(inclusion, jnp.float32) * mech.l2_sensitivity
    scores = np.asarray(mech.release(jax.random.key(seed), value), np.float64)
    bound = audit.one_run_epsilon_lower_bound(
        scores, inclusion, delta=DELTA, k_positive=m // 100, k_negative=m // 100
    )
    gdp = audit.gaussian_dp_epsilon_estimate(
        scores[inclusion], scores[~inclusion], delta=DELTA
    )
    return {
        "row": name,
        "epsilon_accounted": mech.epsilon(DELTA).epsilon,
        "epsilon_demonstrated": bound.epsilon_lower_bound,
        "audit": bound.to_dict(),
        "gaussian_dp_estimate": gdp.to_dict(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--canaries", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    m, seed = args.canaries, args.seed
    rows = []
    t0 = time.time()
    full = privacy.DPPlan(
        sampler=privacy.FullBatchSampler(dataset_size=64, microbatch_size=512),
        l2_clip_norm=1.0,
        steps=1,
    )
    poisson = privacy.DPPlan(
        sampler=privacy.PoissonSampler(
            dataset_size=64, sampling_rate=0.25, microbatch_size=512
        ),
        l2_clip_norm=1.0,
        steps=10,
    )
    for eps in TARGETS:
        rows.append(
            {
                "target": eps,
                **_fit_row("fit, full batch", full.calibrate(eps, DELTA), m, seed),
            }
        )
        rows.append(
            {
                "target": eps,
                **_fit_row(
                    "fit, Poisson q = 0.25, 10 steps",
                    poisson.calibrate(eps, DELTA),
                    m,
                    seed,
                ),
            }
        )
        if eps < math.inf:
            # POOL's mechanism at H = 5 (sensitivity sqrt(3 H)), calibrated to the
            # target.
            mech = planning.pool_mechanism(1.0, 5).calibrate(eps, DELTA)
            rows.append(
                {
                    "target": eps,
                    **_mechanism_row("GaussianMechanism (POOL, H = 5)", mech, m, seed),
                }
            )
        print(f"target epsilon {eps}: done ({time.time() - t0:.0f} s)", flush=True)
    sigma = (
        2.0  # accounted epsilon ~2.2; the noise that runs is sigma = 1 (epsilon ~4.7)
    )
    fault = HalvedNoisePlan(
        sampler=full.sampler, l2_clip_norm=1.0, steps=1, noise_multiplier=sigma
    )
    rows.append(
        {
            "target": fault.epsilon(DELTA).epsilon,
            **_fit_row("fault: noise halved (full batch)", fault, m, seed),
        }
    )

    lines = [
        "| row | target epsilon | epsilon accounted | epsilon demonstrated (95%) | mu "
        "(GDP fit) | right / guesses |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        a = r["audit"]
        lines.append(
            f"| {r['row']} | {r['target']:.3g} | {r['epsilon_accounted']:.3g} | "
            f"{r['epsilon_demonstrated']:.3g} | {r['gaussian_dp_estimate']['mu']:.3g} "
            "| "
            f"{a['correct']} / {a['guesses']} |"
        )
    most = one_run_epsilon_from_counts(m, 2 * (m // 100), 2 * (m // 100), delta=DELTA)
    text = (
        f"# Epsilon accounted vs demonstrated (one-run audits, m = {m} canaries, delta "
        f"= {DELTA:g})\n\n"
        + "\n".join(lines)
        + f"\n\nThe most {2 * (m // 100)} correct guesses of {m} canaries "
        "can demonstrate: "
        f"epsilon = {most:.3g}. Every demonstrated value is a 95% lower bound; every "
        "accounted value "
        "an upper bound (dp-accounting, RDP).\n"
    )
    print(text)
    RESULTS.mkdir(exist_ok=True)
    dump_json(
        RESULTS / "audit_epsilon.json",
        {"canaries": m, "delta": DELTA, "rows": rows, "m_limited_max": most},
        indent=1,
    )
    (RESULTS / "audit_epsilon.md").write_text(text)
    for r in (
        rows
    ):  # a lower bound above the upper bound is a privacy bug, except where injected
        faulty = r["row"].startswith("fault")
        assert (r["epsilon_demonstrated"] > r["epsilon_accounted"]) == faulty, r["row"]


if __name__ == "__main__":
    main()
