"""Trains the quickstart's real-data agent anchor once and writes its cache.

`privrl quickstart` shows the release's agent next to an agent trained on the real
sensitive rows at the same update budget. That anchor reads neither the DP fine-tune
nor the release, and on the -v1 umaze it needs ~30k IQL updates to learn (about 3 min
an agent seed on 2 idle cores), so it is trained here, by the run's own code path
(`pipelines.privorl_n.real_agent_scores`: the run's rows, its key folded with 400),
and stored with the key and the data fingerprint the quickstart checks before reading
it (`pipelines._synth.anchor_cache`). Any change to the quickstart's data or agent
protocol makes the cache stale: the quickstart then trains the anchor live and says
so, and `tests/pipelines/test_anchor_cache.py` fails until this script is rerun.

    python benchmarks/quickstart_real_anchor.py     # ~3 min an agent seed, 2 cores

Writes ``privrl_jax/configs/privorl_n/quickstart_real_agents.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax

from privrl_jax import provenance
from privrl_jax.pipelines import privorl_n

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--config", default="privorl_n/quickstart")
    ap.add_argument("--set", dest="overrides", nargs="*", default=[])
    ap.add_argument("--out", default=None, help="default: the config's cache name")
    args = ap.parse_args()
    cfg = privorl_n.load(args.config, args.overrides)
    if not (cfg.eval.agents and cfg.eval.train_real_agents):
        raise SystemExit(
            "the config trains no real-data agents: set eval.agents and "
            "eval.train_real_agents=true."
        )
    name = cfg.eval.real_agents_cache
    if args.out is None and not name:
        raise SystemExit("the config names no eval.real_agents_cache: give --out.")
    out = Path(args.out) if args.out else privorl_n.resolve_cache_path(name)
    _, sensitive, _ = privorl_n.load_data(cfg)
    # Train, never read the cache being rewritten.
    live = privorl_n.load(args.config, [*args.overrides, "eval.real_agents_cache=null"])
    t0 = time.time()
    agents_real = privorl_n.real_agent_scores(live, sensitive, jax.random.key(cfg.seed))
    wall = time.time() - t0
    prov = provenance() | {
        "command": "python benchmarks/quickstart_real_anchor.py "
        + " ".join(
            [f"--config {args.config}"]
            + ([f"--set {' '.join(args.overrides)}"] if args.overrides else [])
        ),
        "date": time.strftime("%Y-%m-%d"),
        "train_wall_s": round(wall, 1),
    }
    privorl_n.write_real_agents_cache(out, cfg, sensitive, agents_real, prov)
    for algo, res in agents_real.items():
        per_seed = [round(s["score_mean"], 1) for s in res["per_seed"]]
        print(
            f"{algo}: score {res['score_mean']:.1f} (per seed {per_seed}), "
            f"{cfg.eval.agent_updates} updates, {wall:.0f} s"
        )
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
