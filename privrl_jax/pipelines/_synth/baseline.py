"""The run the one-process transition-level baselines (marginal, PATE-GAN) share.

Inputs checked before anything is written, the releases recorded in the ledger before
each is drawn, the release, its report, the agents and the audit's fidelity.

A baseline gives its task (built from the config and the public data, checked before the
run writes), its ``synthesize`` (which records every release through a
:class:`ReleaseRecorder`) and its report's ``finetune`` section; the rest is here, once.

A baseline's releases are one-shot, so it resumes as POOL's run does: its secret is in
the secret store (``checkpoints/dp``) before its first ledger entry, and a run killed
after some entries reruns with the same secret, replaying the recorded entries (nothing
spent twice) and recomputing the same release from them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import dp_accounting
import jax

from privrl_jax import data, diffusion, privacy
from privrl_jax.data import Normalizer as Normaliser
from privrl_jax.pipelines._synth import inputs as _inputs
from privrl_jax.pipelines._synth import release as _release
from privrl_jax.pipelines._synth import scores as _scores


class BaselineTask(Protocol):
    """The public side of one baseline run, as the shared run reads it."""

    @property
    def method(self) -> str:
        """The generator's name in reports and the release's metadata."""

    @property
    def sigma(self) -> float:
        """The noise multiplier (0 at epsilon = inf: not private)."""

    @property
    def layout(self) -> diffusion.TransitionLayout:
        """The encoding the audit's fidelity scores are computed in."""

    @property
    def norm(self) -> Normaliser:
        """The audit's normaliser, fitted on the public rows only."""


Task = TypeVar("Task", bound=BaselineTask)


SECRET_DIR = "checkpoints/dp"  # the secret store (privacy.load_or_create_secret)


class ReleaseRecorder:
    """Records a baseline run's releases in its ledger before each is drawn.

    Those a killed run already recorded are replayed.

    The ``i``-th call of a run is the ledger's ``i``-th entry when the ledger holds one:
    a rerun (same config, same secret, so the same releases in the same order) replays
    it without spending again; past the ledger's end, each call checks the budget and
    records. A call that differs from the entry it replays is refused: the release would
    not be the one the ledger accounts for.
    """

    def __init__(self, ledger: privacy.Ledger, accountant: str):
        self.ledger = ledger
        self.accountant = accountant
        self.position = 0  # ledger entries this run has recorded or replayed

    def __call__(
        self,
        what: str,
        mech: privacy.GaussianMechanism | privacy.ExponentialMechanism | None,
        count: int = 1,
    ) -> None:
        """Record (or replay) ``count`` releases of ``mech`` as ``what``.

        ``None`` (epsilon = inf: exact values) is accounted as what it is, a
        ``NonPrivateDpEvent``.

        Raises:
          BudgetExceededError: a new release would exceed the budget (nothing recorded).
          LedgerError: the ledger's entry at this position records another release.
        """
        if mech is None:
            event, params = dp_accounting.NonPrivateDpEvent(), {"mechanism": "none"}
        else:
            event, params = mech.event(), mech.describe()
        releases = self.ledger.releases
        if self.position < len(releases):
            entry = releases[self.position]
            # As the ledger reads it back: plain JSON types.
            mine = (what, count, json.loads(json.dumps(privacy.event_to_dict(event))))
            if (entry.what, entry.count, entry.event) != mine:
                raise privacy.LedgerError(
                    f"{self.ledger.path} entry {self.position} records {entry.count} x "
                    f"{entry.what!r}, but this run's release {self.position} is "
                    f"{count} x {what!r}: the ledger is not this run's. Start a new "
                    "run directory."
                )
        else:
            self.ledger.check(event, count, accountant=self.accountant)
            self.ledger.record(event, what=what, count=count, params=params)
        self.position += 1

    def finish(self) -> None:
        """Raise :class:`~privrl_jax.privacy.LedgerError` unless every entry was used.

        That is, unless the run replayed or recorded every entry of the ledger (a
        release made from fewer entries than the ledger holds is not the release the
        ledger accounts for).
        """
        if self.position != len(self.ledger.releases):
            raise privacy.LedgerError(
                f"{self.ledger.path} holds {len(self.ledger.releases)} entries, but "
                f"this run's release made {self.position}: the ledger is not this "
                "run's. Start a new run directory."
            )


def privacy_labels(cfg: Any, secret: privacy.DPSecret, private: bool) -> dict[str, Any]:
    """The last entries of a baseline's ``finetune`` section.

    Whether the run is private, where its noise secret came from and where N came from.
    """
    return {
        "private": private,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; stored only in checkpoints/",
        "dataset_size_source": "privacy.dataset_size (declared)"
        if cfg.privacy.dataset_size is not None
        else "read from the sensitive data and treated as public",
    }


def run_baseline(
    cfg: Any,
    run_dir: Path,
    topo: privacy.Topology,
    *,
    method: str,
    load_data: Callable[[Any], tuple[data.Transitions, ...]],
    build_task: Callable[[Any, data.Transitions, data.Transitions], Task],
    synthesize: Callable[..., data.Transitions],
    dp_info: Callable[..., dict[str, Any]],
    render_markdown: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """One baseline run into ``run_dir`` (locked by the caller); returns the report.

    Args:
      cfg: the run's config (a ``SynthPipelineConfig`` with ``model.name``).
      run_dir: the run directory.
      topo: the process topology; the baselines run in one process only.
      method: the generator's name (what a rerun into ``run_dir`` must match).
      load_data: ``cfg -> (public, sensitive, holdout)``.
      build_task: ``(cfg, public, sensitive) -> task``; raises on a bad input, before
        anything is written.
      synthesize: ``(task, sensitive, record, secret, key, fit_info) -> release``;
        records every release through ``record`` (a :class:`ReleaseRecorder`) before
        drawing it, draws all its noise from ``secret`` and may put what the report
        shows of the fit into ``fit_info``. Not called when the run directory already
        holds the release.
      dp_info: ``(task, secret, ledger, fit_info, private) -> dict``, the report's
        ``finetune`` section (ending with :func:`privacy_labels`).
      render_markdown: the report's Markdown.

    Returns:
      The report (as written to report.json, with the audit under ``audit``).

    Raises:
      ValueError: in a multi-process run, or for a bad input (before anything is
        written).
    """
    if not topo.is_primary:
        raise ValueError(
            f"{method} runs in one process; start it without jax.distributed."
        )
    resolved = _inputs.begin_run(cfg, run_dir, topo, method)
    t0 = time.time()
    key = jax.random.key(cfg.seed)  # public randomness only

    public, sensitive, holdout = load_data(cfg)
    n = len(sensitive)
    _inputs.check_dataset_size(
        cfg, n, "transitions", f"{cfg.data.holdout_size}-row holdout"
    )
    task = build_task(cfg, public, sensitive)
    _release.write_config(run_dir, resolved, topo)

    ledger = _release.open_ledger(
        cfg, run_dir, _inputs.dataset_id(cfg.data, cfg.seed), n, topo
    )
    # On disk before the first ledger entry: a run killed after it reruns with this
    # secret and replays its entries (ReleaseRecorder) instead of spending again.
    secret = privacy.load_or_create_secret(
        privacy.Checkpoints(run_dir / SECRET_DIR),
        ledger,
        noise_seed=cfg.privacy.noise_seed,
    )
    fit_info: dict[str, Any] = {}
    private = task.sigma > 0 and not secret.fixed

    def synthesize_recorded() -> data.Transitions:
        record = ReleaseRecorder(ledger, cfg.privacy.accountant)
        synthetic = synthesize(task, sensitive, record, secret, key, fit_info)
        record.finish()
        return synthetic

    synthetic = _release.release(
        cfg,
        run_dir,
        ledger,
        synthesize_recorded,
        generator=method,
        private=private,
        model=cfg.model.name,
    )
    info = dp_info(task, secret, ledger, fit_info, private)
    report = _release.release_report(cfg, resolved, info, ledger)
    _release.epsilon_audit(cfg, run_dir, ledger, report)
    if cfg.eval.agents:
        report["agents_synthetic"] = _scores.agent_scores(
            cfg, synthetic, jax.random.fold_in(key, 400)
        )

    _, audit = _release.open_audit(run_dir)
    audit.update(
        _scores.transition_audit(
            cfg, sensitive, holdout, synthetic, task.layout, task.norm, key
        )
    )
    return _release.write_reports(run_dir, report, audit, t0, render_markdown)
