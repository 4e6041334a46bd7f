"""The library's public surface stays small and says each thing once.

Every name a subpackage exports is documented in the API reference (tests/test_docs.py);
this file bounds how many there are and forbids one object under two public names.
"""

import importlib
import inspect

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
# 585 public names before the front-door issue, 298 after; growing past this needs a
# reason.
MAX_PUBLIC_NAMES = 300


def _public() -> dict[str, object]:
    names = {}
    for face in FACES:
        module = importlib.import_module(face)
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.ismodule(obj):
                names[f"{face}.{name}"] = obj
    return names


def test_every_exported_name_exists_once():
    for face in FACES:
        module = importlib.import_module(face)
        assert len(set(module.__all__)) == len(module.__all__), face
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{face}: {missing}"


def test_public_surface_is_bounded():
    assert len(_public()) <= MAX_PUBLIC_NAMES


def test_no_object_is_exported_twice():
    seen: dict[int, list[str]] = {}
    for qualname, obj in _public().items():
        # Small constants (ints, strings, tuples) may coincide by value.
        if isinstance(obj, (int, float, str, tuple, frozenset)):
            continue
        seen.setdefault(id(obj), []).append(qualname)
    twice = [names for names in seen.values() if len(names) > 1]
    assert not twice, twice
