"""How every benchmark writes a result file: the numbers and what they ran with,
together."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from privrl_jax import provenance
from privrl_jax.experiments.stats import summary  # noqa: F401 -- re-exported

# The statistics (mean, sample std ddof = 1, Student-t intervals, paired tests) are the
# package's one implementation, privrl_jax/experiments/stats.py; ``summary`` stays
# importable from here for the scripts that tabulate seeds.

# What a results file records of the host and load its runs ran under.
RUN_FIELDS = ("provenance", "xla_flags", "uptime")


def dump_json(
    path: str | Path, payload: Any, *, ran: bool = True, **json_kwargs: Any
) -> None:
    """Writes ``payload`` to ``path`` as JSON, with :func:`privrl_jax.provenance`
    (versions, platform, devices): under the key ``provenance`` of a dict payload, or
    for any other payload in ``NAME.provenance.json`` beside it (readers of the list
    keep working).

    ``ran=False`` says this invocation started no run (it re-tabulated stored ones): the
    stored file's :data:`RUN_FIELDS` are kept, since they describe the host and load the
    runs had, and this host's provenance and load go under ``tabulated``."""
    path = Path(path)
    info = provenance()
    if not isinstance(payload, dict):
        path.with_suffix(".provenance.json").write_text(json.dumps(info, indent=2))
        write_text(path, json.dumps(payload, **json_kwargs))
        return
    payload = {**payload, "provenance": info}
    stored = _stored(path) if not ran else {}
    if any(k in stored for k in RUN_FIELDS):
        now = {k: payload[k] for k in RUN_FIELDS if k in payload}
        payload |= {k: stored[k] for k in RUN_FIELDS if k in stored}
        payload["tabulated"] = now
    write_text(path, json.dumps(payload, **json_kwargs))


def _stored(path: Path) -> dict:
    """The JSON object stored at ``path``; empty when there is none or it is broken."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def write_text(path: Path, text: str) -> None:
    """Writes ``text`` beside ``path`` and renames it over: a run killed mid-write
    leaves the previous file, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_results(
    res: Path, stem: str, payload: dict, md: str, *, ran: bool = True
) -> None:
    """Writes ``res/stem.json`` (``payload``, the XLA flags and ``uptime`` added) and
    ``res/stem.md`` (``md`` with the load line), the layout the tuning scripts share;
    ``ran=False`` keeps the stored run-time fields (:func:`dump_json`)."""
    path = res / f"{stem}.json"
    dump_json(
        path,
        {**payload, "xla_flags": os.environ.get("XLA_FLAGS", ""), "uptime": uptime()},
        ran=ran,
        indent=2,
    )
    md += load_line(path)
    write_text(res / f"{stem}.md", md)


def load_line(path: Path) -> str:
    """The Markdown line giving the load stored in the results JSON at ``path``: the
    runs' own, also after a re-tabulation (``tabulated`` then holds the tabulating
    host's)."""
    got = _stored(path)
    when = "when the runs were written" if "tabulated" in got else "when written"
    return f"\n`uptime` {when}: {got.get('uptime', '')}; {os.cpu_count()} CPUs.\n"


def uptime() -> str:
    """``uptime``'s line (the load a timing ran under), or "" where there is none."""
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return ""


def data_files(out: Path, seed: int) -> tuple[Path, Path]:
    """The seed's sensitive (members + holdout) and public transitions of the umaze
    task, as the pipelines collect them (pategan_repro.py's data). Moved here
    from ``marginal_baselines.py`` (now the experiment file
    ``privrl_jax/experiments/marginal_baselines.yaml``, whose runs collect the same data
    themselves)."""
    import jax  # noqa: PLC0415 -- the timing scripts import this module without jax

    from privrl_jax import data  # noqa: PLC0415
    from privrl_jax.pipelines import marginal  # noqa: PLC0415
    from privrl_jax.pipelines.privorl_n import collect_transitions  # noqa: PLC0415

    d = marginal.load("marginal/pgm_umaze", [f"seed={seed}"]).data
    sens, pub = (
        out / f"data_seed{seed}_sensitive.hdf5",
        out / f"data_seed{seed}_public.hdf5",
    )
    if not sens.exists():
        full = collect_transitions(
            d.sensitive_env,
            d.sensitive_size + d.holdout_size,
            seed * 1000,
            d.action_noise,
        )
        data.save_hdf5(sens, jax.tree_util.tree_map(np.asarray, full))
    if not pub.exists():
        parts = [
            collect_transitions(e, d.public_size, seed * 1000 + 1 + i, d.action_noise)
            for i, e in enumerate(d.public_envs)
        ]
        public = jax.tree_util.tree_map(
            lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts
        )
        data.save_hdf5(pub, public)
    return sens, pub
