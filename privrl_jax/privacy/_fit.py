"""The public DP training loop every method runs: :func:`fit`.

sample (the plan's sampler, a secret stream) -> clipped sums of masked microbatches (the
sensitive data on the device, gathered inside jit) -> noise once (the plan) -> the
method's update -> record **before** checkpoint -> checkpoint -> resume (same batches,
same noise, nothing spent twice).

Three small pieces plug into it:

- a :class:`DPMethod`: the per-unit clipped sum (it must clip to the plan's norms), how
  to read the parameters from the method's state, how to update the state from the noisy
  mean, and optionally public rows added to the sum before the noise (PrivORL's
  FineCur). A gradient method is one call: :func:`gradient_method` from a per-item loss
  and a *plain* optax optimizer;
- a :class:`Recorder` (resume / commit): :class:`RunRecorder` keeps a run directory's
  guarantees (ledger before checkpoint, the hash chain, the budget checked before any
  release, bitwise resume, one writer on several processes); ``recorder=None`` runs in
  memory for experiments;
- callbacks (:class:`ProgressBar`, :class:`JsonLinesLogger`) that see public quantities
  only: the step, the elapsed time and the epsilon spent, never a loss on the private
  data.

The noise comes from the plan and nowhere else: the loop adds ``plan.privatize`` to the
clipped sum, so it cannot run without the plan's noise, and an optimizer that adds its
own is refused.

Secrets (docs/design.md, contract 5): the noise key and the sampling seed come from the
OS's entropy source (:meth:`DPSecret.fresh`) and are stored only in the checkpoints,
which must never be published. :meth:`DPSecret.from_seed` exists for tests and
reproduction; a run using it is not private, and says so.

Several processes (``jax.distributed``) run the same loop and make the same release as
one
process: see :mod:`privrl_jax.privacy._distributed` (the split, the collective, the
  single writer).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax

from privrl_jax.privacy import _adaptive
from privrl_jax.privacy import _distributed as dist
from privrl_jax.privacy._accounting import Accountant
from privrl_jax.privacy._aggregation import AddNoiseState, DPTrainState, data_parallel
from privrl_jax.privacy._checkpoints import Checkpoints
from privrl_jax.privacy._clipping import ClippedSumFn
from privrl_jax.privacy._ledger import BudgetExceededError, Ledger, LedgerError
from privrl_jax.privacy._plan import DPPlan, PlanArrays, _require_rdp_for_discrete

PyTree = Any
_SECRET_WORDS = 8


@dataclasses.dataclass(frozen=True)
class DPSecret:
    """One DP run's secret randomness: the noise key and the sampling stream's seed.

    ``words`` is 8 uint32 words: words 0-1 are the Threefry noise key, words 2-7 (192
    bits) seed the NumPy sampling stream. ``fixed`` marks a secret derived from a public
    seed.
    """

    words: np.ndarray
    fixed: bool

    @classmethod
    def fresh(cls) -> DPSecret:
        """256 bits from ``os.urandom``.

        Nobody can regenerate the noise from the run directory.
        """
        return cls(
            np.frombuffer(os.urandom(4 * _SECRET_WORDS), np.uint32).copy(), False
        )

    @classmethod
    def from_seed(cls, seed: int) -> DPSecret:
        """A reproducible secret for tests.

        Anyone who knows ``seed`` can recompute the noise.
        """
        words = np.random.SeedSequence([int(seed), 0x5EC2E7]).generate_state(
            _SECRET_WORDS
        )
        return cls(words.astype(np.uint32), True)

    @property
    def noise_key(self) -> jax.Array:
        """The Threefry key every step's noise is folded from."""
        return jax.random.wrap_key_data(
            jnp.asarray(self.words[:2], jnp.uint32), impl="threefry2x32"
        )

    @property
    def sampling_seed(self) -> int:
        """The seed of the sampler's secret stream."""
        return int.from_bytes(self.words[2:].astype("<u4").tobytes(), "little")

    def to_tree(self) -> dict[str, np.ndarray]:
        """Arrays for a checkpoint."""
        return {"words": self.words, "fixed": np.asarray(self.fixed, np.int32)}

    @classmethod
    def from_tree(cls, tree: Mapping[str, Any]) -> DPSecret:
        """Inverse of :meth:`to_tree`."""
        return cls(
            np.asarray(tree["words"], np.uint32), bool(np.asarray(tree["fixed"]))
        )


class DivergenceError(RuntimeError):
    """The noisy parameters became non-finite or exploded.

    The loop stopped; the spend is recorded.
    """


class DPMethod(NamedTuple):
    """What a method adds to the loop (all pure; the loop jits them).

    Attributes:
      clipped: the per-unit clipped sum (``plan.clipped_grad(loss)``,
        ``plan.clipped_sum(fn)``); it must clip to the plan's norms (checked).
      params: ``state -> params`` the clipped sum is taken at.
      update: ``(state, noisy_mean) -> state``: the method's step from the privatized
        mean.
      public_rows: optional host-side hook ``(state, acc, step) -> (state, acc)`` adding
        clipped contributions of public rows (never sensitive ones) to the sum before
        the noise.
    """

    clipped: ClippedSumFn
    params: Callable[[PyTree], PyTree]
    update: Callable[[PyTree, PyTree], PyTree]
    public_rows: Callable[[PyTree, PyTree, int], tuple[PyTree, PyTree]] | None = None


def _adds_noise(opt_state: PyTree) -> bool:
    noisy: tuple[type, ...] = (AddNoiseState, optax.AddNoiseState)
    # optax.contrib.dpsgd / differentially_private_aggregate clip and noise themselves.
    contrib = getattr(optax, "contrib", None)
    dp_state = getattr(contrib, "DifferentiallyPrivateAggregateState", None)
    if isinstance(dp_state, type):
        noisy += (dp_state,)
    nodes = jax.tree_util.tree_leaves(opt_state, is_leaf=lambda x: isinstance(x, noisy))
    return any(isinstance(x, noisy) for x in nodes)


def gradient_method(
    plan: DPPlan,
    per_item_loss: Callable[..., jax.Array],
    optimizer: optax.GradientTransformation,
    params: PyTree,
    *,
    uses_key: bool = False,
    clip_method: str = "vmap",
) -> tuple[DPMethod, DPTrainState]:
    """DP-SGD in one call.

    The plan's clipped gradient of ``per_item_loss`` and a plain optimizer.

    Args:
      plan: the calibrated plan (its clip norm clips the gradient; its noise is added by
        :func:`fit`).
      per_item_loss: ``loss(params, item)`` (``loss(params, item, key)`` with
        ``uses_key``) of ONE item; a unit's items are summed before its gradient is
        clipped.
      optimizer: a plain optax optimizer (e.g. ``optax.adam(1e-3)``) applied to the
        noisy mean.
      params: the initial parameters.
      uses_key: as :meth:`DPPlan.clipped_grad`.
      clip_method: as :meth:`DPPlan.clipped_grad`.

    Returns:
      ``(method, init_state)`` for :func:`fit`; the state is ``DPTrainState(params,
      opt_state)``.

    Raises:
      ValueError: the optimizer already adds noise (the plan's optax DP-SGD chain,
        ``optax.add_noise``, ``optax.contrib.dpsgd``): the noise would be added twice,
        or, worse, accounted once and added by someone else.
    """
    opt_state = optimizer.init(params)
    if _adds_noise(opt_state):
        raise ValueError(
            "the optimizer adds its own noise (a DP-SGD noise transform / "
            "optax.add_noise / optax.contrib.dpsgd / "
            "optax.contrib.differentially_private_aggregate): "
            "fit adds the plan's noise once; pass a plain optimizer such as "
            "optax.adam(1e-3)."
        )

    clipped = plan.clipped_grad(per_item_loss, uses_key=uses_key, method=clip_method)
    return DPMethod(
        clipped, _train_state_params, _OptaxUpdate(optimizer)
    ), DPTrainState(params, opt_state)


def _train_state_params(state: DPTrainState) -> PyTree:
    return state.params


@dataclasses.dataclass(frozen=True)
class _OptaxUpdate:
    """The update of :func:`gradient_method`: equal (and hashed) by its optimizer.

    So fits of one sweep that pass the same optimizer share :func:`fit`'s compiled step.
    """

    optimizer: optax.GradientTransformation

    def __call__(self, state: DPTrainState, noisy_mean: PyTree) -> DPTrainState:
        updates, new_opt = self.optimizer.update(
            noisy_mean, state.opt_state, state.params
        )
        return DPTrainState(optax.apply_updates(state.params, updates), new_opt)


@dataclasses.dataclass
class LoopStats:
    """What actually ran in this call of the loop.

    For tests and audits; private: never publish.
    """

    steps: int = 0
    noise_draws: int = 0
    sampled_units: list[int] = dataclasses.field(default_factory=list)
    local_units: list[int] = dataclasses.field(default_factory=list)
    step_end_s: list[float] = dataclasses.field(
        default_factory=list
    )  # perf_counter after each step
    # Adaptive clipping only: the clip norm each step clipped to (device scalars).
    clip_norms: list[Any] = dataclasses.field(default_factory=list)
    # Adaptive clipping only: the clip norm after the last step (the run's, a resumed
    # one's too). Unlike the fields above it is publishable: post-processing of the
    # noisy counts, which the plan accounts.
    final_l2_clip_norm: float | None = None


class FitResult(NamedTuple):
    """What :func:`fit` returns.

    The final state, the run's secret (never publish it) and whether the run was private
    (sigma > 0 and a secret not derived from a public seed).

    ``nonfinite_units`` counts the sampled units, over the steps this call ran, whose
    contribution (gradient) was non-finite (NaN/inf): they were dropped, i.e. added
    zero, which costs no privacy. It is a count on the sensitive data, not a DP
    release: show it to the data owner, never publish it.
    """

    state: PyTree
    secret: DPSecret
    private: bool
    nonfinite_units: int = 0


# ---------------------------------------------------------------------------- recorders


class Recorder(Protocol):
    """Where a DP run's progress lives.

    Resume from it; commit each stretch of steps to it.

    A recorder may set ``checkpoint_every`` (steps between commits); without it
    :func:`fit` commits once, after the last step.
    """

    def resume(
        self, plan: DPPlan, tree: PyTree, topology: dist.Topology
    ) -> tuple[int, PyTree]:
        """``(start, tree)``: the newest saved step and its tree.

        ``tree`` itself and 0 when fresh. Checks the record and the budget for the
        remaining steps first; raises before any release when the run must not go on.
        """
        ...

    def commit(self, plan: DPPlan, step: int, tree: PyTree) -> None:
        """Records every step up to ``step`` (the spend first), then saves ``tree``.

        The tree is saved at ``step``.
        """
        ...

    def epsilon_spent(self) -> float | None:
        """The epsilon recorded so far (a public quantity), or None where unknown."""
        ...


class InMemoryRecorder:
    """No files: the run starts fresh and keeps nothing (experiments, tests).

    The epsilon spent is the plan's for the steps committed so far.
    """

    def __init__(self, accountant: Accountant = "rdp", delta: float | None = None):
        self.accountant, self.delta = accountant, delta
        self.steps_done = 0
        self._plan: DPPlan | None = None

    def resume(
        self, plan: DPPlan, tree: PyTree, topology: dist.Topology
    ) -> tuple[int, PyTree]:
        self._plan = plan
        if topology.distributed:
            tree = {**tree, "secret": dist.broadcast_from_primary(tree["secret"])}
        return 0, tree

    def commit(self, plan: DPPlan, step: int, tree: PyTree) -> None:
        self.record(plan, step)

    def record(self, plan: DPPlan, step: int) -> None:
        """Counts the steps up to ``step`` as spent (nothing is saved in memory)."""
        self.steps_done = step

    def epsilon_spent(self) -> float | None:
        if self._plan is None or self.delta is None or not self.steps_done:
            return None
        done = dataclasses.replace(self._plan, steps=self.steps_done)
        return done.epsilon(self.delta, self.accountant).epsilon


def _head_to_tree(head: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(head), np.uint8).copy()


def _head_from_tree(arr: Any) -> str:
    return bytes(np.asarray(arr, np.uint8)).hex()


class RunRecorder:
    """A run directory's record.

    The ledger (process 0 only) and orbax checkpoints of the state, the secret and the
    ledger head.

    Guarantees: the budget is checked before the first release and on every resume;
    steps are recorded in the ledger **before** the checkpoint that contains them (a
    crash in between over-counts, never under); a checkpoint whose ledger head the
    ledger does not hold, or that is ahead of the ledger, is refused (the spend is
    unknown); the secret is on disk before any noise is drawn; a non-private plan's
    steps are recorded as they commit, as ``NonPrivateDpEvent`` steps.

    Args:
      checkpoints: this phase's :class:`Checkpoints` (every process takes part in
        saves).
      ledger: the run's ledger on process 0; None on the other processes.
      what: the ledger's name for one step of this loop.
      accountant: for the budget check and the epsilon shown.
      checkpoint_every: steps between commits (ledger records and checkpoints).
      budget_hint: the advice of a :class:`BudgetExceededError`, in the caller's terms
        (a CLI names its config keys); by default the Python API's parameters.
    """

    def __init__(
        self,
        checkpoints: Checkpoints,
        ledger: Ledger | None,
        *,
        what: str,
        accountant: Accountant = "rdp",
        checkpoint_every: int = 50,
        budget_hint: str | None = None,
    ):
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1; got {checkpoint_every}.")
        self.ckpt, self.ledger, self.what = checkpoints, ledger, what
        self.accountant, self.checkpoint_every = accountant, checkpoint_every
        self.budget_hint = budget_hint
        self._done = 0
        self._topology: dist.Topology | None = None

    def resume(
        self, plan: DPPlan, tree: PyTree, topology: dist.Topology
    ) -> tuple[int, PyTree]:
        # Before anything is written: a plan this accountant cannot account.
        _require_rdp_for_discrete(plan.noise, self.accountant)
        self._topology = topology
        writer = self.ledger if topology.is_primary else None
        if topology.is_primary and writer is None:
            raise ValueError(
                "process 0 writes the ledger: pass it (only the other processes pass "
                "None)."
            )
        head = (
            _head_to_tree(writer.head) if writer is not None else np.zeros(32, np.uint8)
        )
        tree = {**tree, "ledger_head": head}
        start = 0
        latest = self.ckpt.latest()
        if latest is not None:
            tree = self.ckpt.restore(latest, tree)
            start = latest
        if topology.distributed:
            # Everyone has read the same latest checkpoint before anyone can write a
            # newer one; a fresh run takes process 0's secret, so all processes draw the
            # same batches and noise.
            dist.barrier("privrl-dp-loop-restored")
            if latest is None:
                tree["secret"] = dist.broadcast_from_primary(tree["secret"])
        refusal: Exception | None = None
        if writer is not None:
            try:
                if latest is not None:
                    writer.require_head(
                        _head_from_tree(tree["ledger_head"]),
                        f"the checkpoint of DP step {start}",
                    )
                if writer.dataset_size != plan.dataset_size:
                    raise LedgerError(
                        f"the ledger {writer.path} was opened with dataset_size="
                        f"{writer.dataset_size} but the plan's sampler has N = "
                        f"{plan.dataset_size}: both count the same privacy units. "
                        f"Pass dataset_size={plan.dataset_size} to Ledger.open (in a "
                        "new run directory) or build the sampler with the ledger's N."
                    )
                # Before the budget check: a resume under another plan would mix two
                # sigmas (or step counts...) in one model, and a finished run rerun
                # with another plan would hand back the old state without a word.
                writer.require_plan(self.what, plan.describe())
                self._done = sum(
                    r.count for r in writer.releases if r.what == self.what
                )
                if plan.private:
                    if self._done < start:
                        raise LedgerError(
                            f"the checkpoint is at DP step {start} but the ledger "
                            "records only "
                            f"{self._done} steps of {self.what!r}: the privacy spend "
                            "is unknown. "
                            "Start a new run directory."
                        )
                    writer.check(
                        plan.step_event(),
                        plan.steps - self._done,
                        accountant=self.accountant,
                        hint=self.budget_hint,
                    )
                elif self._done < start:
                    # A non-private run's steps are recorded as they commit, like a
                    # private run's; a ledger behind its checkpoint (one written when a
                    # non-private run recorded a single event) catches up here. The
                    # spend is inf either way, so over-counting cannot mislead.
                    self._record_steps(plan, start - self._done)
            except (LedgerError, BudgetExceededError) as e:
                refusal = e
        if topology.distributed and bool(
            dist.broadcast_from_primary(np.asarray(refusal is not None))
        ):
            if refusal is None:
                raise RuntimeError(
                    "process 0 refused to run (see its error: the ledger or the "
                    "budget); "
                    "nothing was released."
                )
        if refusal is not None:
            raise refusal
        state_tree = {k: v for k, v in tree.items() if k != "ledger_head"}
        if latest is None:
            # The secret is on disk before any noise is drawn, so a crash can never lead
            # to a second, differently-noised version of a recorded step.
            self._save(0, state_tree)
        return start, state_tree

    def _save(self, step: int, tree: PyTree) -> None:
        topo = self._topology
        writer = self.ledger if topo is not None and topo.is_primary else None
        head = (
            _head_to_tree(writer.head) if writer is not None else np.zeros(32, np.uint8)
        )
        if topo is not None and topo.distributed:
            head = dist.broadcast_from_primary(head)
        self.ckpt.save(step, {**tree, "ledger_head": head})

    def commit(self, plan: DPPlan, step: int, tree: PyTree) -> None:
        self.record(plan, step)
        self._save(step, tree)

    def record(self, plan: DPPlan, step: int) -> None:
        """Records the steps up to ``step`` in the ledger.

        Process 0 only. A non-private plan's steps are recorded too, as
        ``NonPrivateDpEvent`` steps with the plan's description (sampler, clip norm,
        steps): the ledger says what ran, and an audit of it reruns every step.
        """
        topo = self._topology
        if topo is not None and topo.is_primary and step > self._done:
            self._record_steps(plan, step - self._done)

    def _record_steps(self, plan: DPPlan, new: int) -> None:
        assert self.ledger is not None  # resume() refused process 0 without one
        self.ledger.record(
            plan.step_event(), what=self.what, count=new, params=plan.describe()
        )
        self._done += new

    def epsilon_spent(self) -> float | None:
        topo = self._topology
        if topo is None or not topo.is_primary:
            return None
        assert self.ledger is not None  # resume() refused process 0 without one
        return self.ledger.epsilon(self.accountant).epsilon


# ---------------------------------------------------------------------------- callbacks


class Callback(Protocol):
    """Sees public quantities only.

    ``info`` holds ``step``, ``total``, ``elapsed_s`` and, at a commit,
    ``epsilon_spent`` (when the recorder knows it) -- and one exception, for the data
    owner's eyes: ``nonfinite_units``, the units dropped so far in this call because
    their contribution was NaN/inf (a count on the sensitive data, not DP: never publish
    it).
    """

    def on_step(self, info: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class ProgressBar:
    """A tqdm bar over the DP steps, with the epsilon spent at each commit."""

    def __init__(self, desc: str = "DP steps", *, disable: bool = False):
        self.desc, self.disable = desc, disable
        self._bar: Any = None

    def on_step(self, info: Mapping[str, Any]) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm  # noqa: PLC0415

            self._bar = tqdm(
                total=info["total"],
                initial=info["step"] - 1,
                desc=self.desc,
                unit="step",
                disable=self.disable,
            )
        if info.get("epsilon_spent") is not None:
            self._bar.set_postfix(eps_spent=f"{info['epsilon_spent']:.3g}")
        self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# What a callback may write where others can read it (nonfinite_units is not public).
_PUBLIC_INFO = ("step", "total", "elapsed_s", "epsilon_spent")


class JsonLinesLogger:
    """Appends one JSON object per commit to ``path``.

    Step, elapsed seconds, epsilon spent (the public quantities only: never
    ``nonfinite_units``).
    """

    def __init__(self, path: str | os.PathLike, *, every_step: bool = False):
        self.path, self.every_step = Path(path), every_step

    def on_step(self, info: Mapping[str, Any]) -> None:
        if self.every_step or "epsilon_spent" in info:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                public = {k: info[k] for k in _PUBLIC_INFO if k in info}
                f.write(json.dumps(public) + "\n")

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- the loop


def make_accumulate(
    clip_fn: ClippedSumFn, mesh: jax.sharding.Mesh | None = None
) -> Callable[..., PyTree]:
    """Builds the step that adds a microbatch's clipped sum to ``acc``.

    The step maps ``acc, params, data, item_mask, idx, unit_mask, offset, loss_key, t``
    to ``acc + clipped sum``.

    ``data`` leaves are ``[N, items, ...]`` and stay on the device; the microbatch
    ``idx`` is gathered inside the jitted function, so only the (public-shaped) index
    vector crosses from the host. Unit ``i`` (global index ``offset + idx``) of step
    ``t`` gets the key ``fold_in(fold_in(loss_key, t), i)``, derived inside jit: a
    unit's randomness (e.g. its EDM noise level) is the same however the batch is split
    into microbatches, devices or processes. With ``mesh``, each microbatch is split
    over the mesh's devices (:func:`data_parallel`).

    The clip norms are traced arguments of one module-level jitted function, so clipped
    sums that differ only in their norms (a sweep) share one compiled executable.
    """
    counting = _make_counting_accumulate(clip_fn, mesh)

    def accumulate(acc, params, data, item_mask, idx, unit_mask, offset, loss_key, t):
        zero = jnp.zeros((), jnp.int32)
        return counting(
            acc, zero, params, data, item_mask, idx, unit_mask, offset, loss_key, t
        )[0]

    return accumulate


def _make_counting_accumulate(
    clip_fn: ClippedSumFn, mesh: jax.sharding.Mesh | None = None
) -> Callable[..., tuple[PyTree, jax.Array]]:
    """:func:`make_accumulate` that also carries ``nonfinite`` (after ``acc``).

    It is the count of units whose contribution was non-finite, plus this microbatch's.
    """
    structure = _without_norms(clip_fn)
    norms = tuple(clip_fn.l2_clip_norms)

    def accumulate(
        acc, nonfinite, params, data, item_mask, idx, unit_mask, offset, loss_key, t
    ):
        return _accumulate(
            acc,
            nonfinite,
            params,
            data,
            item_mask,
            idx,
            unit_mask,
            offset,
            loss_key,
            t,
            norms,
            clip_fn=structure,
            mesh=mesh,
        )

    return accumulate


def _without_norms(clip_fn: ClippedSumFn) -> ClippedSumFn:
    # The static half of a clipped sum: everything but its clip norms (bound again,
    # traced, inside the jitted function).
    return dataclasses.replace(
        clip_fn,
        l2_clip_norms=(None,) * clip_fn.num_blocks,  # type: ignore[arg-type]
    )


@functools.partial(jax.jit, static_argnames=("clip_fn", "mesh"), donate_argnums=0)
def _accumulate(
    acc,
    nonfinite,
    params,
    data,
    item_mask,
    idx,
    unit_mask,
    offset,
    loss_key,
    t,
    norms,
    *,
    clip_fn,
    mesh,
):
    clipped, metrics, _ = _microbatch_sum(
        params, data, item_mask, idx, unit_mask, offset, loss_key, t, norms,
        clip_fn=clip_fn, mesh=mesh,
    )  # fmt: skip
    return (
        jax.tree_util.tree_map(jnp.add, acc, clipped),
        nonfinite + metrics.num_nonfinite,
    )


def _microbatch_sum(
    params, data, item_mask, idx, unit_mask, offset, loss_key, t, norms, *,
    clip_fn, mesh,
):  # fmt: skip
    # One microbatch's clipped sum and metrics (traced inside the jitted accumulators).
    clip_fn = dataclasses.replace(clip_fn, l2_clip_norms=tuple(norms))
    sum_fn = (clip_fn if mesh is None else data_parallel(clip_fn, mesh)).with_unit_keys
    batch = jax.tree_util.tree_map(lambda x: x[idx], data)
    mask = item_mask[idx] & unit_mask[:, None]
    unit_keys = None
    if clip_fn.uses_key:
        step_key = jax.random.fold_in(loss_key, t)
        unit_keys = jax.vmap(lambda i: jax.random.fold_in(step_key, i))(offset + idx)
    clipped, metrics = sum_fn(params, batch, mask, unit_keys)
    return clipped, metrics, jnp.any(mask, axis=1)


@functools.partial(jax.jit, static_argnames=("clip_fn", "mesh"), donate_argnums=0)
def _accumulate_adaptive(
    acc,
    nonfinite,
    count,
    params,
    data,
    item_mask,
    idx,
    unit_mask,
    offset,
    loss_key,
    t,
    clip_norm,
    *,
    clip_fn,
    mesh,
):
    # _accumulate at a traced clip norm C_t that also adds the microbatch's centred
    # count of unclipped units (privacy/_adaptive.py): one bit per unit, from the
    # unit's whole norm (the ghost path's norms too: no per-unit gradient is formed).
    clipped, metrics, present = _microbatch_sum(
        params, data, item_mask, idx, unit_mask, offset, loss_key, t, (clip_norm,),
        clip_fn=clip_fn, mesh=mesh,
    )  # fmt: skip
    bits = _adaptive.centred_unclipped_count(metrics.per_unit_norms, present, clip_norm)
    return (
        jax.tree_util.tree_map(jnp.add, acc, clipped),
        nonfinite + metrics.num_nonfinite,
        count + bits,
    )


def _adaptive_noise_std(clip_norm, std_per_norm):
    # Step t's gradient noise std: z_Delta x sensitivity factor x C_t (float32).
    return jnp.asarray(clip_norm, jnp.float32) * jnp.float32(std_per_norm)


@functools.partial(jax.jit, static_argnames=("config", "expected_batch_size"))
def _next_clip_norm(
    clip_norm,
    count,
    noise_key,
    t,
    count_noise_std,
    std_per_norm,
    *,
    config,
    expected_batch_size,
):
    # C_{t+1} from step t's count, with noise from a key no gradient release uses, and
    # the noise std of step t+1's release.
    key = jax.random.fold_in(
        jax.random.fold_in(noise_key, _adaptive.COUNT_NOISE_TAG), t
    )
    new, _ = _adaptive.update_clip_norm(
        clip_norm,
        count,
        key,
        config=config,
        count_noise_std=count_noise_std,
        expected_batch_size=expected_batch_size,
    )
    return new, _adaptive_noise_std(new, std_per_norm)


@functools.partial(
    jax.jit, static_argnames=("structure", "update", "params_of", "max_abs_param")
)
def _release(
    state,
    acc,
    noise_key,
    t,
    healthy,
    noise_stds,
    *,
    structure,
    update,
    params_of,
    max_abs_param,
):
    # The noise stds are traced (bound from the plan by fit at each call), so a sweep
    # over sigma compiles this program once. Against the earlier program that kept them
    # constants, a release may differ by an ulp: with a traced std LLVM contracts
    # ``x + std * z`` into one FMA (one rounding instead of two). The law of the noise
    # is the same; every traced release is reproducible bit for bit (resume, and
    # ope.gpope, whose scan traces the std too).
    noise = PlanArrays((None,) * structure.num_blocks, tuple(noise_stds))
    state = update(
        state, structure.privatize(acc, jax.random.fold_in(noise_key, t), noise)
    )
    leaves = jax.tree_util.tree_leaves(params_of(state))
    ok = jnp.all(
        jnp.stack(
            [jnp.all(jnp.isfinite(x) & (jnp.abs(x) <= max_abs_param)) for x in leaves]
        )
    )
    return state, healthy & ok


@functools.partial(jax.jit, static_argnames=("treedef", "specs"))
def _zeros(*, treedef, specs):
    # One jitted call per step; eager jnp.zeros dispatches one op per leaf (~18 ms per
    # step on the denoiser under load, measured).
    return jax.tree_util.tree_unflatten(
        treedef, [jnp.zeros(shape, dtype) for shape, dtype in specs]
    )


@functools.partial(jax.jit, static_argnames="params_of")
def _params(state, *, params_of):
    return params_of(state)


def fit(
    plan: DPPlan,
    method: DPMethod,
    data: PyTree,
    init_state: PyTree,
    *,
    secret: DPSecret | None = None,
    recorder: Recorder | None = None,
    callbacks: Sequence[Callback] = (),
    topology: dist.Topology | None = None,
    loss_key: jax.Array | None = None,
    item_mask: jax.Array | None = None,
    stats: LoopStats | None = None,
    max_abs_param: float = 1e6,
    divergence_hint: str = (
        "lower the learning rate or the clip norm, or raise the batch size"
    ),
    data_parallel: bool = False,
) -> FitResult:
    """Runs (or resumes) ``plan.steps`` DP steps of ``method`` on sensitive ``data``.

    Args:
      plan: the calibrated plan (sampler, clip norms, sigma, steps): its noise is the
        only noise.
      method: see :class:`DPMethod` (:func:`gradient_method` builds one from a loss).
      data: the sensitive units, leaves ``[N, items, ...]`` with N =
        ``plan.dataset_size``; on several processes, this process's block
        ``topology.local_block(all_units)``.
      init_state: the method's state before step 0 (used when the recorder has nothing
        saved).
      secret: the run's noise key and sampling seed; default :meth:`DPSecret.fresh`.
        Used only when starting fresh: a resumed run continues with its saved one.
      recorder: a :class:`RunRecorder` for a resumable, accounted run directory; None
        runs in memory (:class:`InMemoryRecorder`), checkpointing nothing.
      callbacks: progress and logging (:class:`ProgressBar`, :class:`JsonLinesLogger`).
      topology: which process this is, of how many (default: the running JAX runtime's).
      loss_key: the public randomness of the per-unit function (e.g. EDM noise levels).
      item_mask: ``[N, items]`` bool (all True by default; this process's block, like
        ``data``).
      stats: filled with what ran, when given (private: never publish it).
      max_abs_param: the divergence guard's bound on the noisy parameters' absolute
        values.
      divergence_hint: what the divergence error advises (name the method's config
        keys).
      data_parallel: split each microbatch over this process's local devices.

    The divergence guard checks the *noisy* parameters (post-processing: it costs no
    privacy) at
    each commit: the steps already run are recorded (they were spent), the diverged
    state is not saved, and :class:`DivergenceError` stops the run.

    Units whose contribution is non-finite (NaN/inf) are dropped (they add zero, which
    costs no privacy); the run says so once (a ``RuntimeWarning``), and the count is in
    the result and in the callbacks' ``nonfinite_units``.

    Returns:
      :class:`FitResult` (state, secret, private, nonfinite_units).

    Raises:
      ValueError: the method clips to other norms than the plan, or the data's shape is
        wrong.
      LedgerError, BudgetExceededError: from a :class:`RunRecorder`, before any release.
      DivergenceError: see above.
    """
    plan.check_clipped(method.clipped)
    topo = topology or dist.Topology.current()
    recorder = recorder if recorder is not None else InMemoryRecorder()
    secret = secret if secret is not None else DPSecret.fresh()
    loss_key = loss_key if loss_key is not None else jax.random.key(0)
    n = plan.dataset_size
    lo, hi = topo.unit_range(n)
    leaves = jax.tree_util.tree_leaves(data)
    shapes = [tuple(x.shape) for x in leaves]
    if not topo.distributed and (not leaves or any(not s or s[0] != n for s in shapes)):
        raise ValueError(
            f"the plan's sampler has N = {n} privacy units, so every leaf of the "
            f"sensitive data must be [{n}, items, ...]; got {shapes}. Build the "
            "sampler with dataset_size = the data's first axis, or pass the data "
            "the plan was made for (one unit of k items: shape [N, k, ...])."
        )
    if hi == lo or not leaves or any(x.shape[0] != hi - lo for x in leaves):
        mine = (
            f"units [{lo}, {hi}) of {n} "
            f"(process {topo.process_id} of {topo.num_processes})"
        )
        raise ValueError(
            f"the sensitive data must hold {mine} along axis 0; got "
            f"{[tuple(x.shape) for x in leaves]}. "
            + ("Pass topology.local_block(data)." if topo.distributed else "")
        )
    if item_mask is None:
        item_mask = jnp.ones(leaves[0].shape[:2], bool)
    data = jax.tree_util.tree_map(jnp.asarray, data)
    stats = stats if stats is not None else LoopStats()
    every = getattr(recorder, "checkpoint_every", plan.steps)

    adaptive = plan.adaptive_clipping
    template = {"state": init_state, "secret": secret.to_tree()}
    if adaptive is not None:
        # The clip norm is part of the run's state (a DP release: post-processing of
        # the noisy counts), checkpointed with it so a resumed run continues it.
        template["l2_clip_norm"] = jnp.asarray(plan.l2_clip_norms[0], jnp.float32)
    start, tree = recorder.resume(plan, template, topo)
    secret = DPSecret.from_tree(tree["secret"])
    state = tree["state"]
    clip_norm = tree.get("l2_clip_norm")

    clip_fn = method.clipped
    sum_shapes = jax.eval_shape(
        lambda s: clip_fn(
            method.params(s),
            jax.tree_util.tree_map(lambda x: x[:1], data),
            item_mask[:1],
            jax.random.key(0) if clip_fn.uses_key else None,
        )[0],
        state,
    )
    mesh = None
    if data_parallel:
        mesh = jax.sharding.Mesh(np.array(jax.local_devices()), ("data",))
        size = plan.sampler.microbatch_size
        if size % mesh.size:
            raise ValueError(
                f"data_parallel splits each microbatch over {mesh.size} local devices: "
                f"use a microbatch size that is a multiple of {mesh.size} (got {size})."
            )
    # Every jitted piece is a module-level function with the plan's structure and the
    # method's functions static: repeated fits that pass the same functions reuse the
    # compiled programs. The plan's numbers are traced arguments bound from the plan
    # here, its only source: the clip norms (checked against the method's above) in
    # the per-unit gradients, the noise stds in the release. A sweep over sigma or the
    # clip norm compiles each program once.
    accumulate = _make_counting_accumulate(clip_fn, mesh)
    structure, arrays = plan.split()
    # privatize reads only the stds, never a clip norm: those are not passed.
    noise_stds = tuple(arrays.noise_stds)
    if adaptive is not None:
        clip_structure = _without_norms(clip_fn)
        # sigma_grad x sensitivity factor: C_t's noise std is this times C_t.
        std_per_norm = plan.gradient_noise_multiplier * (
            plan.sensitivities[0] / plan.l2_clip_norms[0]
        )
        next_clip_norm = functools.partial(
            _next_clip_norm,
            config=adaptive,
            expected_batch_size=float(plan.expected_batch_size),
        )
        count_noise_std = np.float32(plan.count_noise_std)
        noise_stds = (_adaptive_noise_std(clip_norm, std_per_norm),)
    release = functools.partial(
        _release,
        structure=structure,
        update=method.update,
        params_of=method.params,
        max_abs_param=float(max_abs_param),
    )
    sum_leaves, sum_def = jax.tree_util.tree_flatten(sum_shapes)
    zero_sum = functools.partial(
        _zeros,
        treedef=sum_def,
        specs=tuple((tuple(x.shape), np.dtype(x.dtype)) for x in sum_leaves),
    )
    params_of = functools.partial(_params, params_of=method.params)
    noise_key = secret.noise_key
    offset = np.int64(lo)
    unrecorded = 0
    healthy = jnp.asarray(True)
    # Units whose contribution was non-finite (dropped), summed on the device and read
    # at the commits only (no extra host sync per step).
    nonfinite = jnp.zeros((), jnp.int32)
    nonfinite_units, warned = 0, False
    t0 = time.perf_counter()
    callbacks = tuple(callbacks) if topo.is_primary else ()
    try:
        for t in range(start, plan.steps):
            batch = plan.sample(secret.sampling_seed, t)
            stats.sampled_units.append(batch.size)
            if topo.distributed:
                batch = dist.local_microbatches(batch, lo, hi)
            stats.local_units.append(batch.size)
            acc = zero_sum()
            params = params_of(state)
            count = jnp.zeros((), jnp.float32)
            for j in range(batch.indices.shape[0]):
                args = (
                    params,
                    data,
                    item_mask,
                    batch.indices[j],
                    batch.mask[j],
                    offset,
                    loss_key,
                    np.int32(t),
                )
                if adaptive is None:
                    acc, nonfinite = accumulate(acc, nonfinite, *args)
                else:
                    acc, nonfinite, count = _accumulate_adaptive(
                        acc,
                        nonfinite,
                        count,
                        *args,
                        clip_norm,
                        clip_fn=clip_structure,
                        mesh=mesh,
                    )
            if topo.distributed:
                if adaptive is None:
                    acc = dist.sum_over_processes(acc)
                else:
                    acc, count = dist.sum_over_processes((acc, count))
            if method.public_rows is not None:
                state, acc = method.public_rows(state, acc, t)
            state, healthy = release(
                state, acc, noise_key, np.int32(t), healthy, noise_stds
            )
            if adaptive is not None:
                stats.clip_norms.append(clip_norm)
                clip_norm, std = next_clip_norm(
                    clip_norm,
                    count,
                    noise_key,
                    np.int32(t),
                    count_noise_std,
                    np.float32(std_per_norm),
                )
                noise_stds = (std,)
            stats.step_end_s.append(time.perf_counter())
            stats.steps += 1
            stats.noise_draws += 1
            unrecorded += 1
            info: dict[str, Any] = {
                "step": t + 1,
                "total": plan.steps,
                "elapsed_s": round(time.perf_counter() - t0, 3),
            }
            if unrecorded == every or t == plan.steps - 1:
                if not bool(healthy):
                    _record_only(recorder, plan, t + 1)
                    eps = recorder.epsilon_spent()
                    spent = (
                        f"epsilon = {eps:.4g} spent and recorded"
                        if eps is not None
                        else "the spend recorded by process 0"
                    )
                    raise DivergenceError(
                        "DP training diverged: the noisy parameters became non-finite "
                        "or larger "
                        f"than {max_abs_param:g} in steps "
                        f"{t + 2 - unrecorded}..{t + 1}; stopped "
                        f"there with {spent}. Likely cause: the "
                        "update is too large for the noise (sigma = "
                        f"{plan.noise_multipliers[0]:.3g}); "
                        f"{divergence_hint}, and use a new run directory."
                    )
                saved = {"state": state, "secret": secret.to_tree()}
                if adaptive is not None:
                    saved["l2_clip_norm"] = clip_norm
                    info["l2_clip_norm"] = float(clip_norm)
                recorder.commit(plan, t + 1, saved)
                unrecorded = 0
                nonfinite_units = int(
                    dist.sum_over_processes(np.asarray(nonfinite))
                    if topo.distributed
                    else nonfinite
                )
                info["nonfinite_units"] = nonfinite_units
                if nonfinite_units and not warned and topo.is_primary:
                    warned = True
                    warnings.warn(
                        f"privacy.fit: {nonfinite_units} sampled unit(s) in steps "
                        f"{start + 1}..{t + 1} had a non-finite (NaN/inf) contribution "
                        "and were dropped (they added zero: no privacy cost). Check "
                        "the data and the loss; FitResult.nonfinite_units has the "
                        "final count (a count on the sensitive data: never publish "
                        "it).",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                # A public quantity only, never a loss on the private data; computed
                # only for a callback to see (under PLD it composes the whole chain).
                if plan.private and callbacks:
                    info["epsilon_spent"] = recorder.epsilon_spent()
            for cb in callbacks:
                cb.on_step(info)
    finally:
        for cb in callbacks:
            cb.close()
    if adaptive is not None:
        stats.final_l2_clip_norm = float(clip_norm)
    return FitResult(state, secret, plan.private and not secret.fixed, nonfinite_units)


def _record_only(recorder: Recorder, plan: DPPlan, step: int) -> None:
    # A diverged stretch was spent: record it (recorders that can), but never save the
    # state.
    record = getattr(recorder, "record", None)
    if record is not None:
        record(plan, step)
