"""Private selection's configuration (``privrl select``).

Which pipeline's grid, how each candidate is scored, how many runs, and the whole
search's budget. A config (``configs/select/*.yaml``)::

    candidates:
      pipeline: gpope            # the pipeline whose configurations are the candidates
      config: gpope/chain        # its base config (a shipped name or a YAML file)
      overrides: {gpope.steps: 500}           # applied to every candidate
      grid:                      # the candidates: the product of these values
        gpope.l2_clip_norm: [0.1, 0.5]
        gpope.step_size: [0.5, 2.0]
    score: {l2_clip_norm: 1.0, noise_multiplier: 2.0}
    repetitions: {distribution: logarithmic, mean: 4}
    privacy: {epsilon: 4.0, delta: 1.0e-5}   # the budget of the WHOLE search
    audit: {every_candidate: true}

Each candidate's own ``privacy.epsilon`` (in its base config or ``overrides``) is what
one run is calibrated to; ``privacy`` here is the run directory's budget, which the
selection's epsilon (about 1.5-3 times one run's) must fit.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar

from privrl_jax.pipelines._config import (
    MAX_COUNT,
    Bound,
    ConfigSource,
    Section,
    at_least,
    check_modes,
    load_config,
    positive,
    qualify_config,
)
from privrl_jax.pipelines._sections import PrivacyConfig

C = TypeVar("C")

DEFAULTS = "select/defaults"

Pipeline = Literal["gpope", "privorl_n", "maze_agent"]
PIPELINES = typing.get_args(Pipeline)
Distribution = Literal[
    "logarithmic", "geometric", "truncated_negative_binomial", "poisson"
]
# A candidate's config keys a grid may not vary: they change the sensitive data (its
# source or size) or fix the noise, and a selection is over one data set. The policy
# evaluated (the target) may vary: choosing it is policy selection.
FIXED_PREFIXES = ("env.", "data.", "seed", "privacy.noise_seed", "privacy.delta")
POLICY_KEYS = ("env.target_treat", "env.target_epsilon")
# A maze agent's ``seed`` is its training key: the agents train on the public release,
# so a grid may vary it (the sensitive data are the ``maze`` section's).
TRAINING_KEYS = {"maze_agent": ("seed",)}
ScoreKind = Literal["td_error", "value", "coverage", "sliced_wasserstein"]
# The kinds that score a PrivORL-n release on the sensitive transitions.
SYNTH_KINDS = ("coverage", "sliced_wasserstein")
MAX_CANDIDATES = 1_000


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``.

    ``--set`` nests dotted keys; files may write them dotted.

    Args:
      tree: a mapping whose values may be mappings.
      prefix: prepended to every key (with its trailing dot).

    Returns:
      The dotted key -> leaf value, in the tree's order.
    """
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _yaml_value(value: Any) -> str:
    """``value`` as the YAML text of a ``--set`` override."""
    import json  # noqa: PLC0415

    if isinstance(value, float) and math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return json.dumps(value)  # JSON is YAML: lists, strings, numbers, booleans


@dataclasses.dataclass(frozen=True, kw_only=True)
class CandidatesConfig:
    """The grid of candidates.

    Attributes:
      pipeline: the pipeline whose configurations are the candidates.
      config: its base config.
      overrides: applied to every candidate.
      grid: config key -> list of values; the candidates are their product, in the
        file's order.
      runs_dir: PrivORL-n candidates only: where their runs go, relative to the
        selection's run directory (None: its ``checkpoints/select/runs``). Selections
        with the same grid and noise seed that name one folder read each other's
        finished runs back (e.g. two scores compared on the same runs); a simulation
        only, so it needs ``privacy.noise_seed``.
    """

    pipeline: Pipeline = "gpope"
    config: str = "gpope/chain"
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    grid: dict[str, Any] = dataclasses.field(default_factory=dict)
    runs_dir: str | None = None

    # None runs each candidate in the selection's own folder, as before the field.
    HASH_NEUTRAL: ClassVar[dict[str, Any]] = {"runs_dir": None}

    def __post_init__(self):
        for name in ("overrides", "grid"):
            if not isinstance(getattr(self, name), Mapping):
                raise ValueError(  # noqa: TRY004 -- the CLI's one-line errors
                    f"candidates.{name} must be a mapping of config keys; got "
                    f"{getattr(self, name)!r}."
                )
        grid = flatten(self.grid)
        for key, values in grid.items():
            if not isinstance(values, list) or not values:
                raise ValueError(
                    f"candidates.grid.{key} must be a non-empty list of values; got "
                    f"{values!r}."
                )
            free = (*POLICY_KEYS, *TRAINING_KEYS.get(self.pipeline, ()))
            if key.startswith(FIXED_PREFIXES) and key not in free:
                raise ValueError(
                    f"candidates.grid.{key}: a grid may not vary {key} (it changes "
                    "the sensitive data or fixes the noise); set it in "
                    "candidates.overrides."
                )
        if self.num_candidates > MAX_CANDIDATES:
            raise ValueError(
                f"candidates.grid has {self.num_candidates} candidates, more than "
                f"{MAX_CANDIDATES}; use fewer values."
            )

    @property
    def num_candidates(self) -> int:
        return math.prod(len(v) for v in flatten(self.grid).values())

    def candidates(self) -> list[dict[str, Any]]:
        """Each candidate's grid values.

        Returns:
          One mapping (config key -> value) per candidate, in product order.
        """
        grid = flatten(self.grid)
        keys = list(grid)
        return [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*grid.values())
        ]

    def load_each(
        self, load: Callable[[str, list[str]], C], extra: Sequence[str] = ()
    ) -> list[C]:
        """Every candidate's config, through its pipeline's ``load``.

        Args:
          load: the candidates' pipeline's ``load(config, overrides)``.
          extra: overrides applied after each candidate's (e.g. what no candidate
            run needs).

        Returns:
          One config per candidate, in the grid's product order.

        Raises:
          ValueError: a bad grid key or value (naming the candidate).
        """
        base = str(qualify_config(self.config, self.pipeline))
        out = []
        for cand in self.candidates():
            try:
                out.append(load(base, [*self.overrides_for(cand), *extra]))
            except ValueError as err:
                raise ValueError(f"candidate {cand}: {err}") from None
        return out

    def overrides_for(self, candidate: Mapping[str, Any]) -> list[str]:
        """The ``section.key=value`` overrides of one candidate.

        Args:
          candidate: its grid values (one of `candidates`).

        Returns:
          The shared overrides, then its grid values.
        """
        values = {**flatten(self.overrides), **candidate}
        return [f"{k}={_yaml_value(v)}" for k, v in values.items()]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScoreConfig(Section):
    """Each run's DP score.

    ``kind: td_error`` (choosing hyper-parameters): the negative squared norm of the
    noisy mean of the per-trajectory TD directions ``b_i - A_i theta`` (the norm of the
    expected TD update, zero at the TD fixed point), each clipped to ``l2_clip_norm``
    and the sum released with Gaussian noise of std ``noise_multiplier`` times its
    sensitivity. ``kind: value`` (choosing a policy, chain only: grid over
    ``env.target_treat``): the estimated value of the candidate's target policy at the
    chain's public start distribution, ``initial . Phi theta``: post-processing of the
    DP theta, so it costs nothing more (the other keys are ignored). ``kind: coverage``
    (PrivORL-n grids, the only kind they take): minus the noisy mean over the
    sensitive transitions of each one's distance to its nearest synthetic transition,
    clipped to ``l2_clip_norm`` (``select.privorl_n.dp_coverage_score``). ``kind:
    sliced_wasserstein`` (PrivORL-n grids): minus a sliced Wasserstein distance between
    the sensitive transitions and the release, from a DP histogram of the sensitive
    rows' projections on ``num_projections`` public directions, each clipped to
    [-``l2_clip_norm``, ``l2_clip_norm``] and counted on ``bins`` bins
    (``select.sw_score``).
    """

    kind: ScoreKind = "td_error"
    l2_clip_norm: float = 1.0
    noise_multiplier: float = 2.0
    num_projections: int = 16
    bins: int = 16

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "l2_clip_norm": positive(),
        "noise_multiplier": positive(),
        "num_projections": at_least(1, MAX_COUNT),
        "bins": at_least(2, MAX_COUNT),
    }

    SECTION = "score"

    def hash_neutral(self) -> Mapping[str, Any]:
        """The sliced Wasserstein keys at their defaults where another kind runs."""
        if self.kind == "sliced_wasserstein":
            return {}
        return {"num_projections": 16, "bins": 16}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MazeScoreConfig(Section):
    """Maze policy selection (``candidates.pipeline: maze_agent``) only.

    The sensitive data: ``trajectories`` (m, public) streams of ``env``'s D4RL expert
    protocol (action noise ``action_noise``, key ``seed``), ``horizon`` (T) steps each;
    one trajectory is one privacy unit. The score: a candidate agent's value at the
    maze's reset distribution (``starts`` public draws from key ``start_seed``) with
    discount ``discount``, by GPOPE on state-action features (``centers`` RBF centres,
    k-means of the public release's observations, crossed with ``action_bins`` bins
    per action dimension; null: the linear cross): Poisson sampling of expected
    ``batch_size`` trajectories, clip ``l2_clip_norm``, ``steps`` steps of size
    ``step_size``, calibrated to ``epsilon`` at ``privacy.delta``. The audit's truth
    (NOT DP, model access): the mean discounted return of ``truth_episodes`` rollouts
    of ``truth_steps`` steps from resets (key ``truth_seed``).
    """

    env: str = "maze2d-umaze"
    trajectories: int = 400
    horizon: int = 50
    seed: int = 0
    action_noise: float = 0.5
    discount: float = 0.9
    centers: int = 16
    action_bins: int | None = 3
    starts: int = 256
    start_seed: int = 5
    epsilon: float = 2.0
    steps: int = 1_000
    batch_size: float = 20.0
    l2_clip_norm: float = 1.0
    step_size: float = 0.5
    truth_episodes: int = 512
    truth_steps: int = 100
    truth_seed: int = 7

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "trajectories": at_least(2, 1_000_000),
        "horizon": at_least(1, 10_000),
        "action_noise": at_least(0.0, 1e3),
        "discount": Bound(0.0, 1.0, high_open=True),
        "centers": at_least(1, 10_000),
        "action_bins": at_least(1, 100),
        "starts": at_least(1, 1_000_000),
        "epsilon": positive(),
        "steps": at_least(1, 10_000_000),
        "batch_size": positive(),
        "l2_clip_norm": positive(),
        "step_size": positive(),
        "truth_episodes": at_least(1, 1_000_000),
        "truth_steps": at_least(1, 10_000),
    }

    SECTION = "maze"

    def __post_init__(self):
        """Check the ranges, and that the expected batch fits in m."""
        super().__post_init__()
        if self.batch_size > self.trajectories:
            raise ValueError(
                f"maze.batch_size={self.batch_size} (expected trajectories per step) "
                f"must be at most maze.trajectories={self.trajectories}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class RepetitionsConfig(Section):
    """The public distribution of the number of runs K.

    Attributes:
      distribution: the distribution's family.
      mean: E[K] >= 1.
      eta: the truncated negative binomial's shape (that distribution only).
    """

    distribution: Distribution = "logarithmic"
    mean: float = 4.0
    eta: float = 0.5

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "mean": at_least(1.0, MAX_COUNT),
        "eta": at_least(0.0, 1e3),
    }

    SECTION = "repetitions"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectAuditConfig:
    """What the audit (NOT DP: never publish) measures beside the selection.

    Attributes:
      every_candidate: also run every candidate once with an audit key and measure
        its true error (NOT DP: the oracle choice; never publish).
      stand_in_at_total_epsilon: PrivORL-n grids with ``every_candidate``: also run
        the stand-in candidate (the base config's values) once, calibrated to the whole
        selection's epsilon, for a comparison at equal total epsilon.
    """

    every_candidate: bool = True
    stand_in_at_total_epsilon: bool = False

    # False runs no extra stand-in, as before the field.
    HASH_NEUTRAL: ClassVar[dict[str, Any]] = {"stand_in_at_total_epsilon": False}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectRunConfig:
    """Everything ``privrl select`` needs (module doc)."""

    candidates: CandidatesConfig = CandidatesConfig()  # noqa: RUF009 -- frozen
    score: ScoreConfig = ScoreConfig()
    repetitions: RepetitionsConfig = RepetitionsConfig()
    privacy: PrivacyConfig = PrivacyConfig()  # noqa: RUF009 -- frozen: one shared default is safe
    audit: SelectAuditConfig = SelectAuditConfig()

    def __post_init__(self):
        check_modes(self)
        if not flatten(self.candidates.grid):
            raise ValueError(
                "candidates.grid is empty: give at least one config key and its "
                "values, e.g. candidates.grid.gpope.step_size=[0.5,2]."
            )
        gpope_kinds = ("td_error", "value")
        synth = self.candidates.pipeline == "privorl_n"
        if synth != (self.score.kind in SYNTH_KINDS):
            raise ValueError(
                f"score.kind={self.score.kind} does not score "
                f"{self.candidates.pipeline} candidates: gpope takes "
                f"{' or '.join(gpope_kinds)}, privorl_n {' or '.join(SYNTH_KINDS)}."
            )
        if self.candidates.runs_dir is not None and (
            not synth or self.privacy.noise_seed is None
        ):
            raise ValueError(
                "candidates.runs_dir shares PrivORL-n candidate runs between "
                "simulated selections: it needs candidates.pipeline=privorl_n and "
                "privacy.noise_seed (a private selection keeps its runs secret, in its "
                "own checkpoints/)."
            )
        if self.candidates.pipeline == "maze_agent" and not isinstance(
            self, MazeSelectRunConfig
        ):
            raise ValueError(
                "maze_agent candidates need the maze section: load the config with "
                "select.load (a MazeSelectRunConfig)."
            )
        if self.candidates.pipeline == "maze_agent" and self.score.kind != "value":
            raise ValueError(
                "maze_agent candidates are scored by their value (score.kind=value); "
                f"got score.kind={self.score.kind}."
            )
        if self.privacy.accountant != "rdp":
            raise ValueError(
                "privacy.accountant must be rdp: dp-accounting accounts a repeated "
                "selection (RepeatAndSelectDpEvent) with its RDP accountant only."
            )
        if math.isinf(self.privacy.epsilon):
            raise ValueError(
                "privacy.epsilon must be finite: it is the budget the whole search "
                "must fit."
            )
        if not isinstance(self.audit.every_candidate, bool):
            raise ValueError(  # noqa: TRY004
                "audit.every_candidate must be true or false; got "
                f"{self.audit.every_candidate!r}."
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class MazeSelectRunConfig(SelectRunConfig):
    """A maze policy selection's config: the selection's, plus the ``maze`` section.

    A subclass, so that the other selections' resolved configs (and the stored rows
    keyed by their hash) do not change.
    """

    maze: MazeScoreConfig = MazeScoreConfig()

    def __post_init__(self):
        super().__post_init__()
        if self.candidates.pipeline != "maze_agent":
            raise ValueError(
                "the maze section is for candidates.pipeline=maze_agent only; got "
                f"{self.candidates.pipeline}."
            )


def load(
    path: ConfigSource | None = None, overrides: list[str] = ()
) -> SelectRunConfig:
    """Loads a selection config.

    Args:
      path: a YAML file or a shipped name (``"select/gpope_chain"``); None: the
        defaults.
      overrides: ``section.key=value`` overrides, applied last.

    Returns:
      The checked config.

    Raises:
      ValueError: a missing config, bad YAML, an unknown key or a bad value (one line).
    """
    # A maze selection's class has the maze section; every other selection's does not
    # (its resolved config stays what it was). Try the maze one first.
    try:
        return load_config(MazeSelectRunConfig, path, overrides, defaults=DEFAULTS)
    except ValueError as maze_err:
        try:
            return load_config(SelectRunConfig, path, overrides, defaults=DEFAULTS)
        except ValueError as err:
            # A maze config's error is the maze class's (the base refuses its maze
            # section or its pipeline).
            raise (maze_err if "maze" in str(err) else err) from None
