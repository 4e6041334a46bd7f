"""The marginal-based baselines of PrivORL's Table I (PGM, MST, AIM) end to end.

Through ``mbi``.

``run(config, run_dir)`` writes the layout PrivORL-n writes, through the same
helpers (``pipelines._synth``): the **release** ``synthetic.hdf5`` (D4RL format),
``ledger.json``, ``report.json``, ``config.yaml``; the **audit** ``audit/``
(fidelity against the sensitive rows, never publish); ``report.md`` (both,
labelled). There are no checkpoints: the measurements are a few one-shot releases, each
recorded in the ledger (and checked against the budget) before it is drawn. A rerun
reuses a finished release; a run interrupted between a measurement and the release
would measure again, and the ledger, which kept the first measurement, refuses what
would exceed the budget.

Privacy: the unit is one sensitive transition under add/remove-one. The bins come from
public bounds (the env's spaces, the declared reward range), never from the rows. The
noise multiplier sigma is calibrated by dp-accounting for one Gaussian release at the
target (epsilon, delta); PGM releases its k marginals as that one mechanism (sensitivity
sqrt(k)), MST splits it into three Gaussian releases whose composition is the same
Gaussian (`synth.mst_noise_multipliers`); AIM spends that Gaussian's rho over its
1-way marginals and rounds of an exponential-mechanism selection (a ``ZCDpEvent``) and
a Gaussian measurement, the last round taking exactly the rho left, so its RDP epsilon
is the target too (`synth.fit_aim`; ``privacy.accountant: pld`` is refused for AIM).
The noise key comes from a ``DPSecret`` (the OS, or ``privacy.noise_seed``: then the
run is labelled not private).

Requires the optional extra ``pip install -e ".[baselines]"`` (mbi 2.0).

The modules split it by role: :mod:`.task` (the public bins, cliques, noise multiplier
and the audit's encoding, built once per run and passed down), :mod:`.runner` (the
measurements and the fit, inside the run the baselines share: inputs, ledger, release,
report and the audit's fidelity) and :mod:`.report` (Markdown).
"""

from privrl_jax.pipelines._marginal_config import (
    MODELS,
    EvalConfig,
    MarginalConfig,
    ModelConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines.marginal.report import render_markdown
from privrl_jax.pipelines.marginal.runner import run
from privrl_jax.pipelines.marginal.task import (
    GENERATORS,
    MarginalTask,
    build_task,
    noise_multiplier,
    public_discretisation,
)

__all__ = [
    "GENERATORS",
    "MODELS",
    "EvalConfig",
    "MarginalConfig",
    "MarginalTask",
    "ModelConfig",
    "SynthesisConfig",
    "build_task",
    "load",
    "noise_multiplier",
    "public_discretisation",
    "render_markdown",
    "run",
]
