"""Helper of the deprecated flat import paths of :mod:`spectr_gbv.gpu` (issue 15, kept one release).

Nothing in the package imports a deprecated path; only the shim modules import this helper.
"""

import importlib
import types
from typing import Any


def reexport(namespace: dict[str, Any], modules: list[str]) -> list[str]:
    """Copy the public names of ``modules`` into a shim's ``namespace``.

    Parameters
    ----------
    namespace : dict
        The shim module's ``globals()``.
    modules : list of str
        Dotted names of the new modules, in order (a later module's name wins).

    Returns
    -------
    list of str
        The names copied (the shim's ``__all__``): a module's ``__all__`` when it has one, else
        every name not starting with ``_`` that is not a module.
    """
    names: list[str] = []
    for dotted in modules:
        module = importlib.import_module(dotted)
        public = getattr(module, "__all__", None)
        if public is None:
            public = [
                n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)
            ]
        for name in public:
            namespace[name] = getattr(module, name)
            if name not in names:
                names.append(name)
    return names
