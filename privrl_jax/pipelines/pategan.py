"""PATE-GAN and PrePATE-GAN, the GAN baselines of PrivORL's Table I, end to end.

``run(config, run_dir)`` writes the layout PrivORL-n writes, through the same helpers
(``pipelines._synth``): the **release** ``synthetic.hdf5`` (D4RL format), ``ledger.json``,
``report.json``, ``config.yaml``; the **audit** ``audit/`` (fidelity against the
sensitive rows, never publish); ``report.md`` (both, labelled).

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
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import yaml
from tqdm.auto import tqdm

from privrl_jax import data, diffusion, privacy, synth
from privrl_jax.pipelines._dp_loop import DPSecret
from privrl_jax.pipelines._pategan_config import (
    MODELS,
    EvalConfig,
    ModelConfig,
    PateGanPipelineConfig,
    SynthesisConfig,
    load,
)
from privrl_jax.pipelines._rundir import atomic_write_text, run_in_dir
from privrl_jax.pipelines._synth import inputs as _inputs
from privrl_jax.pipelines._synth import release as _release
from privrl_jax.pipelines._synth import report as _report
from privrl_jax.pipelines._synth import scores as _scores
from privrl_jax.pipelines.privorl_n import (
    load_data,  # the same public/sensitive/holdout split
)

__all__ = [
    "MODELS",
    "EvalConfig",
    "ModelConfig",
    "PateGanPipelineConfig",
    "SynthesisConfig",
    "gan_config",
    "load",
    "render_markdown",
    "run",
    "vote_noise_multiplier",
]

GENERATORS = {
    "pategan": "PATE-GAN (GNMax votes, data-independent accounting)",
    "pategan_pretrained": "PrePATE-GAN (public pre-training; GNMax votes, "
    "data-independent accounting)",
}
VOTES = "PATE-GAN: noisy teacher votes (one Gaussian query per labelled sample)"


def gan_config(m: ModelConfig) -> synth.PateGanConfig:
    """The algorithm's sizes from the config's ``model`` section."""
    return synth.PateGanConfig(
        num_teachers=m.num_teachers,
        latent_dim=m.latent_dim,
        generator_features=tuple(m.generator_features),
        discriminator_features=tuple(m.discriminator_features),
        learning_rate=m.learning_rate,
        teacher_steps=m.teacher_steps,
        teacher_batch_size=m.teacher_batch_size,
        queries_per_round=m.queries_per_round,
        student_steps=m.student_steps,
        generator_batch_size=m.generator_batch_size,
        generator_steps=m.generator_steps,
        soft_labels=m.soft_labels,
    )


def _votes_event(sigma: float, num_queries: int) -> dp_accounting.DpEvent:
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(sigma), num_queries
    )


def vote_noise_multiplier(
    epsilon: float, delta: float, num_queries: int, accountant: str = "rdp"
) -> float:
    """Smallest sigma (to 1e-4 relative) whose ``num_queries`` Gaussian vote queries
    of sensitivity 1 are (epsilon, delta)-DP under ``accountant``; 0 at epsilon = inf.

    The epsilon of every candidate is dp-accounting's (``privacy.compute_epsilon`` of
    ``SelfComposedDpEvent(GaussianDpEvent(sigma), num_queries)``, the event the ledger
    will hold). The search starts from the one-release sigma times sqrt(num_queries)
    (under RDP the T-fold composition of a Gaussian of sigma is the Gaussian of sigma /
    sqrt(T), exactly) and bisects below it for PLD, which is tighter.
    """
    if math.isinf(epsilon):
        return 0.0
    if num_queries < 1:
        raise ValueError(f"num_queries must be >= 1; got {num_queries}.")

    def eps(s: float) -> float:
        return privacy.compute_epsilon(
            _votes_event(s, num_queries), delta, accountant=accountant
        ).epsilon

    one = (
        privacy.GaussianMechanism(l2_sensitivity=1.0)
        .calibrate(epsilon, delta, "rdp")
        .noise_multiplier
    )
    hi = one * math.sqrt(num_queries)
    while eps(hi) > epsilon:  # rounding: step up until the event is within budget
        hi *= 1 + 1e-6
    lo = hi / 2
    if (
        eps(lo) <= epsilon
    ):  # not expected (RDP is an upper bound); stay on the safe side
        return hi
    while hi - lo > 1e-4 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if eps(mid) <= epsilon else (mid, hi)
    return hi


def _recorder(ledger: privacy.Ledger, accountant: str, sigma: float):
    """Checks the budget, then records ``count`` vote queries, before they are drawn."""

    def record(count: int) -> None:
        mech = synth.vote_mechanism(sigma)
        if mech is None:  # epsilon = inf: exact votes, accounted as what they are
            ev = dp_accounting.NonPrivateDpEvent()
            ledger.check(ev, accountant=accountant)
            ledger.record(ev, what=VOTES, count=count, params={"mechanism": "none"})
        else:
            ledger.check(mech.event(), count, accountant=accountant)
            ledger.record(mech.event(), what=VOTES, count=count, params=mech.describe())

    return record


def run(cfg: PateGanPipelineConfig, run_dir: str | Path) -> dict[str, Any]:
    """Runs PATE-GAN or PrePATE-GAN (``model.name``) into ``run_dir``; returns the
    report (release + ``audit``)."""
    return run_in_dir(Path(run_dir), lambda d, topo: _run(cfg, d, topo))


def pretrain_on_public(
    cfg: PateGanPipelineConfig,
    nets: synth.GanNets,
    gcfg: synth.PateGanConfig,
    public_rows: np.ndarray,
    key: jax.Array,
):
    """PrePATE-GAN's non-private pre-training on the public rows (generator,
    discriminator, losses); a seam the tests watch to see what it is given."""
    return synth.pretrain_gan(
        key, nets, gcfg, public_rows, steps=cfg.model.pretrain_steps
    )


def _run(
    cfg: PateGanPipelineConfig, run_dir: Path, topo: privacy.Topology
) -> dict[str, Any]:
    if not topo.is_primary:
        raise ValueError(
            "PATE-GAN runs in one process; start it without jax.distributed."
        )
    m = cfg.model
    method = GENERATORS[m.name]
    resolved = _inputs.begin_run(cfg, run_dir, topo, method)
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only

    public, sensitive, holdout = load_data(cfg)
    n = len(sensitive)
    declared = cfg.privacy.dataset_size
    if declared is not None and declared != n:
        raise ValueError(
            f"privacy.dataset_size={declared} is declared, but the sensitive data hold "
            f"{n} transitions (after the {cfg.data.holdout_size}-row holdout)."
        )
    obs_dim, act_dim = _inputs.check_same_dims(public, sensitive)
    # Contract 5: the normaliser is fitted on public rows only.
    layout, pub_flat, norm = _inputs.public_encoding(cfg, public, obs_dim, act_dim)
    public_rows = np.asarray(diffusion.normalise(norm, jnp.asarray(pub_flat)))
    atomic_write_text(
        run_dir / "config.yaml", yaml.safe_dump(resolved, sort_keys=False)
    )

    ledger = _release.open_ledger(
        cfg, run_dir, _inputs.dataset_id(cfg.data, cfg.seed), n, topo
    )
    secret = (
        DPSecret.fresh()
        if cfg.privacy.noise_seed is None
        else DPSecret.from_seed(cfg.privacy.noise_seed)
    )
    sigma = vote_noise_multiplier(
        cfg.privacy.epsilon, cfg.privacy.delta, m.num_queries, cfg.privacy.accountant
    )
    gcfg = gan_config(m)
    nets = synth.make_nets(gcfg, layout.encoded_dim)
    fit_info: dict[str, Any] = {}

    def synthesize() -> data.Transitions:
        generator = discriminator = None
        if m.name == "pategan_pretrained":
            generator, discriminator, losses = pretrain_on_public(
                cfg, nets, gcfg, public_rows, jax.random.fold_in(key, 200)
            )
            fit_info["pretrain"] = {"steps": m.pretrain_steps, **losses}
        # The sensitive rows, encoded with the public normaliser, by partition: the
        # teachers' data and nothing else's.
        rows = np.asarray(
            diffusion.normalise(norm, jnp.asarray(_inputs.encode(sensitive, layout)))
        )
        parts = np.asarray(
            synth.partition_ids(
                jax.random.fold_in(key, 100), jnp.arange(n), m.num_teachers
            )
        )
        padded, counts = synth.partition_rows(rows, parts, m.num_teachers)
        del rows
        state = synth.init_pategan(
            jax.random.fold_in(key, 101),
            nets,
            gcfg,
            layout.encoded_dim,
            generator=generator,
            discriminator=discriminator,
        )
        chunk = synth.make_pategan_chunk(nets, gcfg, m.chunk_rounds)
        record = _recorder(ledger, cfg.privacy.accountant, sigma)
        padded, counts = jnp.asarray(padded), jnp.asarray(counts)
        metrics = None
        with tqdm(total=m.rounds, desc="PATE-GAN", unit="round") as bar:
            for start in range(0, m.rounds, m.chunk_rounds):
                record(m.chunk_rounds * m.queries_per_round)
                state, metrics = chunk(
                    state,
                    padded,
                    counts,
                    jax.random.fold_in(key, 102),
                    secret.noise_key,
                    start,
                    sigma,
                )
                bar.update(m.chunk_rounds)
        fit_info["last_round"] = {k: float(v) for k, v in metrics.items()}
        out = []
        sc = cfg.synthesis
        for i, s in enumerate(range(0, sc.num_samples, sc.batch_size)):
            b = min(sc.batch_size, sc.num_samples - s)
            x = synth.generate(
                nets,
                state.generator,
                jax.random.fold_in(jax.random.fold_in(key, 300), i),
                b,
                gcfg.latent_dim,
            )
            out.append(np.asarray(diffusion.denormalise(norm, x)))
        syn = diffusion.unflatten_transitions(jnp.asarray(np.concatenate(out)), layout)
        if sc.action_bounds:
            syn = syn.replace(actions=jnp.clip(syn.actions, *sc.action_bounds))
        return jax.tree_util.tree_map(np.asarray, syn)

    private = sigma > 0 and not secret.fixed
    synthetic = _release.release(
        cfg,
        run_dir,
        ledger,
        synthesize,
        generator=method,
        private=private,
        model=m.name,
    )
    info = _dp_info(cfg, sigma, secret, ledger, fit_info, private)
    report = _release.release_report(cfg, resolved, info, ledger)
    if cfg.eval.agents:
        report["agents_synthetic"] = _scores.agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = _release.open_audit(run_dir)
    audit.update(
        _scores.transition_audit(cfg, sensitive, holdout, synthetic, layout, norm, key)
    )
    return _release.write_reports(run_dir, report, audit, t0, render_markdown)


def _dp_info(cfg, sigma, secret, ledger, fit_info, private) -> dict[str, Any]:
    """The report's ``finetune`` section (the name the shared report keeps)."""
    m = cfg.model
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
        "private": private,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; never stored",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if cfg.privacy.dataset_size is not None
        else "read from the sensitive data and treated as public",
    }


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable summary of a PATE-GAN report."""
    fin = report["finetune"]
    name = GENERATORS[fin["model"]]
    audit = report.get("audit", {})
    lines = _report.markdown_head(report, f"# {name} report") + [
        f"| teachers, vote queries (rounds x per round) | {fin['num_teachers']}, "
        f"{fin['steps']} ({fin['rounds']} x {fin['queries_per_round']}) |",
        *_report.agent_rows(report, describe_seeds=True),
    ]
    if "fidelity" in audit:
        fid = audit["fidelity"]
        cols = [
            ("release", fid),
            *(
                [("real holdout", audit["anchors"]["real_holdout"])]
                if "anchors" in audit
                else []
            ),
        ]
        for k, what in (
            ("marginal", "marginal score (1 - mean KS)"),
            ("correlation", "correlation score"),
            (
                "sliced_wasserstein",
                "sliced Wasserstein to the sensitive rows (0 = same law)",
            ),
            (
                "free_cell_share",
                "share of positions in the sensitive maze's free cells",
            ),
        ):
            if k in fid:
                lines.append(
                    f"| {what} (audit): {' / '.join(c for c, _ in cols)} | "
                    f"{' / '.join(f'{v[k]:.3f}' for _, v in cols)} |"
                )
    return _report.markdown_tail(
        lines,
        report,
        release=(
            "**Release** (may be published): `synthetic.hdf5`, `ledger.json`, "
            "`report.json`, `config.yaml`."
        ),
        audit=(
            "**Audit** (`audit/`, NOT differentially private, never publish): the "
            "fidelity scores read the sensitive data without DP."
        ),
    )
