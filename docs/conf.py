"""Sphinx configuration: the privrl_jax documentation site.

Built with ``sphinx-build -W docs docs/_build/html`` (``pip install -e ".[docs]"``).
Pages are Markdown (MyST); the tutorials are MyST notebooks that myst-nb executes at
every build, at tiny size, so a tutorial that stops working fails the build.
"""

import os
import re
import sys
from pathlib import Path

import privrl_jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

project = "privrl_jax"
author = "privrl_jax developers"
copyright = "privrl_jax developers"  # noqa: A001  (Sphinx's name for it)
release = version = privrl_jax.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

source_suffix = {".md": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    ".jupyter_cache",
    "**.ipynb_checkpoints",
]

# The tutorials run at every build (a broken one fails it), each in its own kernel.
nb_execution_mode = os.environ.get("PRIVRL_DOCS_EXECUTE", "force")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# Google-style docstrings.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {
    "members": True,
    "undoc-members": True,  # constants and type aliases: every public name is listed
    "imported-members": True,  # a subpackage exports what its _modules define
    "show-inheritance": False,
}
# A NamedTuple's "Attributes:" become :ivar: fields, not a second description of the
# fields autodoc already documents.
napoleon_use_ivar = True

_LITERAL = re.compile(r"(``.*?``)")


def _escape_bars(app, what, name, obj, options, lines):
    """Docstrings write |x| for an absolute value; reST would read a substitution."""
    for i, line in enumerate(lines):
        if "|" in line and not line.lstrip().startswith(("+-", "+=")):
            parts = _LITERAL.split(line)
            lines[i] = "".join(
                p if p.startswith("``") else p.replace("|", "\\|") for p in parts
            )


_RESULTS_TOC = re.compile(
    r"```\{toctree\}\n:maxdepth: 1\n:caption: Results\n.*?```\n", re.S
)


def _drop_empty_results(app, docname, source):
    """results/ holds pages a program writes from stored results; until it has one,
    the index lists none (an empty glob is a warning, and warnings fail the build)."""
    if docname == "index" and not list(Path(app.srcdir, "results").glob("*.md")):
        source[0] = _RESULTS_TOC.sub("", source[0])


_AUTOMODULE = re.compile(r"\.\. automodule:: ([\w.]+)")


def _add_constants(app, docname, source):
    """automodule lists the classes and functions a subpackage exports, but not its
    constants and type aliases (values defined in a private module); this appends them,
    so every name in ``__all__`` has an entry."""
    match = _AUTOMODULE.search(source[0]) if docname.startswith("api/") else None
    if match is None:
        return
    import importlib
    import inspect
    import types

    name = match.group(1)
    module = importlib.import_module(name)
    lines = []
    for attr in module.__all__:
        obj = getattr(module, attr)
        alias = getattr(obj, "__module__", "") == "typing" or isinstance(
            obj, types.GenericAlias | types.UnionType
        )
        if inspect.isclass(obj) or inspect.ismodule(obj):
            continue
        if callable(obj) and not alias:
            continue  # functions: automodule has them
        # py:data, not autodata: a constant has no docstring of its own, and autodata
        # would show its type's (dict's, tuple's).
        lines += [f".. py:data:: {attr}", f"   :module: {name}"]
        if not alias:
            lines.append(f"   :type: {type(obj).__name__}")
        value = repr(obj).replace("\n", " ")
        if len(value) <= 100:
            lines.append(f"   :value: {value}")
        lines.append("")
    if lines:
        block = "\n".join(lines)
        source[0] += (
            f"\n## Constants and type aliases\n\n```{{eval-rst}}\n{block}\n```\n"
        )


def setup(app):
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("source-read", _add_constants)
    app.connect("source-read", _drop_empty_results)


html_theme = "furo"
html_title = f"privrl_jax {version}"

suppress_warnings = [
    # Pages link to files outside docs/ (benchmarks/README.md, source files) by their
    # repository paths; on the site those stay plain links.
    "myst.xref_missing",
    # A results page written by another program may start below level 1.
    "myst.header",
]
