"""simulate layer: exact one-iteration simulation of the reference verifiers."""

from spectr_gbv.simulate.exact import (
    FLOAT_DEFECT_TOL,
    MAX_DRAFT_TUPLES,
    EnumerationTooLargeError,
    ExactResult,
    expected_accepted,
    simulate_exact,
    validity_defect,
)

__all__ = [
    "FLOAT_DEFECT_TOL",
    "MAX_DRAFT_TUPLES",
    "EnumerationTooLargeError",
    "ExactResult",
    "expected_accepted",
    "simulate_exact",
    "validity_defect",
]
