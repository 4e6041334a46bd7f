"""The pipelines' wiring of the public DP loop (:func:`privrl_jax.privacy.fit`).

:func:`run_dp_loop` is ``privacy.fit`` with a :class:`privrl_jax.privacy.RunRecorder`
over a run directory's ledger and checkpoints and a progress bar: every pipeline's DP
phase runs it, and so makes the same release (bit for bit) as before the loop became
public.
"""

from __future__ import annotations

from typing import Any

import jax

from privrl_jax import privacy
from privrl_jax.privacy import (
    Checkpoints,
    DivergenceError,
    DPSecret,
    LoopStats,
)

__all__ = [
    "DPSecret",
    "DivergenceError",
    "LoopStats",
    "run_dp_loop",
]

PyTree = Any


def run_dp_loop(
    plan: privacy.DPPlan,
    method: privacy.DPMethod,
    init_state: PyTree,
    data: PyTree,
    *,
    ckpt: Checkpoints,
    ledger: privacy.Ledger | None,
    what: str,
    secret: DPSecret,
    loss_key: jax.Array,
    item_mask: jax.Array | None = None,
    checkpoint_every: int = 50,
    accountant: str = "rdp",
    desc: str = "DP steps",
    stats: LoopStats | None = None,
    max_abs_param: float = 1e6,
    divergence_hint: str = (
        "lower the learning rate or the clip norm, or raise the batch size"
    ),
    topology: privacy.Topology | None = None,
    data_parallel: bool = False,
    budget_hint: str = (
        "Raise the noise multiplier (a larger privacy.epsilon target calibrates less "
        "noise), take fewer steps (finetune.epochs) or a smaller sampling rate "
        "(finetune.batch_size), or start a new run directory with a larger budget."
    ),
) -> tuple[PyTree, DPSecret]:
    """Run ``privacy.fit`` into a run directory.

    Returns the final state and the run's secret.

    ``ckpt``, ``ledger``, ``what``, ``accountant``, ``checkpoint_every`` and
    ``budget_hint`` (the CLI's config keys) make its
    :class:`privacy.RunRecorder` (process 0 passes the ledger, the other processes
    None); ``desc`` labels the progress bar; the rest is :func:`privacy.fit`'s.
    """
    recorder = privacy.RunRecorder(
        ckpt,
        ledger,
        what=what,
        accountant=accountant,
        checkpoint_every=checkpoint_every,
        budget_hint=budget_hint,
    )
    result = privacy.fit(
        plan,
        method,
        data,
        init_state,
        secret=secret,
        recorder=recorder,
        callbacks=(privacy.ProgressBar(desc),),
        topology=topology,
        loss_key=loss_key,
        item_mask=item_mask,
        stats=stats,
        max_abs_param=max_abs_param,
        divergence_hint=divergence_hint,
        data_parallel=data_parallel,
    )
    return result.state, result.secret
