"""The run the one-process transition-level baselines (the marginal ones, PATE-GAN)
share: inputs checked before anything is written, the releases recorded in the ledger
before each is drawn, the release, its report, the agents and the audit's fidelity.

A baseline gives its task (built from the config and the public data, checked before the
run writes), its ``synthesize`` (which records every release through
:func:`record_release`) and its report's ``finetune`` section; the rest is here, once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import dp_accounting
import jax

from privrl_jax import data, diffusion, privacy
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
    def norm(self) -> diffusion.Normaliser:
        """The audit's normaliser, fitted on the public rows only."""


Task = TypeVar("Task", bound=BaselineTask)


def record_release(
    ledger: privacy.Ledger,
    accountant: str,
    what: str,
    mech: privacy.GaussianMechanism | None,
    count: int = 1,
) -> None:
    """Checks the budget, then records ``count`` releases of ``mech`` as ``what``,
    before they are drawn; ``None`` (epsilon = inf: exact values) is accounted as what
    it is, a ``NonPrivateDpEvent``."""
    if mech is None:
        event, params = dp_accounting.NonPrivateDpEvent(), {"mechanism": "none"}
    else:
        event, params = mech.event(), mech.describe()
    ledger.check(event, count, accountant=accountant)
    ledger.record(event, what=what, count=count, params=params)


def privacy_labels(cfg: Any, secret: privacy.DPSecret, private: bool) -> dict[str, Any]:
    """The last entries of a baseline's ``finetune`` section: whether the run is
    private, where its noise secret came from and where N came from."""
    return {
        "private": private,
        "noise_secret": "fixed by privacy.noise_seed (not private)"
        if secret.fixed
        else "drawn from os.urandom; never stored",
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
      method: the generator's name (what a rerun into ``run_dir`` must match).
      load_data: ``cfg -> (public, sensitive, holdout)``.
      build_task: ``(cfg, public, sensitive) -> task``; raises on a bad input, before
        anything is written.
      synthesize: ``(task, sensitive, ledger, secret, key, fit_info) -> release``;
        records every release (:func:`record_release`) before drawing it and may put
        what the report shows of the fit into ``fit_info``. Not called when the run
        directory already holds the release.
      dp_info: ``(task, secret, ledger, fit_info, private) -> dict``, the report's
        ``finetune`` section (ending with :func:`privacy_labels`).
      render_markdown: the report's Markdown.
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
    secret = _release.noise_secret(cfg)
    fit_info: dict[str, Any] = {}
    private = task.sigma > 0 and not secret.fixed
    synthetic = _release.release(
        cfg,
        run_dir,
        ledger,
        lambda: synthesize(task, sensitive, ledger, secret, key, fit_info),
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
