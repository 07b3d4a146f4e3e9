"""spectr_gbv: reference implementation and referee for multi-draft block verification.

Layers (imports go one way): core -> theory -> reference -> simulate -> gpu -> validate -> cli.

The top-level names are loaded on first use (PEP 562), so ``import spectr_gbv`` and
``spectr-gbv --help`` / ``--version`` do not pay for numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_CORE_NAMES = ("Instance", "TabularAR", "default_instance", "load_instance", "random_instance")

if TYPE_CHECKING:
    from spectr_gbv.core import Instance, TabularAR, default_instance, load_instance, random_instance


def __getattr__(name: str) -> Any:
    """Load a top-level name from :mod:`spectr_gbv.core` on first access."""
    if name in _CORE_NAMES:
        import spectr_gbv.core as core

        value = getattr(core, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectr_gbv' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CORE_NAMES))


__all__ = ["Instance", "TabularAR", "__version__", "default_instance", "load_instance", "random_instance"]
