"""The public package imports and exposes its version."""

import privrl_jax


def test_version_is_semver():
    major, minor, patch = privrl_jax.__version__.split(".")
    assert all(part.isdigit() for part in (major, minor, patch))


def test_provenance_names_the_installed_stack():
    import importlib.metadata
    import json

    info = privrl_jax.provenance()
    json.dumps(info)  # JSON-ready
    for name in ("jax", "flax", "optax", "dp-accounting", "numpy"):
        assert info["versions"][name] == importlib.metadata.version(name)
    assert info["versions"]["privrl_jax"] == privrl_jax.__version__
    # The instruction sets a CPU result depends on (issue 26), a subset of the known.
    assert set(info["cpu_isa"]) <= set(privrl_jax._provenance.ISA_FLAGS)
