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


def test_every_subpackage_is_an_attribute_imported_on_first_use():
    """Issue 22: ``import privrl_jax`` exposes the subpackages; they load lazily, so
    ``import privrl_jax`` alone does not pull in jax (the CLI's start-up)."""
    import pkgutil
    import subprocess
    import sys

    found = {m.name for m in pkgutil.iter_modules(privrl_jax.__path__) if m.ispkg}
    assert set(privrl_jax.SUBPACKAGES) == {n for n in found if not n.startswith("_")}
    assert set(privrl_jax.SUBPACKAGES) <= set(dir(privrl_jax))
    code = (
        "import sys, privrl_jax\n"
        "assert 'jax' not in sys.modules, 'import privrl_jax pulled in jax'\n"
        "assert callable(privrl_jax.privacy.fit) and 'jax' in sys.modules\n"
        "try:\n"
        "    privrl_jax.nonexistent\n"
        "except AttributeError as e:\n"
        "    assert 'nonexistent' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
