"""The state of one validation run, and how it records a verifier that raises or hangs.

``_Run`` holds the adapter, the report, the structural tally and the first failure on a
valid input; ``_Run.guarded`` runs a phase and records a raise (the run continues) or a
timeout or exit (the run stops with ``_Stop``). ``_LAW_CHECKS`` names the law checks
a reused uniform can explain.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spectr_gbv.validate.checks import structural
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.report.results import CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport

_LAW_CHECKS = (
    "exact_defect",
    "reference_law",
    "reference_law_exact",
    "end_to_end_law",
    "positional_law",
    "adversarial_search",
)


class _Stop(Exception):
    """The verifier hung: stop the run (the failure is already recorded)."""


class _Run:
    """State of one validation run."""

    def __init__(self, adapter: Adapter, report: ValidationReport) -> None:
        self.adapter = adapter
        self.report = report
        self.tally = structural.StructuralTally()
        self.crash: CheckResult | None = None
        self.reuse_seen = False
        self.conventions: tuple[str, ...] = ()

    def add(self, *checks: CheckResult) -> None:
        self.report.checks.extend(checks)

    def guarded(self, name: str, spec: dict[str, Any] | None, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call ``fn``; record a raise (run continues) or a timeout or exit (run stops)."""
        try:
            return fn(*args, **kw)
        except VerifierFailure as err:
            if isinstance(err, VerifierTimedOut) or getattr(err, "diagnosis", "") == "exits":
                self.crash = structural.failure_result("runs", "robustness", err, spec)
                self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")
                raise _Stop from err
            self.record_raise(name, err, spec)
            self.report.notes.append(f"{name}: skipped, the verifier raised ({err})")
            return None

    def record_raise(self, name: str, err: VerifierFailure, spec: dict[str, Any] | None) -> None:
        """Keep the first exception on a valid input as the failed ``runs`` check."""
        if self.crash is None:
            self.crash = structural.failure_result("runs", "robustness", err, spec)
            self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")
