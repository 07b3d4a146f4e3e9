"""Sphinx configuration of the spectr_gbv documentation (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

import spectr_gbv

project = "spectr_gbv"
author = "spectr_gbv developers"
release = spectr_gbv.__version__
version = release

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "project/ECOSYSTEM.md", "results/bench_quick/*.csv", "results/bench_quick/*.json"]

# Markdown pages: GitHub-style anchors for in-page links, $...$ math as in THEORY.md.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# Docstrings are numpydoc (see ../shared/STYLE.md); types are written in the docstrings,
# so the signatures stay short.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = "spectr_gbv"

# Every cross-reference must resolve (``-n``): a renamed function breaks the build.
nitpicky = True
# No network in CI, so no intersphinx: references into other projects are not checked.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|scipy|torch|transformers|hypothesis|math|collections|abc|numbers|fractions|typing)(\..*)?"),
    (r"py:class", r"Fraction"),
]


def _documented_target(env, target: str, module: str | None) -> str | None:  # noqa: ANN001
    """Where ``target`` is documented: the defining module of a re-export, else a unique suffix.

    The docstrings name public objects by their import path (``spectr_gbv.core.Instance``) or
    by a name imported into the current module (``FLOAT_ROW_ATOL`` in ``core.tabular``);
    autodoc documents each object once, in its defining module. A name that matches nothing,
    or more than one documented object, stays unresolved and fails the build.
    """
    import importlib

    objects = env.get_domain("py").objects
    candidates = [target] if target.startswith("spectr_gbv.") else [f"{module}.{target}"] if module else []
    for dotted in candidates:
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except (ImportError, AttributeError):
                continue
            name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
            if name in objects:
                return name
            break
    if target.startswith("spectr_gbv."):
        return None
    matches = [name for name in objects if name.endswith("." + target)]
    return matches[0] if len(matches) == 1 else None


def _resolve_reexport(app, env, node, contnode):  # noqa: ANN001, ANN202 (Sphinx event signature)
    """``missing-reference`` handler: retry a Python reference at :func:`_documented_target`."""
    if node.get("refdomain") != "py":
        return None
    name = _documented_target(env, node.get("reftarget", ""), node.get("py:module"))
    if name is None:
        return None
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, node, contnode)


def setup(app):  # noqa: ANN001, ANN201 (Sphinx hook)
    """Register the re-export resolver."""
    app.connect("missing-reference", _resolve_reexport)
