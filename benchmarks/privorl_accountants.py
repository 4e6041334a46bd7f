"""PrivORL Table XIV at CPU scale: the noise that the accountant calibrating it demands.

PrivORL compares DP-SGD calibrated by the PRV accountant with RDP (its Table XIV). We
have no PRV accountant; dp-accounting's privacy-loss-distribution (PLD) accountant is
the same kind of numerical composition (Gopi, Lee & Wutschitz 2021 compute the PRV by
discretising the privacy-loss distribution, which is what dp-accounting's PLD does; both
are tight up to discretisation, where RDP's conversion to (epsilon, delta) is an upper
bound), so it stands in for PRV here.

For each pipeline's DP plan as its config builds it (``make_plan``: Poisson rate
q = B / N, ``ceil(epochs / q)`` steps, clip C) and each epsilon, the script calibrates
sigma under RDP and under PLD, and prints:

- both noise multipliers and their ratio (the noise PLD saves);
- each sigma's epsilon under the other accountant (what RDP's calibration really
  spends, as PLD measures it), so the ratio is checked both ways;
- the noise std on the mean clipped gradient, sigma C / (q N), which is what fidelity
  sees (benchmarks/README.md, "PrivORL-n: fidelity that responds to epsilon").

Plans: PrivORL-n as in ``privorl_n_eps_sweep.py`` (the quickstart model on 18k
training transitions) and the quickstart itself (98k); PrivORL-j's ``cpu`` config
(about 390 training trajectories). Nothing is trained: the accountants are exact
functions of (q, steps, sigma, delta).

    python benchmarks/privorl_accountants.py

Writes ``benchmarks/results/privorl_accountants.{json,md}``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _results import dump_json  # noqa: E402  (benchmarks/_results.py)

from privrl_jax.pipelines import privorl_j, privorl_n

ROOT = Path(__file__).resolve().parents[1]
EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0)
# (name, pipeline, config, overrides, privacy units the DP phase trains on)
PLANS = (
    (
        "PrivORL-n, eps-sweep scale (18k transitions)",
        privorl_n,
        "privorl_n/quickstart",
        ("data.sensitive_size=20000", "data.holdout_size=2000"),
        18_000,
    ),
    (
        "PrivORL-n, quickstart (98k transitions)",
        privorl_n,
        "privorl_n/quickstart",
        (),
        98_000,
    ),
    (
        "PrivORL-j, cpu config (390 trajectories)",
        privorl_j,
        "privorl_j/cpu",
        (),
        390,
    ),
)


def compare(
    pipeline, config: str, overrides: tuple[str, ...], units: int, eps: float
) -> dict:
    """One row: the pipeline's plan (its own ``make_plan``) calibrated under RDP and
    under PLD at ``eps``."""
    out: dict = {"epsilon": eps}
    for acc in ("rdp", "pld"):
        cfg = pipeline.load(
            config,
            [*overrides, f"privacy.epsilon={eps}", f"privacy.accountant={acc}"],
        )
        plan = pipeline.make_plan(cfg, units)
        other = "pld" if acc == "rdp" else "rdp"
        sigma = plan.noise_multipliers[0]
        out[acc] = {
            "noise_multiplier": sigma,
            "epsilon_" + acc: plan.epsilon(cfg.privacy.delta, acc).epsilon,
            "epsilon_" + other: plan.epsilon(cfg.privacy.delta, other).epsilon,
            "mean_gradient_noise_std": sigma
            * plan.l2_clip_norm
            / plan.expected_batch_size,
        }
        out.update(
            delta=cfg.privacy.delta,
            sampling_rate=plan.sampling_rate,
            steps=plan.steps,
            l2_clip_norm=plan.l2_clip_norm,
        )
    out["pld_over_rdp_sigma"] = (
        out["pld"]["noise_multiplier"] / out["rdp"]["noise_multiplier"]
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--name", default="privorl_accountants")
    args = ap.parse_args()
    results = []
    lines = [
        "| plan | eps | q | steps | sigma RDP | sigma PLD | PLD / RDP | "
        "RDP's sigma, eps by PLD | PLD's sigma, eps by RDP | "
        "mean-gradient noise std RDP / PLD |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, pipeline, config, overrides, units in PLANS:
        for eps in args.epsilons:
            t0 = time.perf_counter()
            row = compare(pipeline, config, overrides, units, eps)
            row |= {"plan": name, "config": config, "overrides": list(overrides)}
            row["units"] = units
            results.append(row)
            r, p = row["rdp"], row["pld"]
            lines.append(
                f"| {name} | {eps:g} | {row['sampling_rate']:.4f} | {row['steps']} | "
                f"{r['noise_multiplier']:.3f} | {p['noise_multiplier']:.3f} | "
                f"{row['pld_over_rdp_sigma']:.3f} | {r['epsilon_pld']:.3f} | "
                f"{p['epsilon_rdp']:.3f} | {r['mean_gradient_noise_std']:.2e} / "
                f"{p['mean_gradient_noise_std']:.2e} |"
            )
            print(lines[-1], f"({time.perf_counter() - t0:.1f} s)", flush=True)
    table = "\n".join(lines)
    delta = {r["plan"]: r["delta"] for r in results}
    md = (
        "# PrivORL Table XIV at CPU scale: sigma calibrated by RDP vs PLD\n\n"
        "PLD (dp-accounting's privacy-loss distribution) stands in for PRV. "
        f"delta per plan: {delta}.\n\n{table}\n"
    )
    out = ROOT / "benchmarks" / "results"
    dump_json(out / f"{args.name}.json", {"rows": results})
    (out / f"{args.name}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
