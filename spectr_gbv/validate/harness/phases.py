"""The phases of a validation run, in order: runs, probes, exact, statistical, reference, search.

A phase is any object with a ``name`` and a ``run(context)`` method (:class:`Phase`); it reads and
writes the run's :class:`~spectr_gbv.validate.harness.state.RunContext` (report, tally, the exact
outcome and significance plan it hands the next phase). :data:`PHASES` lists the phases of
:func:`~spectr_gbv.validate.harness.driver.validate` in order and :func:`run_phases` runs them:
each reports, none crashes the harness; a verifier that hangs or exits stops the run with
:class:`~spectr_gbv.validate.harness.state.RunStopped`, and a phase that sets ``context.finished``
(the verifier raised on the first batch) ends it quietly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from spectr_gbv.validate.adversarial import search as adversarial_search
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks import reference as reference_check
from spectr_gbv.validate.checks import statistical, structural
from spectr_gbv.validate.harness.phase_exact import REFERENCE_TV_FACTOR, exact_phase
from spectr_gbv.validate.harness.state import RunContext
from spectr_gbv.validate.harness.support import search_sizes
from spectr_gbv.validate.isolation.failures import VerifierFailure
from spectr_gbv.validate.probes import coin_probes, free_probes, input_probes
from spectr_gbv.validate.report.results import CheckResult


@runtime_checkable
class Phase(Protocol):
    """One phase of a validation run.

    Attributes
    ----------
    name : str
        Short name of the phase (``"runs"``, ``"probes"``, ...).
    """

    name: str

    def run(self, context: RunContext) -> None:
        """Run the phase on ``context``: add checks, notes and settings to its report.

        Raises
        ------
        RunStopped
            The verifier hung or exited (from :meth:`~spectr_gbv.validate.harness.state.RunContext.guarded`).
        """
        ...


class FirstBatch:
    """Phase ``runs``: negotiate the arrays with the verifier and run a first batch on the first instance.

    A verifier that raises there gets one failed check and nothing else (``context.finished``).
    """

    name = "runs"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        adapter, report, seed = context.adapter, context.report, context.options.seed
        first = context.battery[0]
        tables0 = Tables(first.float_instance)
        context.first_tables = tables0
        rng0 = np.random.default_rng([seed, 1])
        probe_d = tables0.sample_drafts(8, first.K, rng0)
        probe_q, probe_p = tables0.rows(probe_d)
        try:
            note = adapter.negotiate((probe_d, probe_q, probe_p), seed)
        except VerifierFailure:
            note = None
        if note:
            report.notes.append(note)
        if adapter.arrays == "torch":
            report.settings["arrays"] = "torch"
        smoke = context.guarded(
            "the first batch", first.spec(), structural.run_batch, adapter, tables0, first, probe_d, rng0, context.tally
        )
        if smoke is None:
            report.notes.append(
                "the verifier raised on the first batch: no other check was run (is the interface right? this run "
                f"used {adapter.interface!r}; docs/validate.md lists each interface's signature)"
            )
            context.finished = True


class StructuralProbes:
    """Phase ``probes``: determinism, then (unless ``probes=False``) the fixed robustness probes.

    Placeholder ids, a zero coin, all-zero residuals (forced and forcing-free), covering drafts, a
    NaN target row and, for chain verifiers, the reuse of the deciding uniform.
    """

    name = "probes"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        adapter, report, seed = context.adapter, context.report, context.options.seed
        first = context.battery[0]
        K0 = first.K
        run = context
        tables0 = run.first_tables
        run.add(run.guarded("determinism", first.spec(), input_probes.check_determinism, adapter, tables0, first, seed))
        if context.options.probes:
            declared = "vllm" in run.conventions
            placeholders = run.guarded(
                "placeholder probe", None, input_probes.check_placeholders, adapter, K0, seed, declared=declared
            )
            for res in placeholders or []:
                run.add(res)
            run.add(run.guarded("zero-coin probe", None, coin_probes.check_zero_coin, adapter, K0, seed))
            run.add(
                run.guarded("degenerate residual probe", None, coin_probes.check_degenerate_residual, adapter, K0, seed)
            )
            run.add(run.guarded("covering drafts probe", None, coin_probes.check_covering_drafts, adapter, K0, seed))
            for res in (
                run.guarded("forcing-free probes", None, free_probes.check_degenerate_rows, adapter, K0, seed) or []
            ):
                run.add(res)
            run.add(run.guarded("NaN probe", None, coin_probes.check_nan_row, adapter, K0, seed))
            if adapter.family == "chain":
                res, run.reuse_seen = coin_probes.check_uniform_reuse(adapter, seed)
                run.add(res)
        else:
            report.notes.append(
                "probes skipped (probes=False): placeholder ids, zero coin, all-zero residuals (forced and "
                "forcing-free), NaN row"
            )
        report.checks = [c for c in report.checks if c is not None]


class ExactLevel:
    """Phase ``exact`` (``level="exact"`` only): the exact law where available, and the level used.

    See :func:`~spectr_gbv.validate.harness.phase_exact.exact_phase`; fills ``context.exact``.
    """

    name = "exact"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        opts, report, ex = context.options, context.report, context.exact
        if opts.level != "exact":
            return
        exact_phase(context, context.verify, context.battery, opts.reference, opts.seed, opts.budget, ex)
        if not ex.done:
            report.level_used = f"statistical (exact unavailable: {ex.why})"
        elif len(ex.laws) < len(context.battery):
            report.level_used = "exact (statistical where noted)"
        else:
            report.level_used = "exact"


class StatisticalLevel:
    """Phase ``statistical``: the significance plan, then the sampled law tests of the instances without an exact law.

    Sets ``context.stat_battery``, ``context.tv`` and ``context.alpha_test`` (the statistical tests of a
    run form one family at :data:`~spectr_gbv.validate.checks.statistical.ALPHA`, Bonferroni-split), then
    for each instance: group-sequential sampling, the end-to-end and positional law tests and E[tau].
    """

    name = "statistical"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        run, adapter, report, opts = context, context.adapter, context.report, context.options
        reference, seed = opts.reference, opts.seed
        tv = statistical.TV_BY_BUDGET[opts.budget]
        alpha = statistical.ALPHA
        stat_battery = [bi for bi in context.battery if bi.label not in context.exact.laws]
        family = max(3 * len(stat_battery) + (len(stat_battery) if reference else 0) + (1 if opts.search else 0), 1)
        # every law test runs in the group-sequential looks of statistical.LOOKS (alpha split over the looks)
        alpha_test = alpha / family
        context.stat_battery, context.tv, context.alpha_test = stat_battery, tv, alpha_test
        report.settings.update(
            {
                "alpha_family": alpha,
                "family_size": family,
                "alpha_per_test": alpha_test,
                "power_target": statistical.POWER_TARGET,
                "tv_detected": tv,
            }
        )
        sizes: dict[str, int] = {}
        rng = np.random.default_rng([seed, 2])
        stopped: dict[str, str] = {}
        for bi in stat_battery:
            N = statistical.sample_size(bi, statistical.final_alpha(alpha_test), tv)
            sizes[bi.label] = N
            out = run.guarded(
                f"statistical[{bi.label}]",
                bi.spec(),
                statistical.collect_sequential,
                adapter,
                bi,
                N,
                rng,
                alpha_test,
                run.tally,
                reference=reference,
                tv=tv,
            )
            if out is None:
                continue
            s, look, level = out
            if s.first_error is not None:
                run.record_raise(f"statistical[{bi.label}]", s.first_error, bi.spec())
                report.notes.append(
                    f"statistical[{bi.label}]: {s.raised} batches dropped because the verifier raised "
                    f"({s.first_error}); the law tests use the {len(s.lengths)} other outputs"
                )
            if look < len(statistical.LOOKS):
                stopped[bi.label] = f"look {look} of {len(statistical.LOOKS)}, {s.calls} of {N} iterations"
            if len(s.lengths) == 0:
                run.add(
                    CheckResult(
                        f"end_to_end_law[{bi.label}]",
                        "statistical",
                        None,
                        sample_size=N,
                        instance=bi.spec(),
                        detail="every output was invalid (see the structural checks)",
                    )
                )
                continue
            law = statistical.law_checks(s, level, tv, reference, run.reuse_seen)
            if look < len(statistical.LOOKS):  # a rejection stopped the sampling: the others are not powered
                law = [
                    c
                    if c.passed is not True
                    else dataclasses.replace(
                        c,
                        passed=None,
                        detail=f"not powered: sampling stopped at look {look} of {len(statistical.LOOKS)} after "
                        f"another law test on this instance rejected. {c.detail}",
                    )
                    for c in law
                ]
            run.add(*law)
            run.add(statistical.efficiency(s, alpha_test))
        if sizes:
            report.settings["samples_per_instance"] = sizes
            report.settings["sequential_looks"] = [list(x) for x in statistical.LOOKS]
        if stopped:
            report.settings["stopped_early"] = stopped


class ReferenceComparison:
    """Phase ``reference`` (``reference=NAME`` only): the conditional law on fixed drafts vs the named algorithm.

    A raise during it becomes the run's failed ``runs`` check when none was recorded before.
    """

    name = "reference"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        run, adapter, report, opts = context, context.adapter, context.report, context.options
        reference, stat_battery = opts.reference, context.stat_battery
        if not (reference and stat_battery):
            return
        rng = np.random.default_rng([opts.seed, 3])
        tv_ref = min(REFERENCE_TV_FACTOR * context.tv, 0.2)
        res = run.guarded(
            "reference check",
            None,
            reference_check.reference_checks,
            adapter,
            stat_battery,
            reference,
            rng,
            context.alpha_test,
            tv_ref,
            run.tally,
            run.reuse_seen,
        )
        if res:
            run.add(*res)
            report.settings["reference_tv_detected"] = round(tv_ref, 6)
            for c in res:
                if c.diagnosis == "raises" and run.crash is None:
                    detail = f"during {c.name}: {c.detail}"
                    run.crash = dataclasses.replace(c, name="runs", category="robustness", detail=detail)


class AdversarialSearch:
    """Phase ``search`` (unless ``search=False``): the adversarial search with a held-out confirmation.

    Uses the exact scorers of the exact level when it found any (``context.exact``).
    """

    name = "search"

    def run(self, context: RunContext) -> None:
        """Run the phase (see the class)."""
        run, adapter, report, opts, ex = context, context.adapter, context.report, context.options, context.exact
        if not opts.search:
            report.notes.append("adversarial search skipped (search=False)")
            return
        res = run.guarded(
            "adversarial search",
            None,
            adversarial_search.adversarial_check,
            adapter,
            opts.budget,
            opts.seed,
            context.alpha_test,
            context.tv,
            opts.reference,
            run.tally,
            ex.search,
            ex.tol,
            run.reuse_seen,
            ex.confirm,
        )
        if res is not None:
            run.add(res)
        restarts, rounds, per = adversarial_search.SEARCH[opts.budget]
        report.settings["adversarial_search"] = {
            "restarts_per_size": restarts,
            "improvement_rounds": rounds,
            "samples_per_scored_instance": None if ex.search else per,
            "sizes": [list(x) for x in search_sizes(opts.budget, adapter.single_draft)],
        }


#: The phases of a run, in order.
PHASES: tuple[Phase, ...] = (
    FirstBatch(),
    StructuralProbes(),
    ExactLevel(),
    StatisticalLevel(),
    ReferenceComparison(),
    AdversarialSearch(),
)


def run_phases(context: RunContext, phases: Sequence[Phase] = PHASES) -> None:
    """Run ``phases`` in order on ``context``, until one sets ``context.finished``.

    Raises
    ------
    RunStopped
        The verifier hung or exited during a phase (the failure is recorded in ``context.crash``).
    """
    for phase in phases:
        phase.run(context)
        if context.finished:
            return


__all__ = [
    "PHASES",
    "AdversarialSearch",
    "ExactLevel",
    "FirstBatch",
    "Phase",
    "ReferenceComparison",
    "StatisticalLevel",
    "StructuralProbes",
    "run_phases",
]
