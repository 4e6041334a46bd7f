"""The public package imports and exposes its version."""

import privrl_jax


def test_version_is_semver():
    major, minor, patch = privrl_jax.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))
