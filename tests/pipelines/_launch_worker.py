"""One process for test_launch.py, run under launch_local: it joins jax.distributed
first (which installs XLA's SIGTERM handler), then

- ``{"mode": "sleep", "pids": PREFIX}`` writes its pid to ``PREFIX-<process id>`` and
  sleeps until killed;
- ``{"mode": "gpope", "outs": [...], "delay_primary_s": S}`` runs the GPOPE pipeline
  (gpope/test config) into each fresh directory in turn, process 0 holding back ``S``
  seconds before it opens each ledger (the window in which a secondary that does not
  wait would create ``checkpoints/dp``); process 0 writes ``<out>-weights.json``.
"""

import json
import os
import sys
import time
from pathlib import Path

from privrl_jax import privacy

TOPO = privacy.initialize_distributed(privacy.DistributedConfig.from_env())


def main():
    cfg = json.loads(sys.argv[1])
    if cfg["mode"] == "sleep":
        Path(f"{cfg['pids']}-{TOPO.process_id}").write_text(str(os.getpid()))
        while True:
            time.sleep(1)
    from privrl_jax.pipelines import gpope  # noqa: PLC0415

    if TOPO.is_primary:
        real_open = privacy.Ledger.open.__func__

        def late_open(cls, *args, **kwargs):
            time.sleep(cfg["delay_primary_s"])
            return real_open(cls, *args, **kwargs)

        privacy.Ledger.open = classmethod(late_open)
    run_cfg = gpope.load("gpope/test", ["privacy.noise_seed=3"])
    for out in cfg["outs"]:
        report = gpope.run(run_cfg, out)
        if TOPO.is_primary:
            Path(f"{out}-weights.json").write_text(json.dumps(report["weights"]))


if __name__ == "__main__":
    main()
