"""One frozen plan per DP mechanism.

It holds the sampler, relation, clip norms, sigma, event and calibration.

Every piece of a DP release that must agree with every other comes from here
(docs/design.md, contract 8). A replace-one accounting bug once came from building the
accounting event apart from the sensitivity it depends on; with a plan, the noise std
and the event are two views of the same fields and cannot drift apart.

The meaning of sigma (``noise_multiplier``) is dp-accounting's and jax_privacy's
everywhere: noise std / L2 sensitivity of the released sum. The sensitivity is C under
add/remove-one and 2C under replace-one, so a replace-one plan with sigma = 1 and C = 1
adds noise of std 2 and is accounted as ``GaussianDpEvent(1)`` inside its sampling
event.

What runs where: the plan itself, accounting and sampling are host-side (NumPy,
dp-accounting); :meth:`DPPlan.privatize` and the clipped sums it builds are pure JAX
functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import dp_accounting
import jax
import optax

from privrl_jax.privacy import _accounting
from privrl_jax.privacy._accounting import (
    Accountant,
    EpsilonReport,
    Neighboring,
    Sampling,
)
from privrl_jax.privacy._adaptive import (
    AdaptiveClipping,
    count_noise_multiplier,
    gradient_noise_multiplier,
)
from privrl_jax.privacy._aggregation import _noise_transform, add_noise_blocks
from privrl_jax.privacy._clipping import (
    ClippedSumFn,
    PerItemFn,
    _check_clip_norms,
    _check_common,
    clipped_grad,
    clipped_sum,
)
from privrl_jax.privacy._discrete_gaussian import (
    DiscreteGaussianNoise,
    noise_from_description,
)
from privrl_jax.privacy._sampling import (
    FullBatchSampler,
    IndexBatch,
    PoissonSampler,
    UniformOneSampler,
    step_batches,
    step_rng,
)

PyTree = Any
Sampler = PoissonSampler | UniformOneSampler | FullBatchSampler
# What works where a plan's number is traced (a jitted or vmapped sweep over sigma / C).
_SWEEP_HOW = (
    "Build the DPPlan outside the transform and pass its numbers traced instead: "
    "structure, arrays = plan.split(); jit over `arrays` (PlanArrays: clip norms and "
    "noise stds) with `structure` static, e.g. structure.privatize(clipped, key, "
    "arrays); one compile serves every sigma."
)


def _no_discrete_privatizer(noise: DiscreteGaussianNoise | None) -> None:
    if noise is not None:
        raise NotImplementedError(
            "the discrete-Gaussian noise mode runs through plan.privatize / fit; the "
            "optax privatizer adds float Gaussian noise only."
        )


def _require_rdp_for_discrete(
    noise: DiscreteGaussianNoise | None, accountant: Accountant
) -> None:
    # Canonne, Kamath & Steinke 2020 (Thm 14) prove the multivariate discrete
    # Gaussian rho-zCDP with the continuous Gaussian's rho, so the RDP accountant's
    # bound holds for it; dp-accounting's PLD of a GaussianDpEvent is the continuous
    # Gaussian's privacy loss, which is not proven to dominate the discrete one's.
    if noise is not None and accountant != "rdp":
        raise ValueError(
            f"the discrete-Gaussian noise mode is accounted with accountant='rdp' "
            f"only (its guarantee is proven as Renyi / concentrated DP); got "
            f"accountant={accountant!r}."
        )


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def effective_noise_multiplier(noise_multipliers: tuple[float, ...]) -> float:
    """sigma_eff = (sum_i sigma_i^-2)^(-1/2) of k Gaussian blocks released together.

    Block i moves by at most its sensitivity Delta_i and gets noise of std sigma_i
    Delta_i. Scaling block i by 1 / (sigma_i Delta_i) gives unit noise on every
    coordinate and moves block i by at most 1 / sigma_i, so the whole release is one
    Gaussian mechanism of sensitivity (sum_i sigma_i^-2)^(1/2) and unit noise: noise
    multiplier sigma_eff. Accounting the blocks as independent mechanisms would
    over-count; accounting them as one block of sigma_1 would under-count.
    """
    if any(s == 0 for s in noise_multipliers):
        return 0.0
    return 1.0 / math.sqrt(sum(s**-2 for s in noise_multipliers))


class PlanArrays(NamedTuple):
    """The numbers of a plan that a sweep varies, as the leaves of a pytree.

    Pass it to a jitted function as an ordinary (traced) argument: plans that differ
    only in sigma (or in their clip norms) then share one compiled executable. Python
    floats trace as weak-typed float32 scalars, exactly the values (and dtype promotion)
    the same floats have as constants, so a bound plan computes bit-for-bit what the
    plan itself computes.

    Attributes:
      l2_clip_norms: C_i per block.
      noise_stds: the noise std per block, sigma_i times its sensitivity (0 for sigma =
        0: the noise term is still added, as 0 * N(0, 1), so nothing branches on a
        traced sigma).
    """

    l2_clip_norms: tuple[jax.typing.ArrayLike, ...]
    noise_stds: tuple[jax.typing.ArrayLike, ...]


@dataclasses.dataclass(frozen=True)
class PlanStructure:
    """The static half of :meth:`DPPlan.split`.

    What fixes shapes and code, not sigma or C.

    Hashable, so it is a static jit argument; its methods need the :class:`PlanArrays`
    of the same :meth:`DPPlan.split` (traced), and are the plan's own methods with those
    numbers bound.
    It carries no event and no epsilon: accounting stays on the :class:`DPPlan`.
    """

    sampler: Any
    steps: int
    neighboring: Neighboring
    num_blocks: int
    # The discrete-Gaussian noise mode and the sensitivities its grid needs (static:
    # a sweep over the clip norm recompiles in that mode only).
    noise: DiscreteGaussianNoise | None = None
    noise_sensitivities: tuple[float, ...] = ()

    @property
    def expected_batch_size(self) -> float:
        return self.sampler.expected_batch_size

    def _check(self, arrays: PlanArrays) -> None:
        if (
            len(arrays.l2_clip_norms) != self.num_blocks
            or len(arrays.noise_stds) != self.num_blocks
        ):
            raise ValueError(
                f"this plan has {self.num_blocks} block(s) but the arrays hold "
                f"{len(arrays.l2_clip_norms)} clip norm(s) and "
                f"{len(arrays.noise_stds)} noise "
                "std(s); bind the arrays of the same plan.split()."
            )

    def clipped_sum(
        self,
        per_item_fn: PerItemFn,
        arrays: PlanArrays,
        *,
        microbatch_size: int | None = None,
        uses_key: bool = False,
    ) -> ClippedSumFn:
        """:meth:`DPPlan.clipped_sum` with the clip norms of ``arrays``.

        The plan validates them.
        """
        self._check(arrays)
        _check_common(microbatch_size, "vmap")
        return ClippedSumFn(
            per_item_fn=per_item_fn,
            # Tracers in a swept plan, where ClippedSumFn's annotation says float.
            l2_clip_norms=tuple(arrays.l2_clip_norms),  # type: ignore[arg-type]
            kind="value",
            microbatch_size=microbatch_size,
            uses_key=uses_key,
        )

    def clipped_grad(
        self,
        per_item_loss: PerItemFn,
        arrays: PlanArrays,
        *,
        microbatch_size: int | None = None,
        uses_key: bool = False,
        method: str = "vmap",
    ) -> ClippedSumFn:
        """:meth:`DPPlan.clipped_grad` with the clip norm of ``arrays``."""
        self._check(arrays)
        if self.num_blocks != 1:
            raise ValueError(
                f"this plan has {self.num_blocks} blocks; use clipped_sum."
            )
        _check_common(microbatch_size, method)
        return ClippedSumFn(
            per_item_fn=per_item_loss,
            # Tracers in a swept plan, where ClippedSumFn's annotation says float.
            l2_clip_norms=tuple(arrays.l2_clip_norms),  # type: ignore[arg-type]
            kind="grad",
            microbatch_size=microbatch_size,
            uses_key=uses_key,
            method=method,
        )

    def privatize(self, clipped: PyTree, key: jax.Array, arrays: PlanArrays) -> PyTree:
        """:meth:`DPPlan.privatize` with the noise stds of ``arrays``.

        Args:
          clipped: the clipped sum (a tuple of them with several blocks).
          key: this release's key.
          arrays: the :class:`PlanArrays` of the same :meth:`DPPlan.split` (traced).

        Returns:
          The noisy sum divided by the expected batch size (the noisy mean).
        """
        self._check(arrays)
        blocks = (clipped,) if self.num_blocks == 1 else tuple(clipped)
        if self.noise is not None:
            noised = self.noise.add_blocks(
                blocks, key, tuple(arrays.noise_stds), self.noise_sensitivities
            )
        else:
            noised = add_noise_blocks(blocks, key, tuple(arrays.noise_stds), once=True)
        scale = 1.0 / self.expected_batch_size
        out = jax.tree_util.tree_map(lambda x: (x * scale).astype(x.dtype), noised)
        return out[0] if self.num_blocks == 1 else out

    def _privatizer(
        self, key: jax.Array, arrays: PlanArrays
    ) -> optax.GradientTransformation:
        # DPPlan._privatizer with the noise stds of ``arrays``.
        self._check(arrays)
        _no_discrete_privatizer(self.noise)
        return optax.chain(
            _noise_transform(tuple(arrays.noise_stds), key),  # type: ignore[arg-type]
            optax.scale(1.0 / self.expected_batch_size),
        )

    def _dpsgd(
        self,
        optimizer: optax.GradientTransformation,
        *,
        key: jax.Array,
        arrays: PlanArrays,
    ) -> optax.GradientTransformation:
        # DPPlan._dpsgd with the noise stds of ``arrays``.
        return optax.chain(self._privatizer(key, arrays), optimizer)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPPlan:
    """Everything one DP release schedule is, bound together.

    Build it with the sampler that will actually run, the clip norm(s) and the number of
    steps; :meth:`calibrate` returns a copy with sigma for a target (epsilon, delta).
    From the plan, and only from it, come the sensitivity, the noise std, the
    normaliser, the dp-accounting event, the clipped sums (:meth:`clipped_grad`,
    :meth:`clipped_sum`), the noise (:meth:`privatize`) and the batches
    (:meth:`batches`).

    Attributes:
      sampler: :class:`PoissonSampler` (with or without ``capacity``),
        :class:`UniformOneSampler` or :class:`FullBatchSampler`. Its ``dataset_size`` N
        is treated as public, as Opacus and jax_privacy do: declare it, or record that
        it was read from the data.
      l2_clip_norm: C, or a tuple (C_1, ..., C_k) for a release of k separately clipped
        blocks.
      steps: number of releases T (every step counts, empty Poisson batches too).
      noise_multiplier: sigma (or one per block) = noise std / L2 sensitivity; 0 means
        no noise (a non-private run, accounted as ``NonPrivateDpEvent``); None until
        calibrated.
      neighboring: the neighbouring relation; by default the sampler's (add/remove-one
        for Poisson and full batches, replace-one for uniform one-of-N, which requires
        it).
      adaptive_clipping: None (a fixed clip norm, the default) or an
        :class:`AdaptiveClipping`: ``l2_clip_norm`` is then the initial clip norm, which
        :func:`~privrl_jax.privacy.fit` moves toward a private quantile of the per-unit
        norms. The event (and epsilon) stay those of sigma = ``noise_multiplier``: the
        gradient gets the larger :attr:`gradient_noise_multiplier` and the count of
        unclipped units the rest (privacy/_adaptive.py). One block, float noise only.

    Example:
      >>> from privrl_jax import privacy
      >>> plan = privacy.DPPlan(
      ...     sampler=privacy.UniformOneSampler(dataset_size=1000), l2_clip_norm=1.0,
      ...     steps=10_000, noise_multiplier=1.0)
      >>> plan.neighboring.name, plan.noise_stds
      ('REPLACE_ONE', (2.0,))
    """

    sampler: Sampler
    l2_clip_norm: float | tuple[float, ...]
    steps: int
    noise_multiplier: float | tuple[float, ...] | None = None
    neighboring: Neighboring | None = None
    # None: float32 Gaussian noise (the default); DiscreteGaussianNoise(): the
    # floating-point-safe discrete Gaussian on a grid (privacy/_discrete_gaussian.py).
    noise: DiscreteGaussianNoise | None = None
    adaptive_clipping: AdaptiveClipping | None = None

    def __post_init__(self):
        if not isinstance(
            self.sampler, (PoissonSampler, UniformOneSampler, FullBatchSampler)
        ):
            raise ValueError(
                "sampler must be a PoissonSampler, UniformOneSampler or "
                "FullBatchSampler; got "
                f"{type(self.sampler).__name__}. A shuffled or fixed-size batch cannot "
                "be accounted "
                "as Poisson."
            )
        norms = _check_clip_norms(
            _accounting._concrete("l2_clip_norm", self.l2_clip_norm, _SWEEP_HOW)
            if not isinstance(self.l2_clip_norm, (tuple, list))
            else tuple(
                _accounting._concrete("l2_clip_norm", c, _SWEEP_HOW)
                for c in self.l2_clip_norm
            )
        )
        object.__setattr__(self, "l2_clip_norm", norms if len(norms) > 1 else norms[0])
        _accounting.validate_steps(self.steps)
        object.__setattr__(self, "steps", int(self.steps))
        relation = Neighboring(self.neighboring or self.sampler.neighboring)
        object.__setattr__(self, "neighboring", relation)
        if (
            isinstance(self.sampler, PoissonSampler)
            and relation is not Neighboring.ADD_OR_REMOVE_ONE
        ):
            raise ValueError(
                "Poisson sampling is accounted under add/remove-one; got "
                "neighboring=REPLACE_ONE. "
                "Use a UniformOneSampler or FullBatchSampler for replace-one releases."
            )
        if (
            isinstance(self.sampler, UniformOneSampler)
            and relation is not Neighboring.REPLACE_ONE
        ):
            raise ValueError(
                "uniform one-of-N sampling draws a fixed-size batch, which "
                "dp-accounting analyses "
                "under replace-one only; leave neighboring unset (REPLACE_ONE)."
            )
        if self.noise_multiplier is not None:
            sigmas = tuple(
                _accounting._concrete("noise_multiplier", s, _SWEEP_HOW)
                for s in _as_tuple(self.noise_multiplier)
            )
            if len(sigmas) != len(norms):
                raise ValueError(
                    f"{len(norms)} clip norm(s) but {len(sigmas)} noise multiplier(s); "
                    "give one "
                    "noise multiplier per block."
                )
            for s in sigmas:
                if not _accounting._is_real(s) or not 0 <= s < math.inf:
                    raise ValueError(
                        f"noise_multiplier must be a finite number >= 0; got {s!r}."
                    )
            sigmas = tuple(float(s) for s in sigmas)
            if 0.0 in sigmas and any(sigmas):
                raise ValueError(
                    f"noise multipliers {sigmas}: either every block is noised (> 0) "
                    "or none is "
                    "(0, a non-private run); one unnoised block makes the whole "
                    "release non-private."
                )
            object.__setattr__(
                self, "noise_multiplier", sigmas if len(sigmas) > 1 else sigmas[0]
            )
        if self.adaptive_clipping is not None:
            self._check_adaptive(len(norms))

    def _no_adaptive(self, what: str) -> None:
        # These paths would clip at C0 forever and add z_Delta's noise: private, but
        # not adaptive, silently. The clip norm's state lives in fit's loop.
        if self.adaptive_clipping is not None:
            raise NotImplementedError(
                f"plan.{what} has no clip-norm state: a plan with adaptive clipping "
                "runs through privacy.fit, which carries C_t from step to step "
                "(and in its checkpoints)."
            )

    def _check_adaptive(self, num_blocks: int) -> None:
        adaptive = self.adaptive_clipping
        if not isinstance(adaptive, AdaptiveClipping):
            raise ValueError(
                "adaptive_clipping must be None or a privacy.AdaptiveClipping; got "
                f"{type(adaptive).__name__}."
            )
        if num_blocks != 1:
            raise ValueError(
                "adaptive clipping follows one clip norm; this plan has "
                f"{num_blocks} blocks. Give one l2_clip_norm."
            )
        if self.noise is not None:
            raise NotImplementedError(
                "adaptive clipping with the discrete-Gaussian noise mode is not "
                "supported (its grid is fixed by the clip norm); use noise=None."
            )
        object.__setattr__(
            self,
            "adaptive_clipping",
            adaptive.resolved(self.sampler.expected_batch_size),
        )
        if self.noise_multiplier is not None:
            self.gradient_noise_multiplier  # noqa: B018  (raises if z cannot be split)

    # ---------------------------------------------------------------- the fields' views
    @property
    def num_blocks(self) -> int:
        return len(self.l2_clip_norms)

    @property
    def l2_clip_norms(self) -> tuple[float, ...]:
        return _as_tuple(self.l2_clip_norm)

    @property
    def _relation(self) -> Neighboring:
        # __post_init__ resolves ``neighboring`` (None: the sampler's): it is set.
        assert self.neighboring is not None
        return self.neighboring

    @property
    def noise_multipliers(self) -> tuple[float, ...]:
        """The noise multiplier sigma per block (raises before calibration)."""
        if self.noise_multiplier is None:
            raise ValueError(
                "this plan has no noise multiplier yet: call plan.calibrate(epsilon, "
                "delta) or set "
                "noise_multiplier."
            )
        return _as_tuple(self.noise_multiplier)

    @property
    def private(self) -> bool:
        """Whether the plan adds noise.

        False for sigma = 0, the non-private ablation.
        """
        return all(s > 0 for s in self.noise_multipliers)

    @property
    def sensitivities(self) -> tuple[float, ...]:
        """L2 sensitivity of each block of the clipped sum.

        C_i (add/remove) or 2 C_i (replace).
        """
        return tuple(self._relation.sensitivity_factor * c for c in self.l2_clip_norms)

    @property
    def noise_stds(self) -> tuple[float, ...]:
        """Noise std added to each block of the sum: sigma_i times its sensitivity.

        With discrete noise, also times 1 + rho, the rounding's share of Delta. With
        adaptive clipping: :attr:`gradient_noise_multiplier` times the initial
        sensitivity (step t's is that multiplier times its own clip norm's).
        """
        factor = 1.0 if self.noise is None else self.noise.std_factor
        sigmas = (
            self.noise_multipliers
            if self.adaptive_clipping is None
            else (self.gradient_noise_multiplier,)
        )
        return tuple(s * d * factor for s, d in zip(sigmas, self.sensitivities))

    @property
    def count_noise_std(self) -> float:
        """Adaptive clipping's sigma_b: the std of the noise on the unclipped count.

        0 for a non-private plan; raises without adaptive clipping.
        """
        if self.adaptive_clipping is None:
            raise ValueError("this plan has no adaptive clipping.")
        if not self.private:
            return 0.0
        return float(self.adaptive_clipping.count_noise_std)  # type: ignore[arg-type]

    @property
    def gradient_noise_multiplier(self) -> float:
        """The gradient's noise multiplier (noise std / its sensitivity).

        sigma itself with a fixed clip norm; with adaptive clipping, z_Delta = (z^-2 -
        z_b^-2)^(-1/2) > z, so that the gradient and the count together are one
        Gaussian of noise multiplier z (Andrew et al. 2021, Theorem 1), which is what
        the event accounts.
        """
        z = self.noise_multipliers[0]
        if self.adaptive_clipping is None:
            if self.num_blocks != 1:
                raise ValueError(
                    f"this plan has {self.num_blocks} blocks; see noise_multipliers."
                )
            return z
        z_b = count_noise_multiplier(
            float(self.adaptive_clipping.count_noise_std),  # type: ignore[arg-type]
            self._relation,
        )
        return gradient_noise_multiplier(z, z_b)

    @property
    def effective_noise_multiplier(self) -> float:
        """The sigma the accountant sees (see :func:`effective_noise_multiplier`)."""
        return effective_noise_multiplier(self.noise_multipliers)

    @property
    def dataset_size(self) -> int:
        return self.sampler.dataset_size

    @property
    def sampling(self) -> Sampling:
        return self.sampler.sampling

    @property
    def sampling_rate(self) -> float:
        return self.sampler.sampling_rate

    @property
    def expected_batch_size(self) -> float:
        """The public normaliser of the noisy sum.

        q N (Poisson), 1 (one-of-N) or N (full).
        """
        return self.sampler.expected_batch_size

    # ------------------------------------------------------------------ accounting
    def _step_event_for(self, sigma_eff: float) -> dp_accounting.DpEvent:
        if sigma_eff == 0:
            return dp_accounting.NonPrivateDpEvent()
        return _accounting.dpsgd_event(
            sigma_eff,
            self.sampling_rate,
            1,
            sampling=self.sampling,
            dataset_size=self.dataset_size,
            capacity=getattr(self.sampler, "capacity", None),
        ).event

    def step_event(self) -> dp_accounting.DpEvent:
        """The dp-accounting event of one step, exactly as it runs."""
        return self._step_event_for(self.effective_noise_multiplier)

    def event(self) -> dp_accounting.DpEvent:
        """The dp-accounting event of all ``steps`` steps."""
        return dp_accounting.SelfComposedDpEvent(self.step_event(), self.steps)

    def epsilon(self, delta: float, accountant: Accountant = "rdp") -> EpsilonReport:
        """Epsilon of the whole plan at ``delta`` (inf for a non-private plan)."""
        _require_rdp_for_discrete(self.noise, accountant)
        if not self.private:
            _accounting.validate_delta(delta)
            return EpsilonReport(
                epsilon=math.inf,
                delta=float(delta),
                accountant=accountant,
                neighboring=self._relation.name,
            )
        return _accounting.compute_epsilon(
            self.event(),
            delta,
            accountant=accountant,
            neighboring=self._relation.to_dp_accounting(),
        )

    def calibrate(
        self,
        target_epsilon: float,
        delta: float,
        accountant: Accountant = "rdp",
        *,
        tol: float = 1e-3,
    ) -> DPPlan:
        """A copy with the smallest sigma meeting the target epsilon over ``steps``.

        ``target_epsilon = inf`` gives sigma = 0 (no noise; the run is not private).
        With several blocks, the ratios between their noise multipliers are kept (equal
        when none were set) and the common scale is calibrated on sigma_eff.
        """
        _require_rdp_for_discrete(self.noise, accountant)
        if target_epsilon == math.inf:
            return dataclasses.replace(self, noise_multiplier=(0.0,) * self.num_blocks)
        _accounting._check_positive("target_epsilon", target_epsilon)
        _accounting.validate_delta(delta, dataset_size=self.dataset_size)

        def make_event(sigma: float) -> dp_accounting.DpEvent:
            return dp_accounting.SelfComposedDpEvent(
                self._step_event_for(sigma), self.steps
            )

        sigma_eff = _accounting.calibrate_sigma(
            make_event,
            target_epsilon,
            delta,
            accountant=accountant,
            neighboring=self._relation.to_dp_accounting(),
            tol=tol,
        )
        ratios = (
            self.noise_multipliers
            if self.noise_multiplier is not None and self.private
            else (1.0,) * self.num_blocks
        )
        scale = sigma_eff / effective_noise_multiplier(ratios)
        return dataclasses.replace(
            self, noise_multiplier=tuple(scale * r for r in ratios)
        )

    # --------------------------------------------------------------- clipping and noise
    def split(self) -> tuple[PlanStructure, PlanArrays]:
        """The plan as a static structure and its swept numbers.

        This gives one compile per sweep.

        A jitted function that takes the plan as a static argument compiles once per
        sigma (a 6-epsilon sweep compiles 6 times). Take ``structure`` static and
        ``arrays`` traced
        instead: every plan with the same sampler, steps, relation and number of blocks
        then runs the same executable, and the plan stays the only source of sigma and
        of the event.

        Example:
          >>> from privrl_jax import privacy
          >>> plan = privacy.DPPlan(
          ...     sampler=privacy.UniformOneSampler(dataset_size=100), l2_clip_norm=0.5,
          ...     steps=10, noise_multiplier=2.0)
          >>> structure, arrays = plan.split()
          >>> arrays
          PlanArrays(l2_clip_norms=(0.5,), noise_stds=(2.0,))
        """
        structure = PlanStructure(
            sampler=self.sampler,
            steps=self.steps,
            neighboring=self._relation,
            num_blocks=self.num_blocks,
            noise=self.noise,
            noise_sensitivities=self.sensitivities if self.noise is not None else (),
        )
        return structure, PlanArrays(self.l2_clip_norms, self.noise_stds)

    def clipped_grad(
        self,
        per_item_loss: PerItemFn,
        *,
        microbatch_size: int | None = None,
        uses_key: bool = False,
        method: str = "vmap",
    ) -> ClippedSumFn:
        """:func:`clipped_grad` with this plan's clip norm (one block)."""
        if self.num_blocks != 1:
            raise ValueError(
                f"this plan has {self.num_blocks} blocks; use plan.clipped_sum."
            )
        return clipped_grad(
            per_item_loss,
            l2_clip_norm=self.l2_clip_norms[0],
            microbatch_size=microbatch_size,
            uses_key=uses_key,
            method=method,
        )

    def clipped_sum(
        self,
        per_item_fn: PerItemFn,
        *,
        microbatch_size: int | None = None,
        uses_key: bool = False,
    ) -> ClippedSumFn:
        """:func:`clipped_sum` with this plan's clip norm(s), one per block."""
        return clipped_sum(
            per_item_fn,
            l2_clip_norm=self.l2_clip_norms,
            microbatch_size=microbatch_size,
            uses_key=uses_key,
        )

    def check_clipped(self, fn: ClippedSumFn) -> None:
        """Raises unless ``fn`` clips to exactly this plan's clip norms."""
        if tuple(fn.l2_clip_norms) != self.l2_clip_norms:
            raise ValueError(
                f"the clipped sum clips to {fn.l2_clip_norms} but the plan's noise and "
                "accounting "
                f"assume {self.l2_clip_norms}; build it with plan.clipped_grad / "
                "plan.clipped_sum."
            )

    def privatize(self, clipped: PyTree, key: jax.Array) -> PyTree:
        """One release: the clipped sum plus its noise, divided by q N.

        The library's one route to the noise of a training step: :func:`fit` adds it
        to every step's clipped sum, and a hand-written loop calls it once per step
        (docs/dp_loop.md). Pure and jittable.

        Args:
          clipped: the step's clipped sum (:meth:`clipped_grad`, :meth:`clipped_sum`);
            with several blocks, a tuple of them.
          key: this release's key (e.g. ``fold_in(secret_key, step)``; never reuse
            it for another release).

        Returns:
          The noisy sum divided by the public expected batch size q N (the noisy mean
          an optimizer takes), in the dtypes of ``clipped``.
        """
        self._no_adaptive("privatize")
        structure, arrays = self.split()
        return structure.privatize(clipped, key, arrays)

    def _privatizer(self, key: jax.Array) -> optax.GradientTransformation:
        # :meth:`privatize` as an optax transformation (noise once, then divide by
        # q N; release t uses ``fold_in(key, t)``), for the lower-level step of
        # _aggregation.make_dp_step (tests, benchmarks).
        _no_discrete_privatizer(self.noise)
        self._no_adaptive("privatizer / dpsgd / make_dp_step")
        return optax.chain(
            _noise_transform(self.noise_stds, key),
            optax.scale(1.0 / self.expected_batch_size),
        )

    def _dpsgd(
        self, optimizer: optax.GradientTransformation, *, key: jax.Array
    ) -> optax.GradientTransformation:
        # DP-SGD's update rule for this plan: _privatizer, then ``optimizer``.
        return optax.chain(self._privatizer(key), optimizer)

    # ------------------------------------------------------------------ sampling
    def sample(self, seed: int, step: int) -> IndexBatch:
        """Step ``step``'s batch from the stream seeded by ``seed`` (keep it secret)."""
        return self.sampler.sample(step_rng(seed, step))

    def batches(self, seed: int, *, start: int = 0) -> Iterator[IndexBatch]:
        """The batches of steps ``start .. steps-1``."""
        return step_batches(self.sampler, seed, self.steps, start=start)

    def describe(self) -> dict[str, Any]:
        """The plan as plain JSON types (for the ledger and reports).

        It holds no secret.
        """
        out: dict[str, Any] = {
            "sampling": self.sampling.value,
            "neighboring": self._relation.name,
            "dataset_size": self.dataset_size,
            "sampling_rate": self.sampling_rate,
            "expected_batch_size": self.expected_batch_size,
            "steps": self.steps,
            "l2_clip_norms": list(self.l2_clip_norms),
            "sensitivities": list(self.sensitivities),
        }
        capacity = getattr(self.sampler, "capacity", None)  # truncated Poisson only
        if capacity is not None:
            out["capacity"] = capacity
        if self.noise is not None:
            out["noise"] = self.noise.describe()
        if self.adaptive_clipping is not None:
            out["adaptive_clipping"] = self.adaptive_clipping.describe()
        if self.noise_multiplier is not None:
            out |= {
                "noise_multipliers": list(self.noise_multipliers),
                "effective_noise_multiplier": self.effective_noise_multiplier,
                "noise_stds": list(self.noise_stds),
            }
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class GaussianMechanism:
    """The Gaussian mechanism on a vector (pytree) of known L2 sensitivity.

    For non-gradient releases.

    POOL's noisy counts and next-value sums, a DP mean, output perturbation: state the
    L2 sensitivity Delta of the whole released vector for one privacy unit (and the
    relation it holds under), then release ``value + N(0, (sigma Delta)^2)``. The ledger
    records ``GaussianDpEvent(sigma)``, which both dp-accounting accountants handle
    exactly; the same mechanism is rho-zCDP with rho = 1 / (2 sigma^2) (Bun & Steinke
    2016, Prop. 1.6).

    Attributes:
      l2_sensitivity: Delta > 0 of the released vector.
      noise_multiplier: sigma = noise std / Delta (None until calibrated).
      neighboring: the relation under which ``l2_sensitivity`` holds (recorded, not
        used).
    """

    l2_sensitivity: float
    noise_multiplier: float | None = None
    neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE

    def __post_init__(self):
        for name in ("l2_sensitivity", "noise_multiplier"):
            value = getattr(self, name)
            if value is None or _accounting._is_traced(value):
                # Traced (a jitted / vmapped sweep): release, noise_std and rho are pure
                # and take it; the accounting (event, epsilon, describe) refuses it.
                continue
            value = _accounting._concrete(name, value, "")
            _accounting._check_positive(name, value)
            object.__setattr__(self, name, float(value))

    @property
    def traced(self) -> bool:
        """Whether sigma or the sensitivity is a JAX tracer (inside jit / vmap)."""
        return any(
            _accounting._is_traced(v)
            for v in (self.l2_sensitivity, self.noise_multiplier)
        )

    def _require_concrete(self, what: str) -> None:
        if self.traced:
            raise ValueError(
                f"GaussianMechanism.{what} needs a concrete sigma and sensitivity, but "
                "they are traced (inside jax.jit / jax.vmap): release(), noise_std and "
                "rho work traced; build the mechanism outside the transform to "
                "account or record it."
            )

    @classmethod
    def from_zcdp(
        cls, rho: float, l2_sensitivity: float, **kwargs
    ) -> GaussianMechanism:
        """The mechanism that is exactly rho-zCDP: sigma = 1 / sqrt(2 rho)."""
        sigma: Any  # a float, or a traced array inside a vmapped sweep
        if _accounting._is_traced(rho):
            # A traced rho (a vmapped sweep): sigma is the same closed form, traced.
            sigma = 1.0 / jax.numpy.sqrt(2.0 * rho)
        else:
            rho = _accounting._concrete("rho", rho, "")
            _accounting._check_positive("rho", rho)
            sigma = 1.0 / math.sqrt(2.0 * rho)
        return cls(l2_sensitivity=l2_sensitivity, noise_multiplier=sigma, **kwargs)

    @property
    def noise_std(self) -> float:
        if self.noise_multiplier is None:
            raise ValueError("calibrate the mechanism (or set noise_multiplier) first.")
        return self.noise_multiplier * self.l2_sensitivity

    @property
    def rho(self) -> float:
        """Its zCDP parameter, 1 / (2 sigma^2)."""
        return 0.5 / cast(float, self.noise_multiplier) ** 2

    def event(self) -> dp_accounting.DpEvent:
        """``GaussianDpEvent(sigma)``: what the ledger records per release."""
        self._require_concrete("event()")
        return dp_accounting.GaussianDpEvent(self.noise_std / self.l2_sensitivity)

    def epsilon(self, delta: float, accountant: Accountant = "rdp") -> EpsilonReport:
        return _accounting.compute_epsilon(
            self.event(),
            delta,
            accountant=accountant,
            neighboring=self.neighboring.to_dp_accounting(),
        )

    def calibrate(
        self,
        target_epsilon: float,
        delta: float,
        accountant: Accountant = "rdp",
        *,
        tol: float = 1e-4,
    ) -> GaussianMechanism:
        """A copy with the smallest sigma whose one release meets the target.

        One release is then (target_epsilon, delta)-DP.
        """
        self._require_concrete("calibrate()")
        _accounting._check_positive("target_epsilon", target_epsilon)
        _accounting.validate_delta(delta)
        sigma = _accounting.calibrate_sigma(
            dp_accounting.GaussianDpEvent,
            target_epsilon,
            delta,
            accountant=accountant,
            neighboring=self.neighboring.to_dp_accounting(),
            tol=tol,
        )
        return dataclasses.replace(self, noise_multiplier=float(sigma))

    def release(self, key: jax.Array, value: PyTree) -> PyTree:
        """``value`` plus N(0, noise_std^2) on every coordinate (pure, jittable).

        The library's one route to the noise of a one-shot release (POOL's
        statistics, a DP mean). Inside a jitted sweep, build the mechanism there with
        the traced number: ``GaussianMechanism(l2_sensitivity=1.0,
        noise_multiplier=std).release(key, value)`` adds noise of exactly the std
        ``std`` (a product with 1.0 is exact).

        Args:
          key: the PRNG key of this one release (never reuse it for another).
          value: a pytree of arrays, the released vector.

        Returns:
          The noised pytree: noise drawn and added in float32, each leaf cast back to
          its own dtype.
        """
        return add_noise_blocks((value,), key, (self.noise_std,))[0]

    def describe(self) -> dict[str, Any]:
        """The mechanism as plain JSON types (for the ledger)."""
        self._require_concrete("describe()")
        return {
            "mechanism": "gaussian",
            "l2_sensitivity": self.l2_sensitivity,
            "noise_multiplier": self.noise_multiplier,
            "neighboring": self.neighboring.name,
        }


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExponentialMechanism:
    """The exponential mechanism: pick one of C candidates.

    Each is picked with probability proportional to exp(epsilon * score / (2 *
    sensitivity)).

    ``sensitivity`` bounds how far any one score moves when one privacy unit is added
    or removed. The mechanism is epsilon-DP, and more: its privacy loss, as a function
    of the output, spans an interval of width at most epsilon ("bounded range"), which
    Cesar & Rogers (2021, "Bounding, concentrating, and truncating: unifying privacy
    loss composition for data analytics", https://arxiv.org/abs/2004.07223) show
    implies epsilon^2 / 8-zCDP. The ledger records that guarantee,
    ``ZCDpEvent(epsilon**2 / 8)``; dp-accounting's RDP accountant composes it with
    Gaussian events, its PLD accountant does not take it.

    The draw is the Gumbel-max trick: the argmax of the scaled scores plus i.i.d.
    standard Gumbel noise has exactly the softmax law above.

    Attributes:
      epsilon: the pure-DP parameter (> 0).
      sensitivity: the score's sensitivity (> 0).
      neighboring: the relation under which ``sensitivity`` holds (recorded, not used).
    """

    epsilon: float
    sensitivity: float
    neighboring: Neighboring = Neighboring.ADD_OR_REMOVE_ONE

    def __post_init__(self):
        _accounting._check_positive("epsilon", self.epsilon)
        _accounting._check_positive("sensitivity", self.sensitivity)
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "sensitivity", float(self.sensitivity))

    @property
    def rho(self) -> float:
        """Its zCDP parameter, epsilon^2 / 8 (bounded range)."""
        return self.epsilon**2 / 8.0

    def event(self) -> dp_accounting.DpEvent:
        """``ZCDpEvent(epsilon**2 / 8)``: what the ledger records per selection."""
        return dp_accounting.ZCDpEvent(self.rho)

    def logits(self, scores: jax.typing.ArrayLike) -> jax.Array:
        """The logits epsilon * score / (2 * sensitivity); the law is their softmax."""
        return self.epsilon * jax.numpy.asarray(scores) / (2.0 * self.sensitivity)

    def select(self, key: jax.Array, scores: jax.Array) -> jax.Array:
        """The index of one candidate (int32 scalar), drawn by Gumbel-max (jittable)."""
        logits = self.logits(scores)
        gumbel = jax.random.gumbel(key, logits.shape, dtype=logits.dtype)
        return jax.numpy.argmax(logits + gumbel).astype(jax.numpy.int32)

    def describe(self) -> dict[str, Any]:
        """The mechanism as plain JSON types (for the ledger)."""
        return {
            "mechanism": "exponential",
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "neighboring": self.neighboring.name,
        }


def event_from_description(params: dict[str, Any]) -> dp_accounting.DpEvent | None:
    """The one-release event of a plan's or mechanism's ``describe()``.

    Accepts the output of :meth:`DPPlan.describe`, :meth:`GaussianMechanism.describe` or
    :meth:`ExponentialMechanism.describe`.

    The ledger recomputes every recorded event from its recorded parameters with this,
    so an event and the mechanism it claims to describe cannot disagree. Returns None
    for parameters that describe no mechanism of ours.
    """
    mechanism = mechanism_from_description(params)
    if mechanism is None:
        return None
    return (
        mechanism.event()
        if isinstance(mechanism, (GaussianMechanism, ExponentialMechanism))
        else mechanism.step_event()
    )


def mechanism_from_description(
    params: dict[str, Any], *, microbatch_size: int = 1
) -> DPPlan | GaussianMechanism | ExponentialMechanism | None:
    """The plan or mechanism a ledger entry's parameters describe.

    A plan, a Gaussian or an exponential mechanism; None if none of them.

    ``microbatch_size`` only sizes how a rebuilt plan's batches are padded (not
    recorded: it does not change what is released).
    """
    if params.get("mechanism") == "gaussian":
        return GaussianMechanism(
            l2_sensitivity=params["l2_sensitivity"],
            noise_multiplier=params["noise_multiplier"],
            neighboring=Neighboring[params["neighboring"]],
        )
    if params.get("mechanism") == "exponential":
        return ExponentialMechanism(
            epsilon=params["epsilon"],
            sensitivity=params["sensitivity"],
            neighboring=Neighboring[params["neighboring"]],
        )
    if "sampling" not in params or "noise_multipliers" not in params:
        return None
    sampling, n = Sampling(params["sampling"]), params["dataset_size"]
    sampler: Sampler
    if sampling in (Sampling.POISSON, Sampling.TRUNCATED_POISSON):
        sampler = PoissonSampler(
            dataset_size=n,
            sampling_rate=params["sampling_rate"],
            microbatch_size=microbatch_size,
            capacity=params.get("capacity"),
        )
    elif sampling is Sampling.UNIFORM_ONE:
        sampler = UniformOneSampler(dataset_size=n)
    else:
        sampler = FullBatchSampler(dataset_size=n, microbatch_size=microbatch_size)
    return DPPlan(
        sampler=sampler,
        l2_clip_norm=tuple(params["l2_clip_norms"]),
        steps=params["steps"],
        noise_multiplier=tuple(params["noise_multipliers"]),
        neighboring=Neighboring[params["neighboring"]],
        noise=noise_from_description(params.get("noise")),
        adaptive_clipping=(
            AdaptiveClipping(**params["adaptive_clipping"])
            if params.get("adaptive_clipping") is not None
            else None
        ),
    )
