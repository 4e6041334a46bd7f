"""The public names of diffusion/, synth/ and eval/ exist and are documented."""

import importlib

import pytest


@pytest.mark.parametrize("package", ["diffusion", "synth", "eval"])
def test_public_names_exist_and_have_docstrings(package):
    module = importlib.import_module(f"privrl_jax.{package}")
    # Every module's __all__ order is checked by the lint (ruff's RUF022,
    # tests/test_lint.py), not here.
    for name in module.__all__:
        obj = getattr(module, name)
        if callable(obj):
            assert obj.__doc__, f"privrl_jax.{package}.{name} has no docstring"
