"""Lazy package exports (PEP 562): a package's public names are imported on first access.

Used by ``spectr_gbv``, :mod:`spectr_gbv.core` and the :mod:`spectr_gbv.gpu` packages, so
that importing a package (``spectr-gbv --help``, a base install without torch) does not
import numpy or torch until a name that needs them is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` from its submodule on first access.

    Parameters
    ----------
    package : str
        Dotted name of the package (its ``__name__``).
    exports : mapping of str to str
        Public name -> submodule path relative to ``package`` (e.g. ``"decoding.sampling"``).
    namespace : dict
        The package's ``globals()``: a loaded name is cached there, so later accesses are plain
        attribute lookups.

    Returns
    -------
    callable
        ``__getattr__(name)``; raises ``AttributeError`` for a name not in ``exports``.
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{source}"), name)
        namespace[name] = value
        return value

    return __getattr__


__all__ = ["lazy_getattr"]
