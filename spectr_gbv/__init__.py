"""spectr_gbv: reference implementation and referee for multi-draft block verification.

Layers (imports go one way): core -> theory -> reference -> simulate -> gpu -> validate -> testing
(the library), then its applications: ledger (the claims and the report) -> sweep -> realpair (the
real-pair benchmark) -> examples -> cli.

The top-level names are loaded on first use (PEP 562), so ``import spectr_gbv`` and
``spectr-gbv --help`` / ``--version`` do not pay for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectr_gbv.core.lazy import lazy_getattr

__version__ = "0.1.0"

_CORE_NAMES = ("Instance", "TabularAR", "default_instance", "load_instance", "random_instance")

if TYPE_CHECKING:
    from spectr_gbv.core import Instance, TabularAR, default_instance, load_instance, random_instance


__getattr__ = lazy_getattr("spectr_gbv", dict.fromkeys(_CORE_NAMES, "core"), globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CORE_NAMES))


__all__ = ["Instance", "TabularAR", "__version__", "default_instance", "load_instance", "random_instance"]
