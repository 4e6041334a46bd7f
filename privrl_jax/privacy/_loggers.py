"""TensorBoard and Weights & Biases callbacks for :func:`privrl_jax.privacy.fit`.

They sit beside :class:`~privrl_jax.privacy.JsonLinesLogger`.

They log public quantities only, by an allow-list: the step, the steps planned, the
wall time and, at each commit, the epsilon spent; and, through :meth:`log_audit`, an
audit's demonstrated epsilon, its ceiling and the epsilon accounted. A loss (or any
other number computed on the private data) is never logged: it is not differentially
private, and a dashboard is a publication. Each backend is an optional extra
(``pip install privrl-jax[tensorboard]`` / ``[wandb]``), imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# What a callback may publish from the loop's ``info`` (see privacy.Callback).
PUBLIC_STEP_KEYS = ("total", "elapsed_s", "epsilon_spent")
# What it may publish of an audit (a FitAudit, an AuditResult or an audit_ledger row).
PUBLIC_AUDIT_KEYS = (
    "epsilon_demonstrated",
    "epsilon_accounted",
    "epsilon_ceiling",
    "auditable",
)


def public_step_scalars(info: Mapping[str, Any]) -> dict[str, float]:
    """The allow-listed numbers of one step's ``info``, under ``privacy/``."""
    return {
        f"privacy/{k}": float(info[k])
        for k in PUBLIC_STEP_KEYS
        if info.get(k) is not None
    }


def public_audit_scalars(audit: Any) -> dict[str, float]:
    """The allow-listed numbers of an audit, under ``audit/``.

    Args:
      audit: a :class:`~privrl_jax.privacy.audit.FitAudit`, an
        :class:`~privrl_jax.privacy.audit.AuditResult` or a row of
        :func:`~privrl_jax.privacy.audit.audit_ledger` (a dict).
    """
    out = {}
    for k in PUBLIC_AUDIT_KEYS:
        if isinstance(audit, Mapping):
            v = audit.get(k)
        else:
            v = getattr(audit, k, None)
            if v is None and k == "epsilon_demonstrated":
                v = getattr(audit, "epsilon_lower_bound", None)
        if v is not None:
            out[f"audit/{k}"] = float(v)
    return out


def _require(module: str, extra: str):
    try:
        return __import__(module)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"this logger needs {module!r}: pip install 'privrl-jax[{extra}]'"
        ) from e


class TensorBoardLogger:
    """Writes the public quantities of a DP run to TensorBoard event files.

    Pass it to :func:`fit` (``callbacks=[logger]``), optionally log an audit, then call
    :meth:`finish`.

    Uses ``tensorboardX`` (the ``tensorboard`` extra). By default only commits are
    written (where the epsilon spent is known); ``every_step`` writes the wall time of
    every step too.

    Args:
      logdir: the event files' directory.
      every_step: write every step, not only commits.
    """

    def __init__(self, logdir: str | os.PathLike, *, every_step: bool = False):
        tbx = _require("tensorboardX", "tensorboard")
        self.every_step = every_step
        self.writer = tbx.SummaryWriter(logdir=str(logdir))

    def on_step(self, info: Mapping[str, Any]) -> None:
        """Writes the allow-listed scalars of a step at its step number."""
        if self.every_step or info.get("epsilon_spent") is not None:
            for tag, value in public_step_scalars(info).items():
                self.writer.add_scalar(tag, value, global_step=int(info["step"]))

    def log_audit(self, audit: Any, step: int = 0) -> None:
        """Writes an audit's demonstrated epsilon, ceiling and accounted epsilon."""
        for tag, value in public_audit_scalars(audit).items():
            self.writer.add_scalar(tag, value, global_step=int(step))

    def close(self) -> None:
        """Flushes the event file.

        :func:`fit` calls it at the end of a run; the file stays open for
        :meth:`log_audit`.
        """
        self.writer.flush()

    def finish(self) -> None:
        """Closes the event file."""
        self.writer.close()


class WandbLogger:
    """Logs the public quantities of a DP run to Weights & Biases.

    Uses ``wandb`` (the ``wandb`` extra). Pass ``mode="offline"`` (or set
    ``WANDB_MODE=offline``) to log without a network and ``wandb sync`` later.

    Args:
      every_step: log every step, not only commits.
      run: an existing ``wandb`` run to log into; else ``wandb.init(**init_kwargs)``.
      **init_kwargs: e.g. ``project``, ``mode``, ``dir``, ``config`` (the config is
        published too: put only public settings in it).
    """

    def __init__(self, *, every_step: bool = False, run: Any = None, **init_kwargs):
        wandb = _require("wandb", "wandb")
        self.every_step = every_step
        self._own = run is None
        self.run = run if run is not None else wandb.init(**init_kwargs)

    def on_step(self, info: Mapping[str, Any]) -> None:
        """Logs the allow-listed scalars of a step at its step number."""
        if self.every_step or info.get("epsilon_spent") is not None:
            self.run.log(public_step_scalars(info), step=int(info["step"]))

    def log_audit(self, audit: Any) -> None:
        """Logs an audit's numbers into the run's summary (they are not a series)."""
        for tag, value in public_audit_scalars(audit).items():
            self.run.summary[tag] = value

    def close(self) -> None:
        """Nothing: :func:`fit` calls it at the end of a run.

        The W&B run stays open for :meth:`log_audit` and further fits; call
        :meth:`finish` when done.
        """

    def finish(self) -> None:
        """Finishes the W&B run if this logger started it."""
        if self._own:
            self.run.finish()
