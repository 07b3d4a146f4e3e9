"""Shared types: tabular autoregressive models, instances, exact/float helpers.

The names below are loaded on first use (PEP 562): importing a light submodule such as
:mod:`spectr_gbv.core.progress` does not import numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectr_gbv.core.lazy import lazy_getattr

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


__getattr__ = lazy_getattr(__name__, _SOURCES, globals())


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
