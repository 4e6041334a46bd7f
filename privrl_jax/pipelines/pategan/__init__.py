"""PATE-GAN and PrePATE-GAN, the GAN baselines of PrivORL's Table I, end to end.

``run(config, run_dir)`` writes the layout PrivORL-n writes, through the same
helpers (``pipelines._synth``): the **release** ``synthetic.hdf5`` (D4RL format),
``ledger.json``, ``report.json``, ``config.yaml``; the **audit** ``audit/``
(fidelity against the sensitive rows, never publish); ``report.md`` (both, labelled).

Privacy (`synth._pategan` has the argument): the unit is one sensitive transition
under add/remove-one. The sensitive rows reach only the k teachers, each its own
disjoint partition (assigned from a public key and the row's index). Each of the
``model.rounds * model.queries_per_round`` vote queries is one Gaussian of sensitivity
1 on a count of teachers; sigma is calibrated by dp-accounting for that many
``GaussianDpEvent``s at the target (epsilon, delta) (:func:`vote_noise_multiplier`) and
every chunk of rounds is checked against the budget and recorded in the ledger before
it runs. The accounting is data-independent: the original's data-dependent moments
analysis is not used (Ganev et al. 2024, see `synth._pategan`). Normaliser and, for
``pategan_pretrained``, the pre-trained GAN see public data only. The noise key comes
from a ``DPSecret`` (the OS, or ``privacy.noise_seed``: then the run is labelled not
private); epsilon = inf trains with exact votes (not private).

There are no checkpoints: a run interrupted after its first chunk is not resumed (its
ledger keeps the spent queries and refuses a second full run); start a new run
directory.

The modules split it by role: :mod:`.task` (the public encoding, the GAN's networks and
the vote noise multiplier, built once per run and passed down), :mod:`.runner` (the
run: inputs, ledger, training, release, report and the audit's fidelity) and
:mod:`.report` (Markdown).
"""

from privrl_jax.pipelines._pategan_config import (
    MODELS,
    EvalConfig,
    ModelConfig,
    PateGanPipelineConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines.pategan.report import render_markdown
from privrl_jax.pipelines.pategan.runner import pretrain_on_public, run
from privrl_jax.pipelines.pategan.task import (
    GENERATORS,
    PateGanTask,
    build_task,
    gan_config,
    vote_noise_multiplier,
)

__all__ = [
    "GENERATORS",
    "MODELS",
    "EvalConfig",
    "ModelConfig",
    "PateGanPipelineConfig",
    "PateGanTask",
    "SynthesisConfig",
    "build_task",
    "gan_config",
    "load",
    "pretrain_on_public",
    "render_markdown",
    "run",
    "vote_noise_multiplier",
]
