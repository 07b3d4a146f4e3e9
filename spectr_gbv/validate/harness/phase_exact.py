"""The exact level of a validation run: declared ``outcome_law`` or bisected uniforms.

:func:`exact_phase` fills an :class:`ExactOutcome`: the exact law per battery instance (generic
verifiers that declare ``outcome_law``; chain verifiers that take uniforms, located by
bisection), the exact efficiency checks, the sampler-against-declared-law checks, and the exact
scorers the adversarial search uses. Imports: simulate.exact, validate.checks,
battery, interfaces, report.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from spectr_gbv.simulate.exact import expected_accepted
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.checks import exact_chain, exact_declared, statistical, structural
from spectr_gbv.validate.checks import reference as reference_check
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.report.results import CheckResult

#: Reference check: TV error (in the conditional law) detected with power 0.99, as a multiple of the budget's.
REFERENCE_TV_FACTOR = 3.0


@dataclasses.dataclass
class ExactOutcome:
    """Outcome of the exact phase."""

    done: bool = False
    why: str = ""
    laws: dict[str, Any] = dataclasses.field(default_factory=dict)
    search: Any = None
    confirm: Any = None
    tol: float = 0.0


def exact_phase(
    run: Any,
    verify: Any,
    battery: list[BatteryInstance],
    reference: str | None,
    seed: int,
    budget: str,
    ex: ExactOutcome,
) -> None:
    """Exact checks; fills ``ex`` (laws per instance, scorers for the adversarial search).

    ``run`` is the run's :class:`~spectr_gbv.validate.harness.state.RunContext` (its adapter, report,
    tally and :meth:`~spectr_gbv.validate.harness.state.RunContext.guarded`).
    """
    from spectr_gbv.simulate.exact import validity_defect  # noqa: PLC0415

    adapter, report = run.adapter, run.report
    if adapter.family == "generic":
        law_fn = exact_declared.find_outcome_law(verify)
        if law_fn is None:
            ex.why = "the verifier exposes no outcome_law"
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        checks, laws = run.guarded(
            "exact level", None, exact_declared.outcome_law_checks, law_fn, battery, adapter, reference
        ) or ([], {})
        if not laws:
            ex.why = checks[0].detail if checks else "outcome_law could not be evaluated"
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        run.add(*checks)
        ex.done, ex.laws, ex.tol = True, laws, exact_declared.FLOAT_TOL
        _exact_efficiency(run, laws, battery)
        # the sampler must follow the declared law
        rng = np.random.default_rng([seed, 4])
        tv_ref = min(REFERENCE_TV_FACTOR * statistical.TV_BY_BUDGET[budget], 0.2)
        res = run.guarded("sampler check", None, _sampler_checks, adapter, battery, law_fn, rng, run.tally, tv_ref)
        if res:
            run.add(*res)

        def scorer(bi: BatteryInstance) -> float:
            try:
                law, exact, _ = exact_declared.declared_law(law_fn, bi, adapter, None)
            except exact_declared.ExactUnavailable:
                return -1.0
            target = bi.instance.target if exact else bi.instance.target.to_float()
            return float(validity_defect(target, law, bi.instance.L))

        ex.search = ex.confirm = scorer
        return
    if adapter.family == "chain":
        out = run.guarded("exact level", None, exact_chain.chain_checks, adapter, battery, reference, seed)
        if out is None:
            ex.why = "the verifier raised during the breakpoint sweep"
            return
        checks, ok, laws = out
        if not ok:
            ex.why = checks[0].detail.removeprefix("exact level unavailable: ")
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        run.add(*checks)
        ex.done, ex.laws, ex.tol = True, laws, exact_declared.CHAIN_TOL
        _exact_efficiency(run, laws, battery)

        def chain_confirm(bi: BatteryInstance) -> float:
            try:
                law, _, _ = exact_chain.chain_law(adapter, bi, seed)
            except exact_declared.ExactUnavailable:
                return -1.0
            return float(validity_defect(bi.float_instance.target, law, bi.instance.L))

        ex.confirm = chain_confirm  # the search itself samples (bisection per candidate is too costly)
        return
    ex.why = "the hf interface draws from torch's global RNG (no supplied uniforms, no declared law)"
    report.notes.append(f"level exact: {ex.why}; statistical level used")


def _exact_efficiency(run: Any, laws: dict[str, Any], battery: list[BatteryInstance]) -> None:
    for bi in battery:
        if bi.label not in laws:
            continue
        law = laws[bi.label]
        e_tau = float(expected_accepted(law))
        bbv, opt, ot, note = statistical.optima(bi)
        above = opt is not None and e_tau > opt + 1e-9
        run.add(
            CheckResult(
                f"efficiency[{bi.label}]",
                "efficiency",
                None if opt is None else not above,
                statistic=e_tau,
                instance=bi.spec(),
                detail=(
                    f"exact E[tau] = {e_tau:.6f}; B_BV({bi.K}) = {bbv:.6f}, OPT({bi.K}) = "
                    f"{'-' if opt is None else f'{opt:.6f}'}, OT({bi.K}) = {'-' if ot is None else f'{ot:.6f}'}{note}"
                    + ("; above OPT(K): proof of a lossy verifier" if above else "")
                ),
                diagnosis="efficiency_above_optimum" if above else "ok",
            )
        )


def _sampler_checks(
    adapter: Adapter,
    battery: list[BatteryInstance],
    law_fn: Any,
    rng: np.random.Generator,
    tally: structural.StructuralTally,
    tv: float,
) -> list[CheckResult]:
    """The sampler against its own declared law on fixed drafts (first three instances)."""
    out = []
    for res in reference_check.reference_checks(
        adapter, battery[:3], "declared", rng, statistical.ALPHA / 3, tv, tally, law_fn=law_fn
    ):
        out.append(
            dataclasses.replace(
                res, name=res.name.replace("reference_law", "sampler_matches_outcome_law"), category="exact"
            )
        )
    return out


__all__ = ["REFERENCE_TV_FACTOR", "ExactOutcome", "exact_phase"]
