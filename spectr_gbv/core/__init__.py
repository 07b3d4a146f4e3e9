"""Shared types: tabular autoregressive models, instances, exact/float helpers.

The names below are loaded on first use (PEP 562): importing a light submodule such as
:mod:`spectr_gbv.core.progress` does not import numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spectr_gbv.core.instance import (
        Instance,
        default_instance,
        load_instance,
        parse_instance,
        random_instance,
    )
    from spectr_gbv.core.numbers import FLOAT_ROW_ATOL, format_value, json_value
    from spectr_gbv.core.tabular import TabularAR

_SOURCES = {
    "Instance": "instance",
    "default_instance": "instance",
    "load_instance": "instance",
    "parse_instance": "instance",
    "random_instance": "instance",
    "FLOAT_ROW_ATOL": "numbers",
    "format_value": "numbers",
    "json_value": "numbers",
    "TabularAR": "tabular",
}


def __getattr__(name: str) -> Any:
    """Load a name from its submodule on first access."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'spectr_gbv.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"spectr_gbv.core.{source}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))


__all__ = [
    "FLOAT_ROW_ATOL",
    "Instance",
    "TabularAR",
    "default_instance",
    "format_value",
    "json_value",
    "load_instance",
    "parse_instance",
    "random_instance",
]
