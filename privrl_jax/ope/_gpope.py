"""GPOPE: gradient-perturbed off-policy evaluation on a DP plan.

The paper's Algorithm 1.

Each iteration j takes the plan's batch of trajectories, computes every sampled
trajectory's primal-dual direction B_i(theta_j, w_j) (eq. 4.1, :mod:`._gtd2`), clips it
to L2 norm h, sums, adds the plan's Gaussian noise once, divides by the plan's public
expected batch size and steps: ``(theta, w) <- (theta, w) - beta_j * B~``. N iterations
are one ``lax.scan``; independent trials are a ``vmap`` of it over keys and index
schedules, in one jit.

Clipping. The paper clips the *stacked* vector B_i = (theta block, w block) to norm h
(Algorithm 1). A plan with one clip norm h does exactly that (its clipped sum clips the
pytree ``(g_theta, g_w)`` as one vector): it is the default and what the paper's Theorem
1 analyses. A plan with ``l2_clip_norm=(h_theta, h_w)`` clips the blocks separately; the
accountant then sees the effective noise multiplier of the two blocks (docs/design.md,
contract 8), which at equal clip norms and equal sigmas costs a factor sqrt(2) more
noise for the same epsilon, so it only pays when the blocks' scales differ a lot. Both
run through the same code.

Sampling (host side, before the jit). The per-iteration indices come from the plan's
sampler as a fixed-shape ``[N, U]`` index array with a mask. Row t is
``plan.sample(seed, t)``, the batch :func:`privrl_jax.privacy.fit` draws at step t
from the sampling seed ``seed``: the schedule *is* the DP loop's stream, so this scan
and a ``privacy.fit`` run of :func:`gpope_method` with the same seed and noise key make
the same release.

- :class:`~privrl_jax.privacy.UniformOneSampler` (the paper's one-of-m): U = 1, every
  row valid. Fixed-size sampling is only defined under replace-one, so the sensitivity
  is 2h and the noise std 2 sigma h; the event is ``SampledWithoutReplacementDpEvent``
  (RDP only: dp-accounting's PLD accountant refuses it).
- :class:`~privrl_jax.privacy.PoissonSampler` (add/remove-one): every realised batch is
  kept whole, padded with masked units to U = the largest batch realised over the run
  (or over all trials); ``pad_to="dataset"`` pads to m. Both are exact: nothing is cut,
  so the event stays the plain Poisson one (a public fixed capacity would truncate,
  which changes the accounting). U depends only on the sampling randomness, never on the
  data. Empty batches stay as all-masked rows: the step still adds pure noise and counts
  (docs/dp_pitfalls.md, item 5). :func:`draw_schedule` draws the same Poisson law on the
  device from a key instead (another stream: no ``privacy.fit`` run draws it).

One update. The iteration is written once: :func:`gpope_units` (the privacy units),
``plan.clipped_sum(weighted_transition_direction)`` (B_i clipped), :func:`gpope_update`
(the step). :func:`gpope`'s scan and :func:`gpope_method` (the same pieces as a
:class:`~privrl_jax.privacy.DPMethod` for ``privacy.fit``, which the GPOPE pipeline
runs) both call them, and the scan sums each batch in the plan's microbatches as the
loop does, so the two agree bit for bit (tests/pipelines/test_gpope_pipeline.py).

Compiles. sigma and h (:meth:`~privrl_jax.privacy.DPPlan.split`) and beta_0 (a
:class:`StepSize` leaf) are traced arguments of one jitted core, so a sweep over
epsilon, h or beta_0 at fixed shapes compiles once.

The sampling stream and noise key must be secret in a real release (docs/design.md,
contract 5); tests pass fixed ones.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from privrl_jax import privacy
from privrl_jax.ope._gtd2 import (
    GTD2Stats,
    TrajectoryData,
    Transitions,
    direction_from_stats,
    trajectory_direction,
    weighted_transition_direction,
    with_weights,
)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["beta"],
    meta_fields=["decay_steps", "power"],
)
@dataclasses.dataclass(frozen=True)
class StepSize:
    """The step size beta_j = beta / (1 + j / decay_steps) ** power.

    Constant (beta) when ``decay_steps`` is None. Constant steps converge linearly and
    then stall at a noise floor; diminishing steps end lower (the paper's Theorems 2 and
    3). A pytree whose one leaf is ``beta``: passed to a jit as an ordinary argument it
    traces, so a sweep over beta_0 compiles once. ``decay_steps`` and ``power`` pick the
    schedule's shape and stay static: XLA folds them into the compiled constants (``x **
    1.0`` becomes ``x``), which traced values would round differently in the last bit.
    Frozen and hashable too.
    """

    beta: float
    decay_steps: float | None = None
    power: float = 1.0

    def __call__(self, step: jax.Array) -> jax.Array:
        beta = jnp.asarray(self.beta, jnp.float32)
        if self.decay_steps is None:
            return beta
        return beta / (1.0 + step.astype(jnp.float32) / self.decay_steps) ** self.power


class IndexSchedule(NamedTuple):
    """Every iteration's sampled trajectories, fixed shape.

    Attributes:
      indices: [N, U] int32 trajectory indices ([trials, N, U] for many trials); padding
        -> 0.
      mask: same shape, bool, False on padding.
    """

    indices: np.ndarray
    mask: np.ndarray


class GPOPEResult(NamedTuple):
    """Final weights of a run ([trials, n] each for many trials).

    Attributes:
      theta: [n] value weights, V(s) = theta . phi(s) (the release).
      w: [n] dual weights (released too: they are part of the iterate).
      clipped_fraction: [] mean over iterations of the fraction of sampled trajectories
        that were clipped. A function of the private data: a diagnostic, never to be
        published.
    """

    theta: jax.Array
    w: jax.Array
    clipped_fraction: jax.Array


def trial_seeds(seed: int, trials: int) -> list[int]:
    """The sampling seeds of ``trials`` independent schedules drawn from one ``seed``.

    Trial k of ``sample_schedule(plan, seed, trials=K)`` is
    ``sample_schedule(plan, trial_seeds(seed, K)[k])``, i.e. the stream a
    ``privacy.fit`` run with sampling seed ``trial_seeds(seed, K)[k]`` draws. 128-bit
    seeds from :class:`numpy.random.SeedSequence` children, so trials of different
    ``seed`` values never share a stream (``seed + k`` would).
    """
    children = np.random.SeedSequence(int(seed)).spawn(int(trials))
    return [
        int.from_bytes(c.generate_state(4).astype("<u4").tobytes(), "little")
        for c in children
    ]


def sample_schedule(
    plan: privacy.DPPlan,
    seed: int | np.random.Generator,
    *,
    trials: int | None = None,
    pad_to: str = "max",
) -> IndexSchedule:
    """Draws ``plan.steps`` batches (per trial) from the DP loop's stream, on the host.

    Row t is ``plan.sample(seed, t)`` (valid indices in the sampler's order): the batch
    :func:`privrl_jax.privacy.fit` draws at step t when its sampling seed is ``seed``
    (``DPSecret.sampling_seed``).

    Args:
      plan: a plan with a :class:`~privrl_jax.privacy.UniformOneSampler` or
        :class:`~privrl_jax.privacy.PoissonSampler` (without ``capacity``).
      seed: the sampling seed (secret in a real release); a NumPy generator draws a
        128-bit seed first.
      trials: None for one schedule ``[N, U]``; K for ``[K, N, U]``, trial k from seed
        ``trial_seeds(seed, K)[k]``.
      pad_to: ``"max"`` (U = largest realised batch, at least 1) or ``"dataset"`` (U =
        m).

    Returns:
      An :class:`IndexSchedule`.
    """
    sampler = plan.sampler
    if pad_to not in ("max", "dataset"):
        raise ValueError(f"pad_to must be 'max' or 'dataset'; got {pad_to!r}.")
    if getattr(sampler, "capacity", None) is not None:
        raise ValueError(
            "GPOPE keeps every Poisson batch whole (exact Poisson accounting); use a "
            "PoissonSampler without capacity."
        )
    if not isinstance(sampler, (privacy.UniformOneSampler, privacy.PoissonSampler)):
        raise ValueError(
            "GPOPE samples trajectories with a UniformOneSampler or a PoissonSampler; "
            f"got {type(sampler).__name__}."
        )
    if isinstance(seed, np.random.Generator):
        seed = int.from_bytes(seed.bytes(16), "little")
    seeds = [seed] if trials is None else trial_seeds(seed, trials)
    rows = []
    for s in seeds:
        batches = [plan.sample(s, t) for t in range(plan.steps)]
        rows.append([b.indices[b.mask] for b in batches])
    width = (
        plan.dataset_size
        if pad_to == "dataset"
        else max(1, max(len(x) for trial in rows for x in trial))
    )
    idx = np.zeros((len(rows), plan.steps, width), np.int32)
    mask = np.zeros(idx.shape, bool)
    for k, trial in enumerate(rows):
        for t, x in enumerate(trial):
            idx[k, t, : len(x)] = x
            mask[k, t, : len(x)] = True
    if trials is None:
        return IndexSchedule(idx[0], mask[0])
    return IndexSchedule(idx, mask)


_GAP_BLOCK = 16


@functools.partial(
    jax.jit, static_argnames=("shape", "blocks", "sampling_rate", "dataset_size")
)
def _poisson_positions(key, shape, blocks, sampling_rate, dataset_size):
    # Positions of the successes of m Bernoulli(q) trials, as sums of Geometric(q) gaps:
    # gap = 1 + floor(log(u) / log(1 - q)), u uniform in (0, 1]; returned [blocks,
    # *shape, 16] (a stream's gaps in block-major order). Block axis first: with JAX's
    # partitionable Threefry (the default) an element's bits depend on its flat index
    # only, so drawing more blocks extends every stream and never redraws it, and the
    # loop in draw_schedule keeps the law exact (tests/ope/test_draw_schedule.py checks
    # the prefix).
    u = 1.0 - jax.random.uniform(key, (blocks,) + shape + (_GAP_BLOCK,))
    gaps = 1.0 + jnp.floor(jnp.log(u) / jnp.log1p(-sampling_rate))
    # Clipping a gap at m + 1 changes nothing below m and keeps the int32 sums in range.
    gaps = jnp.minimum(gaps, dataset_size + 1).astype(jnp.int32)
    within = jnp.cumsum(gaps, axis=-1)
    ends = within[..., -1]
    pos = (jnp.cumsum(ends, axis=0) - ends)[..., None] + within - 1
    valid = pos < dataset_size
    return (
        pos,
        valid,
        jnp.all(pos[-1, ..., -1] >= dataset_size),
        jnp.max(jnp.sum(valid, axis=(0, -1))),
    )


@functools.partial(jax.jit, static_argnames=("width",))
def _cut(pos, valid, width):
    # [blocks, *shape, 16] -> [*shape, width]: each stream's first ``width`` positions.
    def streams(x):
        return jnp.moveaxis(x, 0, -2).reshape(x.shape[1:-1] + (-1,))[..., :width]

    mask = streams(valid)
    return jnp.where(mask, streams(pos), 0).astype(jnp.int32), mask


def draw_schedule(
    plan: privacy.DPPlan, key: jax.Array, *, trials: int | None = None
) -> IndexSchedule:
    """Draws a plan's ``plan.steps`` batches (per trial) on the device, from a key.

    The device counterpart of :func:`sample_schedule` (the same law, another stream).
    For a :class:`~privrl_jax.privacy.UniformOneSampler`, each step's batch is one
    trajectory drawn uniformly from m, independently of every other (step, trial), as
    the plan's event assumes (``U = 1``). For a
    :class:`~privrl_jax.privacy.PoissonSampler`: trajectory i is in a batch with
    probability q, independently of every other (i, step, trial), as the plan's event
    assumes. The successes of the m Bernoulli(q) trials are drawn as running sums of
    Geometric(q) gaps, so a batch costs
    about qm draws instead of m, and every batch is kept whole: draws are extended
    (never redrawn) until each stream has passed index m - 1. Padded to U = the largest
    batch over all steps and trials (at least 1); indices ascend within a batch. One
    host sync reads U. The key is secret in a real release (docs/design.md, contract 5).

    Args:
      plan: a plan with a :class:`~privrl_jax.privacy.UniformOneSampler`, or a
        :class:`~privrl_jax.privacy.PoissonSampler` without ``capacity``.
      key: the sampling key (not the noise key).
      trials: None for one schedule ``[N, U]``; K for ``[K, N, U]``.

    Returns:
      An :class:`IndexSchedule` of device arrays.

    Raises:
      ValueError: a Poisson plan's schedule drawn under ``jax.jit`` (its width is read
        on the host: call it outside jit); a uniform one-of-m schedule is jittable.
    """
    sampler = plan.sampler
    if isinstance(sampler, privacy.UniformOneSampler):
        # The host draw builds one NumPy generator per step (the DP loop's resumable
        # stream, ~20 us each); K = 10^4 trials of 100 steps took longer on the host
        # than the vmapped run itself (benchmarks/README.md, GPOPE (4b)).
        shape = (trials or 1, plan.steps, 1)
        idx = jax.random.randint(key, shape, 0, sampler.dataset_size, jnp.int32)
        mask = jnp.ones(shape, bool)
        if trials is None:
            return IndexSchedule(idx[0], mask[0])
        return IndexSchedule(idx, mask)
    if not isinstance(sampler, privacy.PoissonSampler) or sampler.capacity is not None:
        raise ValueError(
            "draw_schedule draws whole Poisson batches or one-of-m batches; use a "
            "PoissonSampler without capacity or a UniformOneSampler."
        )
    if isinstance(key, jax.core.Tracer):
        raise ValueError(
            "draw_schedule: call outside jit (a Poisson schedule's width, the largest "
            "batch, is read on the host); pass the schedule it returns into the "
            "jitted function."
        )
    q, m = sampler.sampling_rate, sampler.dataset_size
    shape = (trials or 1, plan.steps)
    # Enough gaps that a stream passes m with overwhelming probability; the loop below
    # makes it certain.
    expected = q * m + 6.0 * math.sqrt(q * m * (1 - q)) + 1
    blocks = max(1, math.ceil(expected / _GAP_BLOCK))
    while True:
        pos, valid, complete, largest = _poisson_positions(key, shape, blocks, q, m)
        if bool(complete):
            break
        blocks *= 2
    width = max(1, int(largest))
    idx, mask = _cut(pos, valid, width)
    if trials is None:
        return IndexSchedule(idx[0], mask[0])
    return IndexSchedule(idx, mask)


class GPOPEState(NamedTuple):
    """GPOPE's iterate: what :func:`gpope_update` steps and ``privacy.fit`` saves.

    Attributes:
      theta: [n] value weights.
      w: [n] dual weights.
      step: [] int32, the iteration index j (the step size beta_j reads it).
    """

    theta: jax.Array
    w: jax.Array
    step: jax.Array


def gpope_init(
    num_features: int, init: tuple[jax.Array, jax.Array] | None = None
) -> GPOPEState:
    """The state before iteration 0: ``(theta_0, w_0)`` (zeros by default), j = 0.

    Args:
      num_features: n, the length of theta and w (used only when ``init`` is None).
      init: ``(theta_0 [n], w_0 [n])``, or None for zeros.

    Returns:
      A :class:`GPOPEState` with step 0.
    """
    theta, w = init if init is not None else (jnp.zeros(num_features),) * 2
    return GPOPEState(theta, w, jnp.zeros((), jnp.int32))


def gpope_params(state: GPOPEState) -> tuple[jax.Array, jax.Array]:
    """``(theta, w)``: the point each trajectory's direction B_i is taken at."""
    return state.theta, state.w


def gpope_units(
    data: TrajectoryData, normalization: str = "horizon"
) -> tuple[Transitions, jax.Array]:
    """The privacy units: each trajectory's transitions with their weights.

    The per-unit function of ``plan.clipped_sum(weighted_transition_direction)`` on a
    unit (item mask ``data.mask``) is its B_i. The weights (1/T or 1/tau_i) are public
    or a function of the unit's own mask, so they are computed once, before sampling.

    Args:
      data: m trajectories, leaves ``[m, T, ...]``; one trajectory is one privacy unit.
      normalization: ``"horizon"`` (weight 1/T, T the padded length) or ``"mean"``
        (1/tau_i, tau_i the trajectory's real length; the paper's eq. 2.2).

    Returns:
      ``(transitions, weights)``: the transitions (leaves ``[m, T, ...]``) and their
      ``[m, T]`` weights (0 on padding).
    """
    return with_weights(data.transitions, data.mask, normalization)


def gpope_update(
    state: GPOPEState, noisy_mean: tuple[jax.Array, jax.Array], step_size: StepSize
) -> GPOPEState:
    """One GPOPE step from the privatized mean B~: ``(theta, w) -= beta_j B~``, j += 1.

    Args:
      state: the iterate at j.
      noisy_mean: ``(theta block [n], w block [n])``, the clipped sum plus the plan's
        noise divided by the expected batch size (``plan.privatize``).
      step_size: beta_j.

    Returns:
      The iterate at j + 1.
    """
    g_theta, g_w = noisy_mean
    beta = step_size(state.step)
    return GPOPEState(
        state.theta - beta * g_theta, state.w - beta * g_w, state.step + 1
    )


def gpope_method(plan: privacy.DPPlan, step_size: StepSize) -> privacy.DPMethod:
    """GPOPE as a :class:`~privrl_jax.privacy.DPMethod`, run by ``privacy.fit``.

    Pass it ``gpope_units(data, normalization)`` as the data, ``item_mask=data.mask``
    and ``gpope_init(n)`` as the state. With sampling seed s and noise key k the run's
    final state equals ``gpope(plan, data, sample_schedule(plan, s), k, ...)``.

    Args:
      plan: the DP plan whose clipped sum computes each trajectory's clipped B_i.
      step_size: beta_j.

    Returns:
      The method, with the per-unit clipped sum, ``(theta, w)`` as the parameters
      and :func:`gpope_update` as the step.
    """
    return privacy.DPMethod(
        plan.clipped_sum(weighted_transition_direction),
        gpope_params,
        functools.partial(gpope_update, step_size=step_size),
    )


def _to_microbatches(
    schedule: IndexSchedule, microbatch_size: int
) -> tuple[jax.Array, jax.Array]:
    # Pads U to a multiple of the microbatch size with masked units: the clipped sum
    # then adds one microbatch at a time, in the order privacy.fit does (a padded
    # microbatch adds exact zeros).
    width = schedule.indices.shape[-1]
    pad = [(0, 0), (0, -width % microbatch_size)]
    return (
        jnp.pad(jnp.asarray(schedule.indices), pad),
        jnp.pad(jnp.asarray(schedule.mask), pad),
    )


def _check_schedule(plan_steps: int, schedule: IndexSchedule) -> None:
    if schedule.indices.shape[-2] != plan_steps:
        raise ValueError(
            f"the schedule has {schedule.indices.shape[-2]} iterations but the plan "
            "accounts for "
            f"{plan_steps}; draw it with sample_schedule(plan, ...)."
        )


def _gpope_run(
    structure: privacy.PlanStructure,
    arrays: privacy.PlanArrays,
    data: TrajectoryData,
    schedule: IndexSchedule,
    key: jax.Array,
    step_size: StepSize,
    init: tuple[jax.Array, jax.Array] | None,
    normalization: str,
) -> GPOPEResult:
    # Algorithm 1 with sigma, h (``arrays``) and beta (``step_size``) traced; the same
    # units, clipped sum, noise key and update as gpope_method under privacy.fit.
    microbatch = structure.sampler.microbatch_size
    clipped_sum = structure.clipped_sum(
        weighted_transition_direction, arrays, microbatch_size=microbatch
    )
    units = gpope_units(data, normalization)

    def body(state, xs):
        indices, unit_mask = xs
        batch = jax.tree_util.tree_map(lambda x: x[indices], units)
        item_mask = data.mask[indices] & unit_mask[:, None]
        total, metrics = clipped_sum(gpope_params(state), batch, item_mask)
        if structure.num_blocks > 1:
            total = tuple(total)
        noisy = structure.privatize(total, jax.random.fold_in(key, state.step), arrays)
        return gpope_update(state, noisy, step_size), metrics.clipped_fraction

    state = gpope_init(data.transitions.phi_tm1.shape[-1], init)
    state, clipped = jax.lax.scan(body, state, _to_microbatches(schedule, microbatch))
    return GPOPEResult(state.theta, state.w, jnp.mean(clipped))


# Compiled once per (structure, shapes, normalization): a sweep over epsilon, h or
# beta_0 that keeps those fixed reuses one executable.
_gpope_jit = jax.jit(_gpope_run, static_argnames=("structure", "normalization"))


@functools.partial(
    jax.jit, static_argnames=("structure", "normalization", "per_trial_data")
)
def _gpope_trials_jit(
    structure, arrays, data, schedules, keys, step_size, normalization, per_trial_data
):
    run = functools.partial(
        _gpope_run,
        structure,
        arrays,
        step_size=step_size,
        init=None,
        normalization=normalization,
    )
    return jax.vmap(run, in_axes=(0 if per_trial_data else None, 0, 0))(
        data, schedules, keys
    )


def gpope(
    plan: privacy.DPPlan,
    data: TrajectoryData,
    schedule: IndexSchedule,
    key: jax.Array,
    *,
    step_size: StepSize,
    init: tuple[jax.Array, jax.Array] | None = None,
    normalization: str = "horizon",
) -> GPOPEResult:
    """Algorithm 1: N = ``plan.steps`` noisy primal-dual steps in one jitted scan.

    The plan's sigma and clip norm h and the step size's numbers are bound here as
    traced arguments (:meth:`~privrl_jax.privacy.DPPlan.split`), so plans that differ
    only in sigma or h, and step sizes that differ only in beta_0, share one compiled
    executable.

    Args:
      plan: a calibrated :class:`~privrl_jax.privacy.DPPlan` (sigma = 0 runs it without
        noise, still clipped: the noise term is 0 * N(0, 1)).
      data: m trajectories, leaves ``[m, T, ...]``.
      schedule: indices and mask ``[N, U]`` from :func:`sample_schedule`.
      key: the noise key; iteration j's noise uses ``fold_in(key, j)``.
      step_size: a :class:`StepSize`.
      init: ``(theta_0, w_0)``; zeros by default.
      normalization: B_i's weights, ``"horizon"`` (sum / T) or ``"mean"`` (the paper's
        eq. 2.2; biased with outcome-dependent lengths, see :mod:`._gtd2`).

    Returns:
      A :class:`GPOPEResult` with the last iterate.
    """
    _check_schedule(plan.steps, schedule)
    structure, arrays = plan.split()
    return _gpope_jit(
        structure, arrays, data, schedule, key, step_size, init, normalization
    )


def gpope_trials(
    plan: privacy.DPPlan,
    data: TrajectoryData,
    schedules: IndexSchedule,
    keys: jax.Array,
    *,
    step_size: StepSize,
    normalization: str = "horizon",
    per_trial_data: bool = False,
) -> GPOPEResult:
    """K independent GPOPE runs in one jit.

    A ``vmap`` of :func:`gpope` over ``schedules [K, N, U]`` and ``keys [K]``, and over
    ``data`` too when ``per_trial_data``. Compiled once per plan structure and shapes,
    like :func:`gpope`: a grid over sigma, h and beta_0 at fixed shapes reuses one
    executable.

    Args:
      plan: a calibrated :class:`~privrl_jax.privacy.DPPlan`.
      data: m trajectories, leaves ``[m, T, ...]`` shared by every trial, or
        ``[K, m, T, ...]`` (each trial its own data set, as in a simulation study) when
        ``per_trial_data``.
      schedules: indices and mask ``[K, N, U]``, e.g. ``sample_schedule(plan, seed,
        trials=K)``.
      keys: [K] noise keys, one per trial.
      step_size: a :class:`StepSize`.
      normalization: B_i's weights, ``"horizon"`` or ``"mean"`` (as :func:`gpope`).
      per_trial_data: whether ``data`` has a leading trial axis.

    Returns:
      A :class:`GPOPEResult` with leaves ``[K, ...]``.

    Raises:
      ValueError: if the schedules' number of iterations is not ``plan.steps``.
    """
    _check_schedule(plan.steps, schedules)
    structure, arrays = plan.split()
    return _gpope_trials_jit(
        structure,
        arrays,
        data,
        schedules,
        keys,
        step_size,
        normalization,
        per_trial_data,
    )


@functools.partial(jax.jit, static_argnames=("normalization",))
def gtd2(
    data: TrajectoryData,
    schedule: IndexSchedule,
    *,
    step_size: StepSize,
    init: tuple[jax.Array, jax.Array] | None = None,
    normalization: str = "horizon",
) -> tuple[jax.Array, jax.Array]:
    """Non-private stochastic GTD2 (eq. 2.3): no clipping, no noise.

    B is averaged over each step's batch. The same trajectory directions and schedule as
    :func:`gpope`; with one trajectory per step, GPOPE with sigma = 0 and a clip norm
    that never binds equals it.

    Args:
      data: m trajectories, leaves ``[m, T, ...]``.
      schedule: indices and mask ``[N, U]`` (:func:`sample_schedule`).
      step_size: a :class:`StepSize`.
      init: ``(theta_0, w_0)``; zeros by default.
      normalization: B_i's weights, ``"horizon"`` or ``"mean"`` (as :func:`gpope`).

    Returns:
      ``(theta [n], w [n])`` after the N steps.
    """
    n = data.transitions.phi_tm1.shape[-1]
    params = init if init is not None else (jnp.zeros(n), jnp.zeros(n))

    def body(params, xs):
        step, indices, unit_mask = xs
        transitions = jax.tree_util.tree_map(lambda x: x[indices], data.transitions)
        item_mask = data.mask[indices] & unit_mask[:, None]
        per_unit = jax.vmap(trajectory_direction, in_axes=(None, 0, 0, None))(
            params, transitions, item_mask, normalization
        )
        count = jnp.maximum(jnp.sum(unit_mask), 1)
        g_theta, g_w = (jnp.sum(g, axis=0) / count for g in per_unit)
        beta = step_size(step)
        return (params[0] - beta * g_theta, params[1] - beta * g_w), None

    xs = (jnp.arange(schedule.indices.shape[0]), schedule.indices, schedule.mask)
    params, _ = jax.lax.scan(body, params, xs)
    return params


@functools.partial(jax.jit, static_argnames=("steps",))
def gtd2_expected(
    stats: GTD2Stats,
    *,
    steps: int,
    step_size: StepSize,
    init: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Deterministic GTD2 on the mean statistics: ``x <- x - beta B(x)``.

    B is computed from A, b, C.
    The noise-free, full-batch limit of GPOPE; it converges to
    :func:`~._gtd2.lstd_solution` of the same statistics when beta is small enough.
    Returns ``(theta, w)``.
    """
    n = stats.b.shape[-1]
    params = init if init is not None else (jnp.zeros(n), jnp.zeros(n))

    def body(params, step):
        g_theta, g_w = direction_from_stats(*params, stats)
        beta = step_size(step)
        return (params[0] - beta * g_theta, params[1] - beta * g_w), None

    params, _ = jax.lax.scan(body, params, jnp.arange(steps))
    return params


def value_mse(
    theta: jax.Array,
    features: jax.Array,
    values: jax.Array,
    weights: jax.Array | None = None,
) -> jax.Array:
    """Mean squared error of V = features @ theta against ``values``.

    Args:
      theta: [..., n] weights (any leading axes, e.g. trials).
      features: [S, n] features of the evaluation states.
      values: [S] reference values.
      weights: [S] state weights (uniform when None; normalised here).

    Returns:
      [...] the (weighted) MSE over states.
    """
    err = (theta @ features.T - values) ** 2
    if weights is None:
        return jnp.mean(err, axis=-1)
    return err @ (weights / jnp.sum(weights))


class Theorem1Sigma(NamedTuple):
    """The paper's closed-form noise scale (Theorem 1) in its units and in ours.

    Attributes:
      paper_sigma: the paper's sigma: noise std / h (Algorithm 1 adds N(0, sigma^2 h^2
        I)).
      noise_multiplier: the same noise as noise std / sensitivity, sensitivity 2h under
        the replace-one relation the theorem assumes: ``paper_sigma / 2``. Compare it
        with a calibrated uniform-one plan's ``noise_multiplier``.
      asymptotic_paper_sigma: ``4 sqrt(N log(1/delta)) / (m eps)``: the theorem's
        ``c2 sqrt(N log(1/delta)) / (m eps)`` with c2 = 4, the small-epsilon limit.
    """

    paper_sigma: float
    noise_multiplier: float
    asymptotic_paper_sigma: float


def theorem1_sigma(
    epsilon: float, delta: float, *, steps: int, dataset_size: int
) -> Theorem1Sigma:
    """Theorem 1's sigma for (epsilon, delta) over N iterations on m trajectories.

    The theorem (privacy of Algorithm 1: one trajectory drawn uniformly per iteration,
    neighbouring data sets of the same size m that differ in one whole trajectory, i.e.
    *replace-one*) states sigma >= c2 sqrt(N log(1/delta)) / (m eps) without giving c2.
    Its proof runs the moments accountant on Lemma 1's bound (the paper's large-sigma
    form, sigma^2 >= 1/ln 2): ``alpha(lambda) <= 4 lambda (lambda + 1) / (m^2 sigma^2)``
    per iteration (the 4 is the squared replace-one sensitivity 2h over the noise std
    sigma h). N iterations compose to ``a lambda (lambda + 1)``, a = 4N / (m^2 sigma^2),
    and the tail bound gives delta = min_lambda exp(a lambda (lambda + 1) - lambda eps).
    Minimising over a real lambda: (eps - a)^2 / (4a) >= log(1/delta), i.e.

        a <= eps + 2L - 2 sqrt(L (eps + L)),  L = log(1/delta),
        sigma = 2 sqrt(N) / (m sqrt(a)),

    which tends to sigma = 4 sqrt(N L) / (m eps) as eps / L -> 0 (so c2 = 4). Host-side
    Python.

    Args:
      epsilon: target epsilon (finite, > 0).
      delta: target delta, in (0, 1).
      steps: N, the number of iterations.
      dataset_size: m, the number of trajectories.

    Returns:
      A :class:`Theorem1Sigma` with the paper's sigma, the same noise as a noise
      multiplier of ours, and the theorem's small-epsilon form.

    Raises:
      ValueError: if epsilon or delta is out of range.
    """
    for name, v in (("epsilon", epsilon), ("delta", delta)):
        if not 0 < v < math.inf:
            raise ValueError(f"{name} must be a finite number > 0; got {v!r}.")
    if not delta < 1:
        raise ValueError(f"delta must be < 1; got {delta!r}.")
    log_inv_delta = math.log(1.0 / delta)
    # eps + 2L - 2 sqrt(L (eps + L)) rewritten without the cancellation (product with
    # the conjugate is eps^2).
    a = epsilon**2 / (
        epsilon
        + 2 * log_inv_delta
        + 2 * math.sqrt(log_inv_delta * (epsilon + log_inv_delta))
    )
    paper_sigma = 2 * math.sqrt(steps) / (dataset_size * math.sqrt(a))
    asymptotic = 4 * math.sqrt(steps * log_inv_delta) / (dataset_size * epsilon)
    return Theorem1Sigma(paper_sigma, paper_sigma / 2, asymptotic)


def replace_one_target(epsilon: float, delta: float) -> tuple[float, float]:
    """The add/remove-one (eps', delta') that gives (epsilon, delta) under replace-one.

    Replacing a trajectory is removing it and adding another: two add/remove steps. By
    group privacy for two steps (Dwork & Roth 2014, Theorem 2.2's argument applied
    twice), an (eps', delta')-DP mechanism under add/remove-one is (2 eps', (1 + e^eps')
    delta')-DP between data sets that differ in one replaced trajectory. So a plan
    accounted under add/remove (Poisson sampling, which dp-accounting cannot analyse
    under replace-one) calibrated to

        eps' = epsilon / 2,   delta' = delta / (1 + e^(epsilon / 2))

    is (epsilon, delta)-DP under replace-one, the relation of DP-LSW / DP-LSL and of the
    paper's one-of-m GPOPE. It is an upper bound on the replace-one cost, not a tight
    one (the tight replace-one analysis of Poisson subsampling would need less noise).
    Host-side Python.

    Args:
      epsilon: the replace-one target epsilon (finite, > 0).
      delta: the replace-one target delta, in (0, 1).

    Returns:
      ``(eps', delta')``, the add/remove-one target to calibrate to.

    Raises:
      ValueError: if epsilon or delta is out of range.
    """
    if not 0 < epsilon < math.inf:
        raise ValueError(f"epsilon must be a finite number > 0; got {epsilon!r}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}.")
    half = epsilon / 2.0
    return half, delta / (1.0 + math.exp(half))
