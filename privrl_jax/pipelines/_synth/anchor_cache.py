"""The real-data agent anchor, cached.

A score that depends only on the sensitive rows and the agent protocol, so it is trained
once, stored beside the config that asks for it, and read back while both are unchanged.

Why a cache. On the -v1 umaze IQL learns from real data only after about 15k-30k
updates (benchmarks/README.md, "IQL on real maze2d-umaze-dense-v1 data: the update
budget"); two such agents take about 6 minutes of a 2-core CPU, more than the whole
quickstart. The real-data anchor reads neither the DP fine-tune nor the release, so
training it again in every run measures nothing new. The release's own agent is
always trained live.

When the cache is used. Its ``key`` must equal :func:`real_agents_key` of the run
(the data section, the seed whose key the agents are trained with, the agent protocol
and every agent hyper-parameter) and the fingerprint of the sensitive rows the run
collected (:func:`data_fingerprint`: row count, float64 sums and sums of squares of
every field) must equal the stored one to a relative 1e-6 (the collector is the same
code on every host, but XLA may round its last bit differently on another CPU). Any
difference trains the agents live and says why in one line. The cached scores were
computed on one host; on another the same protocol gives the same law of scores, not
the same bits (``provenance`` records where they came from).

The file is written by ``benchmarks/quickstart_real_anchor.py``.

The cache is audit material, NOT differentially private: its scores come from agents
trained on the sensitive rows and its fingerprint is their sums. The quickstart ships
one because its "sensitive" rows are simulator data collected from a public seed;
never ship a cache made from data that is really sensitive.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from privrl_jax import data
from privrl_jax.pipelines._agent_train import make_run_agent
from privrl_jax.pipelines._config import to_dict

CACHE_VERSION = 1
FINGERPRINT_RTOL = 1e-6
# What of ``cfg.eval`` a real-data agent's score depends on.
_EVAL_FIELDS = (
    "agents",
    "agent_updates",
    "agent_chunk",
    "agent_seeds",
    "final_evals",
    "eval_episodes",
    "backend",
)


def real_agents_key(cfg: Any) -> dict[str, Any]:
    """Everything the real-data agents of ``cfg`` depend on besides the rows themselves.

    The data section, the seed (their key is the run's key folded with 400), the agent
    protocol and each agent's full hyper-parameters.
    """
    ec = cfg.eval
    eval_dict = to_dict(ec)
    return {
        "version": CACHE_VERSION,
        "seed": cfg.seed,
        "data": to_dict(cfg.data),
        "eval": {f: eval_dict[f] for f in _EVAL_FIELDS},
        "agent_configs": {
            name: _plain(
                dataclasses.asdict(make_run_agent(name, ec.agent_updates).config)
            )
            for name in ec.agents
        },
    }


def data_fingerprint(rows: data.Transitions) -> dict[str, float]:
    """Row count and, per field, the float64 sum and sum of squares.

    Equal rows give equal numbers, and a changed collector or file changes them.
    """
    out: dict[str, float] = {"rows": float(len(rows))}
    for field in dataclasses.fields(rows):
        x = np.asarray(getattr(rows, field.name), np.float64)
        out[f"{field.name}.sum"] = float(x.sum())
        out[f"{field.name}.sumsq"] = float((x * x).sum())
    return out


def resolve_cache_path(name: str) -> Path:
    """``name`` as a file.

    A ``.json`` path as given, otherwise a name under the package's configs
    (``privorl_n/quickstart_real_agents``).
    """
    if name.endswith(".json"):
        return Path(name)
    return Path(str(importlib.resources.files("privrl_jax") / "configs")) / (
        name + ".json"
    )


def cached_real_agents(
    cfg: Any, sensitive: data.Transitions
) -> tuple[dict[str, Any] | None, str]:
    """The cached real-data agents of this run, or why there are none.

    (the cached ``agents_real`` entry, "") when ``cfg.eval.real_agents_cache`` matches
    this run; otherwise (None, the one-line reason; "" when no cache is configured).
    """
    name = cfg.eval.real_agents_cache
    if not name:
        return None, ""
    path = resolve_cache_path(name)
    if not path.is_file():
        return None, f"no real-data agent cache at {path}: training them live."
    stored = json.loads(path.read_text())
    want = _plain(real_agents_key(cfg))
    if stored.get("key") != want:
        diff = sorted(k for k in want if stored.get("key", {}).get(k) != want.get(k))
        return None, (
            f"the real-data agent cache {path.name} was made for another "
            f"{'/'.join(diff)}: training them live "
            "(benchmarks/quickstart_real_anchor.py rewrites it)."
        )
    got = data_fingerprint(sensitive)
    ref = stored.get("fingerprint", {})
    if set(got) != set(ref) or not all(
        math.isclose(got[k], ref[k], rel_tol=FINGERPRINT_RTOL, abs_tol=1e-9)
        for k in got
    ):
        return None, (
            f"the sensitive rows differ from those the real-data agent cache "
            f"{path.name} was trained on: training them live."
        )
    agents = stored["agents_real"]
    for res in agents.values():
        res["cached"] = {"file": path.name, "provenance": stored.get("provenance")}
    return agents, ""


def write_real_agents_cache(
    path: Path,
    cfg: Any,
    sensitive: data.Transitions,
    agents_real: dict[str, Any],
    provenance: dict[str, Any],
) -> None:
    """Write the cache ``cached_real_agents`` reads for ``cfg``.

    Atomically: a temporary file renamed over the old one.
    """
    payload = {
        "key": _plain(real_agents_key(cfg)),
        "fingerprint": data_fingerprint(sensitive),
        "agents_real": agents_real,
        "provenance": provenance,
    }
    path = Path(path)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def _plain(x: Any) -> Any:
    """JSON's view of ``x`` (tuples as lists), so a stored key compares equal."""
    return json.loads(json.dumps(x))
