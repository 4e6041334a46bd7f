"""How every benchmark writes a result file: the numbers and what they ran with,
together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privrl_jax import provenance


def dump_json(path: str | Path, payload: Any, **json_kwargs: Any) -> None:
    """Writes ``payload`` to ``path`` as JSON, with :func:`privrl_jax.provenance`
    (versions,
    platform, devices): under the key ``provenance`` of a dict payload, or for any other
    payload in ``NAME.provenance.json`` beside it (readers of the list keep working)."""
    path = Path(path)
    info = provenance()
    if isinstance(payload, dict):
        payload = {**payload, "provenance": info}
    else:
        path.with_suffix(".provenance.json").write_text(json.dumps(info, indent=2))
    path.write_text(json.dumps(payload, **json_kwargs))
