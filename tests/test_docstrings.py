"""Every public name renders in the API reference with what a caller needs.

Google style (ruff's D rules, pyproject): a public function documents its parameters
under ``Args:`` and what it returns under ``Returns:`` (``Yields:`` for generators);
a public class has a docstring.
"""

import importlib
import inspect
import types

import pytest

# Every public face of the package.
FACES = [
    "privrl_jax.privacy",
    "privrl_jax.privacy.audit",
    "privrl_jax.data",
    "privrl_jax.envs",
    "privrl_jax.diffusion",
    "privrl_jax.synth",
    "privrl_jax.agents",
    "privrl_jax.eval",
    "privrl_jax.ope",
    "privrl_jax.planning",
    "privrl_jax.pipelines",
    "privrl_jax.experiments",
]


def missing_sections(obj) -> list[str]:
    """The sections `obj`'s docstring lacks (empty when it is complete)."""
    if getattr(obj, "__module__", "") == "typing" or isinstance(
        obj, types.GenericAlias | types.UnionType
    ):
        # A type alias (Literal[...], X | Y, Callable[...]): no function, and no
        # docstring of its own to hold sections (docs/conf.py lists it as data).
        return []
    doc = inspect.getdoc(obj) or ""
    if not doc:
        return ["docstring"]
    if inspect.isclass(obj) or not callable(obj):
        return []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    lacks = []
    params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")]
    if params and "Args:" not in doc:
        lacks.append("Args")
    returns = sig.return_annotation
    if returns not in (inspect.Signature.empty, None, "None") and not (
        "Returns:" in doc or "Yields:" in doc
    ):
        lacks.append("Returns")
    return lacks


@pytest.mark.parametrize("face", FACES)
def test_public_functions_document_args_and_returns(face):
    module = importlib.import_module(face)
    gaps = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue
        lacks = missing_sections(obj)
        if lacks:
            gaps[name] = lacks
    assert not gaps, f"{face}: {gaps}"
