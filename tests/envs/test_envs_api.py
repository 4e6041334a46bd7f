"""Every name in the public `__all__` lists exists."""

import pytest

from privrl_jax import data, envs, pipelines


@pytest.mark.parametrize("module", [envs, data, pipelines])
def test_public_names_exist(module):
    for name in module.__all__:
        assert hasattr(module, name), f"{module.__name__}.{name}"
