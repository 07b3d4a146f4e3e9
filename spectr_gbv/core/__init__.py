"""Shared types: tabular autoregressive models, instances, exact/float helpers."""

from spectr_gbv.core.instance import (
    Instance,
    default_instance,
    load_instance,
    parse_instance,
    random_instance,
)
from spectr_gbv.core.numbers import FLOAT_ROW_ATOL, format_value, json_value
from spectr_gbv.core.tabular import TabularAR

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
