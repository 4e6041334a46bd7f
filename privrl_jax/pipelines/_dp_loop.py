"""The one DP run loop every DP training method uses.

sample (the plan's sampler, a secret stream) -> clipped sums of masked microbatches (the sensitive
data on the device, gathered inside jit) -> noise once (the plan) -> method update -> ledger
**before** checkpoint -> checkpoint -> resume (same batches, same noise, nothing spent twice). The
budget is checked before the first release and again on every resume.

A method is a :class:`~privrl_jax.privacy.DPPlan` plus a :class:`DPProgram`: how to read the
parameters from its state, how to update the state from the noisy mean, and optionally public
rows added to the clipped sum (PrivORL's FineCur).

Several processes (``jax.distributed``) run the same loop and make the same release as one
process: see :mod:`privrl_jax.privacy._distributed` for the split, the collective and the
single writer.

Secrets (docs/design.md, contract 5): the noise key and the sampling seed come from the OS's
entropy source (:meth:`DPSecret.fresh`) and are stored only in the checkpoints, which must never be
published. :meth:`DPSecret.from_seed` exists for tests and reproducibility; a run using it is not
private, and says so.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Callable, NamedTuple

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from privrl_jax import privacy
from privrl_jax.privacy import _distributed as dist
from privrl_jax.pipelines._checkpoints import Checkpoints

PyTree = Any
_SECRET_WORDS = 8


@dataclasses.dataclass(frozen=True)
class DPSecret:
    """The secret randomness of one DP run: the noise key and the sampling stream's seed.

    ``words`` is 8 uint32 words: words 0-1 are the Threefry noise key, words 2-7 (192 bits) seed
    the NumPy sampling stream. ``fixed`` marks a secret derived from a public seed.
    """

    words: np.ndarray
    fixed: bool

    @classmethod
    def fresh(cls) -> "DPSecret":
        """256 bits from ``os.urandom``: nobody can regenerate the noise from the run directory."""
        return cls(np.frombuffer(os.urandom(4 * _SECRET_WORDS), np.uint32).copy(), False)

    @classmethod
    def from_seed(cls, seed: int) -> "DPSecret":
        """A reproducible secret for tests; anyone who knows ``seed`` can recompute the noise."""
        words = np.random.SeedSequence([int(seed), 0x5EC2E7]).generate_state(_SECRET_WORDS)
        return cls(words.astype(np.uint32), True)

    @property
    def noise_key(self) -> jax.Array:
        return jax.random.wrap_key_data(jnp.asarray(self.words[:2], jnp.uint32), impl="threefry2x32")

    @property
    def sampling_seed(self) -> int:
        return int.from_bytes(self.words[2:].astype("<u4").tobytes(), "little")

    def to_tree(self) -> dict[str, np.ndarray]:
        return {"words": self.words, "fixed": np.asarray(self.fixed, np.int32)}

    @classmethod
    def from_tree(cls, tree: dict[str, Any]) -> "DPSecret":
        return cls(np.asarray(tree["words"], np.uint32), bool(np.asarray(tree["fixed"])))


class DivergenceError(RuntimeError):
    """The noisy parameters became non-finite or exploded; the loop stopped, spend recorded."""


def _head_to_tree(head: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(head), np.uint8).copy()


def _head_from_tree(arr) -> str:
    return bytes(np.asarray(arr, np.uint8)).hex()


class DPProgram(NamedTuple):
    """What a method adds to the loop (all pure; the loop jits them).

    Attributes:
      params: ``state -> params`` the clipped sum is taken at.
      update: ``(state, noisy_mean) -> state``: the method's step from the privatized mean.
      public_rows: optional host-side hook ``(state, acc, step) -> (state, acc)`` adding clipped
        contributions of public rows (never sensitive ones) to the sum before the noise.
    """

    params: Callable[[PyTree], PyTree]
    update: Callable[[PyTree, PyTree], PyTree]
    public_rows: Callable[[PyTree, PyTree, int], tuple[PyTree, PyTree]] | None = None


@dataclasses.dataclass
class LoopStats:
    """What actually ran in this call of the loop (for tests and audits; private: never publish)."""

    steps: int = 0
    noise_draws: int = 0
    sampled_units: list[int] = dataclasses.field(default_factory=list)
    local_units: list[int] = dataclasses.field(default_factory=list)
    step_end_s: list[float] = dataclasses.field(default_factory=list)  # perf_counter after each step


def make_accumulate(clip_fn: privacy.ClippedSumFn, mesh: jax.sharding.Mesh | None = None) -> Callable[..., PyTree]:
    """``acc, params, data, item_mask, idx, unit_mask, offset, loss_key, t -> acc + clipped sum``.

    ``data`` leaves are ``[N, items, ...]`` and stay on the device; the microbatch ``idx`` is
    gathered inside the jitted function, so only the (public-shaped) index vector crosses from the
    host. Unit ``i`` (global index ``offset + idx``) of step ``t`` gets the key
    ``fold_in(fold_in(loss_key, t), i)``, derived inside jit: a unit's randomness (e.g. its EDM
    noise level) is the same however the batch is split into microbatches, devices or processes.
    With ``mesh``, each microbatch is split over the mesh's devices (``privacy.data_parallel``).
    """
    sum_fn = (clip_fn if mesh is None else privacy.data_parallel(clip_fn, mesh)).with_unit_keys

    @functools.partial(jax.jit, donate_argnums=0)
    def accumulate(acc, params, data, item_mask, idx, unit_mask, offset, loss_key, t):
        batch = jax.tree_util.tree_map(lambda x: x[idx], data)
        mask = item_mask[idx] & unit_mask[:, None]
        unit_keys = None
        if clip_fn.uses_key:
            step_key = jax.random.fold_in(loss_key, t)
            unit_keys = jax.vmap(lambda i: jax.random.fold_in(step_key, i))(offset + idx)
        clipped, _ = sum_fn(params, batch, mask, unit_keys)
        return jax.tree_util.tree_map(jnp.add, acc, clipped)

    return accumulate


def run_dp_loop(
    plan: privacy.DPPlan,
    clip_fn: privacy.ClippedSumFn,
    program: DPProgram,
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
    divergence_hint: str = "lower the learning rate or the clip norm, or raise the batch size",
    topology: dist.Topology | None = None,
    data_parallel: bool = False,
) -> tuple[PyTree, DPSecret]:
    """Runs (or resumes) ``plan.steps`` DP steps; returns the final state and the run's secret.

    Args:
      plan: the calibrated plan (sampler, clip norms, sigma, steps).
      clip_fn: the per-unit clipped sum; it must clip to the plan's norms (checked).
      program: the method's params / update / public-rows functions.
      init_state: the method's state before step 0 (used when ``ckpt`` has no checkpoint).
      data: the sensitive units, leaves ``[N, items, ...]`` with N = ``plan.dataset_size``; on
        several processes, this process's block ``topology.local_block(all_units)``.
      ckpt: this phase's checkpoint manager (holds the state and the secret).
      ledger: the run's ledger; steps are recorded before the checkpoint that contains them. On
        several processes only process 0 has it (the others pass None).
      what: the ledger's name for one step of this loop.
      secret: used only when starting fresh; a resumed run continues with its checkpointed one.
      loss_key: the (public) randomness of the per-unit function, e.g. EDM noise levels.
      item_mask: ``[N, items]`` bool (all True by default; this process's block, like ``data``).
      checkpoint_every: steps between ledger records and checkpoints.
      accountant: for the budget check.
      desc: the progress bar's label.
      stats: filled with what ran, when given.
      max_abs_param: the divergence guard's bound on the noisy parameters' absolute values.
      divergence_hint: what the divergence error advises (name the method's config keys).
      topology: which process this is, of how many (default: the running JAX runtime's).
      data_parallel: split each microbatch over this process's local devices (the microbatch
        size must be a multiple of their number).

    The divergence guard checks the *noisy* parameters (post-processing of released values: it
    costs no privacy) for non-finite values or values above ``max_abs_param``. It is read at each
    checkpoint boundary: the steps already run are recorded in the ledger (they were spent), the
    diverged state is not checkpointed, and :class:`DivergenceError` stops the run; a rerun replays
    the same steps from the last good checkpoint and spends nothing new.

    Raises:
      LedgerError: the checkpoint is ahead of the ledger, or its ledger head is not in the ledger
        (truncated or replaced): the spend is unknown.
      BudgetExceededError: the remaining steps would exceed the budget; raised before any release.
      DivergenceError: see above.
    """
    plan.check_clipped(clip_fn)
    topo = topology or dist.Topology.current()
    n = plan.dataset_size
    lo, hi = topo.unit_range(n)
    leaves = jax.tree_util.tree_leaves(data)
    if hi == lo or not leaves or any(x.shape[0] != hi - lo for x in leaves):
        mine = f"units [{lo}, {hi}) of {n} (process {topo.process_id} of {topo.num_processes})"
        raise ValueError(
            f"the sensitive data must hold {mine} along axis 0; got "
            f"{[tuple(x.shape) for x in leaves]}. "
            + ("Pass topology.local_block(data)." if topo.distributed else "")
        )
    if topo.is_primary and ledger is None:
        raise ValueError("process 0 writes the ledger: pass it (only the other processes pass None).")
    if item_mask is None:
        item_mask = jnp.ones(leaves[0].shape[:2], bool)
    data = jax.tree_util.tree_map(jnp.asarray, data)
    stats = stats if stats is not None else LoopStats()
    writer = ledger if topo.is_primary else None

    start = 0
    head = _head_to_tree(writer.head) if writer is not None else np.zeros(32, np.uint8)
    tree = {"state": init_state, "secret": secret.to_tree(), "ledger_head": head}
    latest = ckpt.latest()
    if latest is not None:
        tree = ckpt.restore(latest, tree)
        start = latest
    if topo.distributed:
        # Everyone has read the same latest checkpoint before anyone can write a newer one; a fresh
        # run takes process 0's secret, so all processes draw the same batches and noise.
        dist.barrier("privrl-dp-loop-restored")
        if latest is None:
            tree["secret"] = dist.broadcast_from_primary(tree["secret"])
    secret = DPSecret.from_tree(tree["secret"])
    state = tree["state"]

    step_event = plan.step_event()
    done = 0
    refusal: Exception | None = None
    if writer is not None:
        try:
            if latest is not None:
                writer.require_head(_head_from_tree(tree["ledger_head"]), f"the checkpoint of DP step {start}")
            done = sum(r.count for r in writer.releases if r.what == what)
            if plan.private:
                if done < start:
                    raise privacy.LedgerError(
                        f"the checkpoint is at DP step {start} but the ledger records only {done} "
                        f"steps of {what!r}: the privacy spend is unknown. Start a new run directory."
                    )
                writer.check(step_event, plan.steps - done, accountant=accountant)
            elif not any(r.what == what for r in writer.releases):
                # A non-private run is a release too: the ledger must say the data were used without DP.
                writer.record(dp_accounting.NonPrivateDpEvent(), what=what, params=plan.describe())
                done = plan.steps
        except (privacy.LedgerError, privacy.BudgetExceededError) as e:
            refusal = e
    if topo.distributed and bool(dist.broadcast_from_primary(np.asarray(refusal is not None))):
        if refusal is None:
            raise RuntimeError("process 0 refused to run (see its error: the ledger or the budget); "
                               "nothing was released.")
    if refusal is not None:
        raise refusal

    def ledger_head() -> np.ndarray:
        head = _head_to_tree(writer.head) if writer is not None else np.zeros(32, np.uint8)
        return dist.broadcast_from_primary(head) if topo.distributed else head

    def checkpoint(step: int, state) -> None:
        ckpt.save(step, {"state": state, "secret": secret.to_tree(), "ledger_head": ledger_head()})

    if latest is None:
        # The secret is on disk before any noise is drawn, so a crash can never lead to a second,
        # differently-noised version of a recorded step.
        checkpoint(0, state)
    sum_shapes = jax.eval_shape(
        lambda s: clip_fn(program.params(s), jax.tree_util.tree_map(lambda x: x[:1], data),
                          item_mask[:1], jax.random.key(0) if clip_fn.uses_key else None)[0],
        state,
    )
    mesh = None
    if data_parallel:
        mesh = jax.sharding.Mesh(np.array(jax.local_devices()), ("data",))
        size = plan.sampler.microbatch_size
        if size % mesh.size:
            raise ValueError(f"data_parallel splits each microbatch over {mesh.size} local devices: "
                             f"use a microbatch size that is a multiple of {mesh.size} (got {size}).")
    accumulate = make_accumulate(clip_fn, mesh)

    @jax.jit
    def release(state, acc, noise_key, t, healthy):
        state = program.update(state, plan.privatize(acc, jax.random.fold_in(noise_key, t)))
        leaves = jax.tree_util.tree_leaves(program.params(state))
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x) & (jnp.abs(x) <= max_abs_param)) for x in leaves]))
        return state, healthy & ok

    # One jitted call per step; eager jnp.zeros dispatches one op per leaf (~18 ms per step on
    # the denoiser under load, measured).
    zero_sum = jax.jit(lambda: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), sum_shapes))
    params_of = jax.jit(program.params)
    noise_key = secret.noise_key
    offset = np.int64(lo)
    unrecorded = 0
    healthy = jnp.asarray(True)
    with tqdm(total=plan.steps, initial=start, desc=desc, unit="step", disable=not topo.is_primary) as bar:
        for t in range(start, plan.steps):
            batch = plan.sample(secret.sampling_seed, t)
            stats.sampled_units.append(batch.size)
            if topo.distributed:
                batch = dist.local_microbatches(batch, lo, hi)
            stats.local_units.append(batch.size)
            acc = zero_sum()
            params = params_of(state)
            for j in range(batch.indices.shape[0]):
                acc = accumulate(acc, params, data, item_mask, batch.indices[j], batch.mask[j],
                                 offset, loss_key, np.int32(t))
            if topo.distributed:
                acc = dist.sum_over_processes(acc)
            if program.public_rows is not None:
                state, acc = program.public_rows(state, acc, t)
            state, healthy = release(state, acc, noise_key, np.int32(t), healthy)
            stats.step_end_s.append(time.perf_counter())
            stats.steps += 1
            stats.noise_draws += 1
            unrecorded += 1
            if unrecorded == checkpoint_every or t == plan.steps - 1:
                if writer is not None and plan.private and t + 1 > done:
                    # Record before the checkpoint: a crash in between over-counts, never under.
                    new = t + 1 - done
                    writer.record(step_event, what=what, count=new, params=plan.describe())
                    done += new
                if not bool(healthy):
                    spent = (f"epsilon = {writer.epsilon(accountant).epsilon:.4g} spent and recorded"
                             if writer is not None else "the spend recorded by process 0")
                    raise DivergenceError(
                        f"DP training diverged: the noisy parameters became non-finite or larger "
                        f"than {max_abs_param:g} in steps {t + 2 - unrecorded}..{t + 1}; stopped "
                        f"there with {spent}. Likely cause: the "
                        f"update is too large for the noise (sigma = {plan.noise_multipliers[0]:.3g}); "
                        f"{divergence_hint}, and use a new run directory."
                    )
                checkpoint(t + 1, state)
                unrecorded = 0
                if writer is not None and plan.private:  # a public quantity only: never a loss on the private data
                    bar.set_postfix(eps_spent=f"{writer.epsilon(accountant).epsilon:.3g}")
            bar.update(1)
    return state, secret
