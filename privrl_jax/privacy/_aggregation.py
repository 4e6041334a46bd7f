"""Noise once, then normalise by the public expected batch size.

This is the release half of DP-SGD.

The clipped sum from ``_clipping`` goes through ``add_gaussian_noise`` (an optax
``GradientTransformation`` holding its PRNG key, like jax_privacy's privatizer), then
``optax.scale(1 / (q N))``, then any optax optimizer. Nothing touches the clipped sum
before the noise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from privrl_jax.privacy._accounting import Neighboring
from privrl_jax.privacy._clip_core import ClipMetrics
from privrl_jax.privacy._clipping import ClippedSumFn
from privrl_jax.privacy._noise import fast_normal

PyTree = Any


class AddNoiseState(NamedTuple):
    """State of :func:`add_gaussian_noise`: the base key and the releases so far."""

    key: jax.Array
    count: jax.Array  # type: ignore[assignment]  # shadows tuple.count


def standard_normal(key: jax.Array, size: int) -> jax.Array:
    """``size`` float32 N(0, 1) draws on JAX's original Threefry stream.

    The draws are those of ``jax.random.normal`` on that stream.

    With JAX's default ``jax_threefry_partitionable=True`` each 32-bit value costs one
    Threefry-2x32 hash; the original (non-partitionable) stream gets two values per
    hash. The DP noise vector has one value per parameter (6.6M on the big denoiser),
    where the default hashing took as long as the whole ghost-clipped gradient on one
    CPU core (230 -> 155 ms measured). Same PRNG and same uniform-to-normal map, hence
    the same law; only the counter layout differs.
    """
    with jax.threefry_partitionable(False):
        return jax.random.normal(key, (size,), jnp.float32)


def _normal_f32(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.normal(key, shape, float32)``, bit for bit.

    Drawn the fastest way per platform.

    On CPU, JAX lowers Threefry as a rolled loop that XLA cannot fuse; ``fast_normal``
    writes the same hash out in jnp, so it fuses with the counters, the normal map and
    the add (the noise of the 6.6M-parameter denoiser: benchmarks/README.md, issue 25).
    On GPU/TPU JAX's own lowering is already straight-line (or a CUDA kernel), so it is
    kept there. The choice is made when XLA lowers for a platform and does not change a
    single bit of the noise.
    """
    return jax.lax.platform_dependent(
        key,
        cpu=lambda k: fast_normal(k, shape),
        default=lambda k: jax.random.normal(k, shape, jnp.float32),
    )


def _noised_per_leaf(xs, keys, stds):
    return tuple(
        (
            x.astype(jnp.float32) + std * jax.random.normal(k, x.shape, jnp.float32)
        ).astype(x.dtype)
        for x, k, std in zip(xs, keys, stds)
    )


def _noised_fast(xs, keys, stds):
    return tuple(
        (x.astype(jnp.float32) + std * fast_normal(k, x.shape)).astype(x.dtype)
        for x, k, std in zip(xs, keys, stds)
    )


def _noised_once(xs, keys, stds):
    """Every leaf's noised value, each computed once (CPU).

    The conditional only stops XLA from fusing the hash into each consumer of the
    noised value (the noised sum and Adam's two moments computed it three times). Its
    predicate, ``(w | 1) & 1 == 1`` of a key word, is always true but not folded by
    XLA, so the draw is the branch that runs. The other branch is NaN: it cannot run,
    and were it ever to, it would release nothing but NaN (fail closed), never an
    un-noised value. Before, both branches were the draw, which compiled every leaf's
    20-round hash twice (compile RSS of the ghost step +15 MB small, +29 MB big;
    ``benchmarks/results/ghost_step_issue52.md``, round 5). The same bits either way.
    """
    typed = jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)
    words = jax.random.key_data(keys) if typed else keys
    pred = ((words.reshape(-1)[0] | 1) & 1) == 1
    draw = functools.partial(_noised_fast, stds=stds)

    def unreachable(xs, keys):
        return tuple(jnp.full_like(x, jnp.nan) for x in xs)

    return jax.lax.cond(pred, draw, unreachable, xs, keys)


def add_noise_blocks(
    blocks: Sequence[PyTree],
    key: jax.Array,
    stds: Sequence[jax.typing.ArrayLike],
    *,
    once: bool = False,
) -> tuple[PyTree, ...]:
    """Adds N(0, std_i^2) to every coordinate of block i.

    One draw covers all coordinates.

    The noise primitive of the library (private): DP-SGD's noise, GTD2's two blocks
    and POOL's noisy counts all come through it, by its two public routes,
    :meth:`~privrl_jax.privacy.DPPlan.privatize` (a training step) and
    :meth:`~privrl_jax.privacy.GaussianMechanism.release` (a one-shot release), which
    choose the stds.

    Args:
      blocks: k pytrees of arrays.
      key: the PRNG key of this one release (never reuse it for another release).
      stds: k noise standard deviations (0 adds nothing).
      once: on CPU, compute each noised leaf in one loop and keep it (for an update
        that several consumers read, such as an optimizer's two moments); otherwise
        XLA fuses the noise into each consumer and hashes it once per consumer. The
        same bits either way when the blocks are clipped sums (outputs of products
        or reductions): ``benchmarks/results/ghost_step_issue52.md``, round 3.

    Returns:
      The k noised pytrees. Noise is drawn and added in float32, then cast back to each
      leaf's dtype (``jax.random`` offers no formal guarantee against floating-point
      attacks; Mironov 2012, docs/dp_pitfalls.md item 13).
    """
    if len(blocks) != len(stds):
        raise ValueError(
            f"{len(blocks)} blocks but {len(stds)} noise stds; give one std per block."
        )
    flat = [jax.tree_util.tree_flatten(block) for block in blocks]
    leaves = [(x, stds[i]) for i, (ls, _) in enumerate(flat) for x in ls]
    # One key per leaf (split once) and JAX's default (partitionable) Threefry stream.
    keys: Any = jax.random.split(key, len(leaves)) if leaves else []
    xs = tuple(x for x, _ in leaves)
    sds = tuple(std for _, std in leaves)
    if not leaves:
        noised: Sequence[jax.Array] = []
    elif once and any(isinstance(x, jax.core.Tracer) for x in xs):
        # Traced only: run op by op (eagerly) nothing is fused, and each leaf's add
        # stays apart from its multiply as before.
        noised = jax.lax.platform_dependent(
            xs,
            keys,
            cpu=functools.partial(_noised_once, stds=sds),
            default=functools.partial(_noised_per_leaf, stds=sds),
        )
    else:
        noised = [
            (x.astype(jnp.float32) + std * _normal_f32(k, x.shape)).astype(x.dtype)
            for x, std, k in zip(xs, sds, keys)
        ]
    out, pos = [], 0
    for ls, treedef in flat:
        out.append(jax.tree_util.tree_unflatten(treedef, noised[pos : pos + len(ls)]))
        pos += len(ls)
    return tuple(out)


def add_noise(
    tree: PyTree, key: jax.Array, std: jax.typing.ArrayLike, *, once: bool = False
) -> PyTree:
    """``tree`` plus N(0, std^2) on every coordinate.

    One block of :func:`add_noise_blocks` (private: a one-shot release goes through
    :meth:`~privrl_jax.privacy.GaussianMechanism.release`, which is this call).

    Args:
      tree: a pytree of arrays.
      key: the PRNG key of this one release.
      std: the noise standard deviation (may be traced).
      once: as for :func:`add_noise_blocks`.

    Returns:
      The noised pytree, each leaf in its own dtype.
    """
    return add_noise_blocks((tree,), key, (std,), once=once)[0]


def _noise_transform(
    stds: tuple[float, ...], key: jax.Array
) -> optax.GradientTransformation:
    """Adds noise of std ``stds[i]`` to block i of the update.

    The key is ``fold_in(key, release)``.
    """
    if key is None:
        raise ValueError("the DP noise needs an explicit PRNG key; got key=None.")

    def init_fn(params):
        del params
        return AddNoiseState(key=jnp.asarray(key), count=jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None):
        del params
        k = jax.random.fold_in(state.key, state.count)
        if len(stds) == 1:
            # An optimizer reads the noised update several times: draw it once.
            noised = add_noise(updates, k, stds[0], once=True)
        else:
            if not isinstance(updates, tuple) or len(updates) != len(stds):
                raise ValueError(
                    f"a {len(stds)}-block noise needs a tuple of {len(stds)} blocks."
                )
            noised = add_noise_blocks(updates, k, stds, once=True)
        return noised, AddNoiseState(state.key, state.count + 1)

    return optax.GradientTransformation(init_fn, update_fn)


def _sum_noise_std(
    noise_multiplier: float, l2_clip_norm: float, neighboring: Neighboring
) -> float:
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be >= 0; got {noise_multiplier!r}.")
    if not l2_clip_norm > 0:
        raise ValueError(f"l2_clip_norm must be > 0; got {l2_clip_norm!r}.")
    return (
        float(noise_multiplier)
        * Neighboring(neighboring).sensitivity_factor
        * float(l2_clip_norm)
    )


def add_gaussian_noise(
    noise_multiplier: float,
    l2_clip_norm: float,
    key: jax.Array,
    *,
    neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE,
) -> optax.GradientTransformation:
    """Adds N(0, (sigma * Delta)^2) to every coordinate of a clipped *sum*.

    The noise is added once per update.

    Args:
      noise_multiplier: sigma >= 0 (0 only for non-private debugging): noise std / L2
        sensitivity, dp-accounting's meaning, so the same sigma goes into the accounting
        event.
      l2_clip_norm: the clip norm C used for the sum.
      key: base PRNG key. The noise of release t uses ``fold_in(key, t)``, so no two
        releases share noise and a resumed run continues the stream instead of replaying
        it (docs/dp_pitfalls.md, item 14).
      neighboring: the relation the run is accounted under; it sets the sensitivity
        Delta of the sum (C under add/remove-one, 2C under replace-one).

    Returns:
      An optax transformation whose update adds the noise (in float32, cast back to each
      leaf's dtype).

    Raises:
      ValueError: if the key is missing or the parameters are out of range.
    """
    return _noise_transform(
        (_sum_noise_std(noise_multiplier, l2_clip_norm, neighboring),), key
    )


def dp_aggregator(
    *,
    noise_multiplier: float,
    l2_clip_norm: float,
    expected_batch_size: float,
    key: jax.Array,
    neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE,
) -> optax.GradientTransformation:
    """Noise once on the clipped sum, then divide by the public expected batch size q N.

    Dividing by the realised batch size would divide by a private quantity
    (docs/dp_pitfalls.md, item 6). Chain the result before an optimizer:
    ``optax.chain(dp_aggregator(...), optax.adam(1e-3))``. The plan's version takes
    every argument from one plan; the public route is ``DPPlan.privatize``.
    """
    if not expected_batch_size > 0:
        raise ValueError(
            f"expected_batch_size must be > 0 (q * N); got {expected_batch_size!r}."
        )
    return optax.chain(
        add_gaussian_noise(
            noise_multiplier, l2_clip_norm, key, neighboring=neighboring
        ),
        optax.scale(1.0 / float(expected_batch_size)),
    )


def dpsgd(
    optimizer: optax.GradientTransformation,
    *,
    noise_multiplier: float,
    l2_clip_norm: float,
    expected_batch_size: float,
    key: jax.Array,
    neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE,
) -> optax.GradientTransformation:
    """DP-SGD's update rule on clipped sums.

    Noise (std sigma * Delta), divide by q N, then ``optimizer``.
    """
    return optax.chain(
        dp_aggregator(
            noise_multiplier=noise_multiplier,
            l2_clip_norm=l2_clip_norm,
            expected_batch_size=expected_batch_size,
            key=key,
            neighboring=neighboring,
        ),
        optimizer,
    )


class DPTrainState(NamedTuple):
    """Parameters and the DP optimizer's state (holding the noise key and count)."""

    params: PyTree
    opt_state: optax.OptState


class DPStep(NamedTuple):
    """The pure functions of a DP-SGD step (see :func:`make_dp_step`)."""

    accumulate: Callable[..., tuple[PyTree, ClipMetrics]]
    apply: Callable[[DPTrainState, PyTree], DPTrainState]
    step: Callable[..., tuple[DPTrainState, ClipMetrics]]


def data_parallel(
    clip_fn: ClippedSumFn, mesh: jax.sharding.Mesh, axis_name: str = "data"
) -> Callable[
    [PyTree, PyTree, jax.Array, jax.Array | None], tuple[PyTree, ClipMetrics]
]:
    """The clipped sum of ``clip_fn`` computed over a device mesh, with the same result.

    Units are sharded along ``axis_name`` (the unit count must divide evenly over the
    devices, and each shard by the microbatch size); per-unit keys are split from
    ``key`` over the *global* unit axis before sharding, so every unit sees the key it
    would see on one device. Each device clips its own units; the sums are combined by
    ``psum``, so the (replicated) result equals the single-device clipped sum up to
    float summation order. Noise is added afterwards, once, from a replicated key
    (:func:`add_gaussian_noise`), never per device.
    """
    from jax.sharding import PartitionSpec as P  # noqa: PLC0415

    def local(params, batch, mask, unit_keys):
        total, m = clip_fn.with_unit_keys(params, batch, mask, unit_keys)
        num = jax.lax.psum(m.num_units, axis_name)
        metrics = ClipMetrics(
            per_unit_norms=m.per_unit_norms,
            clipped_fraction=jax.lax.psum(m.clipped_fraction * m.num_units, axis_name)
            / jnp.maximum(num, 1),
            num_nonfinite=jax.lax.psum(m.num_nonfinite, axis_name),
            num_units=num,
        )
        return jax.lax.psum(total, axis_name), metrics

    # A ClipMetrics of partition specs (a pytree prefix), not of arrays.
    out_specs = (P(), ClipMetrics(P(axis_name), P(), P(), P()))  # type: ignore[arg-type]

    def with_unit_keys(params, batch, mask, unit_keys):
        n_dev = mesh.shape[axis_name]
        if mask.shape[0] % n_dev:
            raise ValueError(
                f"{mask.shape[0]} units cannot be split evenly over {n_dev} devices; "
                "pad the batch "
                f"with masked units to a multiple of {n_dev}."
            )
        in_specs = (
            P(),
            P(axis_name),
            P(axis_name),
            P(axis_name) if clip_fn.uses_key else None,
        )
        sharded = jax.shard_map(
            local, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
        )
        return sharded(params, batch, mask, unit_keys)

    def fn(params, batch, mask, key=None):
        if clip_fn.uses_key and key is None:
            raise ValueError(
                "this clipped gradient's loss uses randomness; pass an explicit key."
            )
        unit_keys = jax.random.split(key, mask.shape[0]) if clip_fn.uses_key else None
        return with_unit_keys(params, batch, mask, unit_keys)

    # Callers that key each unit themselves (the DP loop keys units by their global
    # index, so the result does not depend on how a batch is split into microbatches or
    # processes).
    fn.with_unit_keys = with_unit_keys  # type: ignore[attr-defined]
    return fn


def holds_dp_noise(opt_state: PyTree) -> bool:
    """Whether an optimizer state holds this module's DP noise transform's state.

    The transforms are :func:`dp_aggregator`, :func:`dpsgd` and
    :func:`add_gaussian_noise`.
    """
    nodes = jax.tree_util.tree_leaves(
        opt_state, is_leaf=lambda x: isinstance(x, AddNoiseState)
    )
    return any(isinstance(x, AddNoiseState) for x in nodes)


def make_dp_step(
    clip_fn: ClippedSumFn,
    tx: optax.GradientTransformation,
    *,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str = "data",
) -> DPStep:
    """The pure functions of a DP-SGD step, accumulating gradients over microbatches.

    The lower-level step (private: tests and benchmarks). A user's step goes through
    :func:`~privrl_jax.privacy.fit`, or adds ``plan.privatize`` to the clipped sum in
    a loop of their own (docs/dp_loop.md).

    - ``accumulate(acc, params, batch, mask, key=None) -> (acc + clipped_sum, metrics)``
      adds one fixed-shape microbatch's clipped sum. An exact Poisson batch of any size
      runs as several calls of one compiled function (docs/dp_pitfalls.md, items 4 and
      8).
    - ``apply(state, acc) -> state`` adds the noise once (``tx`` must start with
      :func:`dp_aggregator` or be :func:`dpsgd`) and updates the parameters.
    - ``step(state, batch, mask, key=None) -> (state, metrics)``: both for a
      one-microbatch batch.

    With ``mesh``, the clipped sums are computed data-parallel over ``axis_name`` (see
    :func:`data_parallel`); the noise and the update then run on replicated values.

    Args:
      clip_fn: the per-unit clipped sum (``plan.clipped_grad(loss)``).
      tx: the DP update rule: ``plan._dpsgd(optimizer, key=...)``, :func:`dpsgd`, or
        :func:`dp_aggregator` chained before an optimizer.
      mesh: a device mesh for data-parallel clipped sums; None runs on one device.
      axis_name: the mesh axis the units are split over.

    Returns:
      A :class:`DPStep` of the three pure functions above.
    """
    grad_fn = clip_fn if mesh is None else data_parallel(clip_fn, mesh, axis_name)

    def accumulate(acc, params, batch, mask, key=None):
        clipped, metrics = grad_fn(params, batch, mask, key)
        return jax.tree_util.tree_map(jnp.add, acc, clipped), metrics

    def apply(state: DPTrainState, acc: PyTree) -> DPTrainState:
        chex.assert_trees_all_equal_structs(acc, state.params)
        if not holds_dp_noise(state.opt_state):
            # A plain optimizer here would train on the clipped sum without noise,
            # silently.
            raise ValueError(
                "make_dp_step: tx adds no DP noise, so the step would not be private; "
                "build it with "
                "plan._dpsgd(optimizer, key=...) or "
                "optax.chain(dp_aggregator(...), optimizer), "
                "or train through privacy.fit(plan, ...), which adds the plan's noise "
                "itself."
            )
        updates, opt_state = tx.update(acc, state.opt_state, state.params)
        return DPTrainState(optax.apply_updates(state.params, updates), opt_state)

    def step(state, batch, mask, key=None):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, state.params)
        acc, metrics = accumulate(zeros, state.params, batch, mask, key)
        return apply(state, acc), metrics

    return DPStep(accumulate, apply, step)
