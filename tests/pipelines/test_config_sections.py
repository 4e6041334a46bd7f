"""`_config.Section`: a section's BOUNDS are checked when it is built, from YAML or in
Python, under its SECTION key; the pipelines' top-level checks that only repeated a
section's ranges are gone, and those values still get the section's one line."""

import dataclasses
from typing import ClassVar

import pytest

from privrl_jax.pipelines import _config, gpope, pool
from privrl_jax.pipelines._gpope_config import GPOPEConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Toy(_config.Section):
    n: int = 1
    rates: tuple[float, ...] = (0.5,)

    BOUNDS: ClassVar[dict[str, _config.Bound]] = {
        "n": _config.at_least(1, 10),
        "rates": _config.UNIT,
    }
    SECTION = "toy"


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Sub(_Toy):
    extra: float = 1.0

    BOUNDS: ClassVar[dict[str, _config.Bound]] = {"extra": _config.positive()}

    def __post_init__(self):
        super().__post_init__()
        if self.extra > self.n:
            raise ValueError("toy.extra must be <= toy.n.")


def test_a_section_checks_its_bounds_and_its_bases_under_its_key():
    assert [f.name for f in dataclasses.fields(_Toy)] == ["n", "rates"]
    with pytest.raises(ValueError, match=r"^toy.n must be an integer in \[1, 10\]"):
        _Toy(n=0)
    with pytest.raises(
        ValueError, match=r"toy.rates must be a number in \[0, 1\] each"
    ):
        _Toy(rates=(0.5, 2.0))
    # A subclass: the base's table first, then its own, then its own checks.
    with pytest.raises(ValueError, match="toy.n must be"):
        _Sub(n=11)
    with pytest.raises(ValueError, match=r"toy.extra must be a number > 0; got 0.0"):
        _Sub(extra=0.0)
    with pytest.raises(ValueError, match="toy.extra must be <= toy.n"):
        _Sub(extra=2.0)
    # Built in Python like a loaded one: GPOPE's section.
    with pytest.raises(ValueError, match=r"^gpope.step_size must be a number > 0"):
        GPOPEConfig(step_size=0.0)


@pytest.mark.parametrize(
    ("load", "name", "override", "line"),
    [
        (
            gpope.load,
            "gpope/chain",
            "env.gamma=1.0",
            "env.gamma must be a number in [0, 1); got 1.0.",
        ),
        (
            gpope.load,
            "gpope/chain",
            "gpope.l2_clip_norm=.inf",
            "gpope.l2_clip_norm must be a number > 0; got inf.",
        ),
        (
            gpope.load,
            "gpope/mc_test",
            "env.behaviour_epsilon=0",
            "env.behaviour_epsilon must be a number in (0, 1]; got 0.0.",
        ),
        (
            gpope.load,
            "gpope/mc_test",
            "truth.eval_max_steps=-1",
            "truth.eval_max_steps must be an integer in [0, 10,000,000]; got -1.",
        ),
        (
            pool.load,
            "pool/test",
            "env.boundary=.nan",
            "env.boundary must be a number in (0, 1,000,000]; got nan.",
        ),
        (
            pool.load,
            "pool/test",
            "pool.failure_prob=1",
            "pool.failure_prob must be a number in (0, 1); got 1.0.",
        ),
        (
            pool.load,
            "pool/test",
            "eval.saa_levels=1",
            "eval.saa_levels must be an integer in [2, 1,000,000]; got 1.",
        ),
    ],
)
def test_values_the_folded_checks_read_get_the_sections_line(
    load, name, override, line
):
    with pytest.raises(ValueError) as err:
        load(name, [override])
    assert str(err.value) == line
