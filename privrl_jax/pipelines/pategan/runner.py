"""The PATE-GAN baselines' run: public pre-training, the rounds, and the sampling.

Pre-training on the public rows (PrePATE-GAN), the rounds, every chunk of vote queries
recorded in the ledger before it is drawn, and the sampling, inside the run the
baselines share (`_synth.baseline`).

See :mod:`privrl_jax.pipelines.pategan` for what a run writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.pipelines._pategan_config import PateGanPipelineConfig
from privrl_jax.pipelines._rundir import run_in_dir
from privrl_jax.pipelines._synth.baseline import (
    ReleaseRecorder,
    privacy_labels,
    run_baseline,
)
from privrl_jax.pipelines.pategan.report import render_markdown
from privrl_jax.pipelines.pategan.task import GENERATORS, PateGanTask, build_task
from privrl_jax.pipelines.privorl_n import (
    load_data,  # the same public/sensitive/holdout split
)

VOTES = "PATE-GAN: noisy teacher votes (one Gaussian query per labelled sample)"


def run(cfg: PateGanPipelineConfig, run_dir: str | Path) -> dict[str, Any]:
    """Run PATE-GAN or PrePATE-GAN (``model.name``) into ``run_dir``.

    Returns the report (release + ``audit``).
    """
    return run_in_dir(
        Path(run_dir),
        lambda d, topo: run_baseline(
            cfg,
            d,
            topo,
            method=GENERATORS[cfg.model.name],
            load_data=load_data,
            build_task=build_task,
            synthesize=_synthesize,
            dp_info=_dp_info,
            render_markdown=render_markdown,
        ),
    )


def pretrain_on_public(
    cfg: PateGanPipelineConfig,
    nets: synth.GanNets,
    gcfg: synth.PateGanConfig,
    public_rows: np.ndarray,
    key: jax.Array,
):
    """PrePATE-GAN's non-private pre-training on the public rows.

    Returns the generator, the discriminator and the losses; a seam the tests watch to
    see what it is given.
    """
    return synth.pretrain_gan(
        key, nets, gcfg, public_rows, steps=cfg.model.pretrain_steps
    )


def _synthesize(
    task: PateGanTask,
    sensitive: data.Transitions,
    record: ReleaseRecorder,
    secret: privacy.DPSecret,
    key: jax.Array,
    fit_info: dict[str, Any],
) -> data.Transitions:
    """Train the teachers, student and generator, then sample the generator.

    They are trained on the sensitive rows' partitions; ``fit_info`` gets the
    pre-training losses and the last round's metrics.
    """
    cfg, m = task.cfg, task.cfg.model
    generator = discriminator = None
    if m.name == "pategan_pretrained":
        generator, discriminator, losses = pretrain_on_public(
            cfg, task.nets, task.gan, task.public_rows, jax.random.fold_in(key, 200)
        )
        fit_info["pretrain"] = {"steps": m.pretrain_steps, **losses}
    # The sensitive rows, encoded with the public normaliser, by partition: the
    # teachers' data and nothing else's.
    parts = np.asarray(
        synth.partition_ids(
            jax.random.fold_in(key, 100), jnp.arange(len(sensitive)), m.num_teachers
        )
    )
    padded, counts = synth.partition_rows(task.rows(sensitive), parts, m.num_teachers)
    state = synth.init_pategan(
        jax.random.fold_in(key, 101),
        task.nets,
        task.gan,
        task.layout.encoded_dim,
        generator=generator,
        discriminator=discriminator,
    )
    chunk = synth.make_pategan_chunk(task.nets, task.gan, m.chunk_rounds)
    mech = synth.vote_mechanism(task.sigma)  # None at epsilon = inf: exact votes
    per_chunk = m.chunk_rounds * m.queries_per_round
    padded, counts = jnp.asarray(padded), jnp.asarray(counts)
    metrics = None
    with tqdm(total=m.rounds, desc="PATE-GAN", unit="round") as bar:
        for start in range(0, m.rounds, m.chunk_rounds):
            record(VOTES, mech, per_chunk)
            state, metrics = chunk(
                state,
                padded,
                counts,
                jax.random.fold_in(key, 102),
                secret.noise_key,
                start,
                task.sigma,
            )
            bar.update(m.chunk_rounds)
    fit_info["last_round"] = {k: float(v) for k, v in metrics.items()}
    return _sample(task, state.generator, jax.random.fold_in(key, 300))


def _sample(task: PateGanTask, generator: Any, key: jax.Array) -> data.Transitions:
    """``synthesis.num_samples`` transitions from the generator.

    Public post-processing.
    """
    sc, out = task.cfg.synthesis, []
    for i, s in enumerate(range(0, sc.num_samples, sc.batch_size)):
        b = min(sc.batch_size, sc.num_samples - s)
        x = synth.generate(
            task.nets, generator, jax.random.fold_in(key, i), b, task.gan.latent_dim
        )
        out.append(np.asarray(diffusion.denormalise(task.norm, x)))
    syn = diffusion.unflatten_transitions(jnp.asarray(np.concatenate(out)), task.layout)
    if sc.action_bounds:
        syn = syn.replace(actions=jnp.clip(syn.actions, *sc.action_bounds))
    return jax.tree_util.tree_map(np.asarray, syn)


def _dp_info(
    task: PateGanTask,
    secret: privacy.DPSecret,
    ledger: privacy.Ledger,
    fit_info: dict[str, Any],
    private: bool,
) -> dict[str, Any]:
    """The report's ``finetune`` section (the name the shared report keeps)."""
    cfg, m, sigma = task.cfg, task.cfg.model, task.sigma
    return {
        "model": m.name,
        "unit": "transition",
        "neighboring": "ADD_OR_REMOVE_ONE",
        "accounting": "data-independent: every vote query is one GaussianDpEvent "
        "(sensitivity 1); the data-dependent analysis of Jordon et al. is not used",
        "noise_multiplier": sigma,
        "vote_noise_std": sigma * synth.VOTE_SENSITIVITY,
        "num_teachers": m.num_teachers,
        "rounds": m.rounds,
        "queries_per_round": m.queries_per_round,
        "steps": m.num_queries,  # Gaussian queries (no subsampling: q = 1)
        "sampling_rate": 1.0,
        "recorded_queries": ledger.num_releases,
        "releases": [
            {"what": g["what"], "count": g["count"], **g["params"]}
            for g in ledger.groups()
        ],
        **({"pretrain": fit_info["pretrain"]} if "pretrain" in fit_info else {}),
        **({"last_round": fit_info["last_round"]} if "last_round" in fit_info else {}),
        **privacy_labels(cfg, secret, private),
    }
