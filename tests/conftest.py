"""Session-wide test setup.

Most of the suite's time is XLA compiling the same programs again: every pipeline test
builds its run from scratch, and pytest-xdist's workers cannot share an in-memory jit
cache. JAX's persistent compilation cache shares them through files. Its directory is
made fresh for each pytest session and removed afterwards, so nothing carries over
between runs (a fresh clone sees what CI sees), and a cached executable is the one the
compiler would build again (the key is the program, the jax version and the backend), so
no test can pass because of it. A directory the user set with
``JAX_COMPILATION_CACHE_DIR`` is left alone.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

_OWNED = "PRIVRL_TEST_OWNS_JAX_CACHE"
_FAST_COMPILE = "--xla_backend_optimization_level=0"


def _compile_fast() -> None:
    """Tests compile far more than they run: XLA's backend optimization level 0
    (default 3) cuts the suite's compile time by ~40% (measured side by side: 108 s ->
    65 s for three compile-bound files). It lowers how hard the CPU backend (LLVM)
    optimises the generated code; fast-math stays off (XLA's default), and the whole
    suite, its bit-exact comparisons included, passed at both levels. A level the user
    set is kept. Users' runs and benchmarks/ compile at XLA's default level."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_FAST_COMPILE}".strip()


def pytest_configure(config) -> None:
    # Runs in the controller before xdist starts its workers, which inherit the
    # environment, so one directory serves them all (and the subprocesses that
    # multi-host tests start).
    if hasattr(config, "workerinput"):
        return
    _compile_fast()
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(
        prefix="privrl-jax-cache-"
    )
    # The owner's pid, not a flag: a pytest this session starts in a subprocess (the
    # sdist test) inherits the environment and must not delete the directory.
    os.environ[_OWNED] = str(os.getpid())
    # Cache every program: the tiny test configs compile many programs well under jax's
    # 1 s default.
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    if (
        "jax" in sys.modules
    ):  # imported before us (by a plugin): jax read its config already
        import jax

        jax.config.update(
            "jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"]
        )
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(_OWNED) != str(os.getpid()):
        return
    del os.environ[_OWNED]
    shutil.rmtree(os.environ.pop("JAX_COMPILATION_CACHE_DIR"), ignore_errors=True)
