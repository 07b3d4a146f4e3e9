"""The state of one validation run, and how it records a verifier that raises or hangs.

:class:`RunContext` is what every phase of a run reads and writes: the adapter, the report, the
structural tally, the verifier, the battery, the run's :class:`~spectr_gbv.validate.harness.options.ValidateOptions`,
the first failure on a valid input, and what one phase hands the next (the exact outcome, the
significance plan). :meth:`RunContext.guarded` runs a step of a phase and records a raise (the run
continues) or a timeout or exit (the run stops with :class:`RunStopped`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks import structural
from spectr_gbv.validate.harness.options import ValidateOptions
from spectr_gbv.validate.harness.phase_exact import ExactOutcome
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.report.results import CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport


class RunStopped(Exception):
    """The verifier hung or exited: stop the run (the failure is already recorded in ``crash``)."""


class RunContext:
    """State of one validation run, shared by its phases.

    Parameters
    ----------
    adapter : Adapter
        The verifier in its interface (:mod:`spectr_gbv.validate.interfaces`).
    report : ValidationReport
        The report the phases fill (``checks``, ``notes``, ``settings``, ``level_used``).
    verify : callable
        The verifier as the caller gave it (the exact level looks for its ``outcome_law``).
    battery : list of BatteryInstance
        The instances of the run (the first is the one the first batch and the determinism check use).
    options : ValidateOptions
        The run's options (level, reference, seed, budget, probes, search, conventions).

    Attributes
    ----------
    tally : StructuralTally
        Every output collected, for the structural tally at the end of the run.
    crash : CheckResult or None
        The first failure on a valid input (a raise, a hang, an exit): the failed ``runs`` check.
    reuse_seen : bool
        Whether the chain probe saw the deciding uniform reused (law failures are then re-diagnosed).
    finished : bool
        Set by a phase after which no later phase may run (the verifier raised on the first batch).
    first_tables : Tables or None
        The draws of the first battery instance, set by the first phase.
    exact : ExactOutcome
        What the exact level found (laws per instance, exact scorers for the search).
    stat_battery : list of BatteryInstance
        The instances without an exact law (sampled by the statistical level), set by it.
    tv, alpha_test : float
        The significance plan of the sampled tests (TV error detected, level of each test), set by
        the statistical level.
    """

    def __init__(
        self,
        adapter: Adapter,
        report: ValidationReport,
        verify: Any,
        battery: list[BatteryInstance],
        options: ValidateOptions,
    ) -> None:
        self.adapter = adapter
        self.report = report
        self.verify = verify
        self.battery = battery
        self.options = options
        self.tally = structural.StructuralTally()
        self.crash: CheckResult | None = None
        self.reuse_seen = False
        self.finished = False
        self.first_tables: Tables | None = None
        self.exact = ExactOutcome()
        self.stat_battery: list[BatteryInstance] = []
        self.tv = 0.0
        self.alpha_test = 0.0

    @property
    def conventions(self) -> tuple[str, ...]:
        """The conventions the run checks (``options.conventions``)."""
        return tuple(self.options.conventions)

    def add(self, *checks: CheckResult) -> None:
        """Append checks to the report."""
        self.report.checks.extend(checks)

    def guarded(self, name: str, spec: dict[str, Any] | None, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call ``fn(*args, **kw)``; record a raise (run continues) or a timeout or exit (run stops).

        Returns
        -------
        object
            ``fn``'s result, or None when the verifier raised (a note says the step was skipped).

        Raises
        ------
        RunStopped
            The verifier timed out or exited (``crash`` holds the failed ``runs`` check).
        """
        try:
            return fn(*args, **kw)
        except VerifierFailure as err:
            if isinstance(err, VerifierTimedOut) or getattr(err, "diagnosis", "") == "exits":
                self.crash = structural.failure_result("runs", "robustness", err, spec)
                self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")
                raise RunStopped from err
            self.record_raise(name, err, spec)
            self.report.notes.append(f"{name}: skipped, the verifier raised ({err})")
            return None

    def record_raise(self, name: str, err: VerifierFailure, spec: dict[str, Any] | None) -> None:
        """Keep the first exception on a valid input as the failed ``runs`` check."""
        if self.crash is None:
            self.crash = structural.failure_result("runs", "robustness", err, spec)
            self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")


__all__ = ["RunContext", "RunStopped"]
