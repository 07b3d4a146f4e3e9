"""The phases of a validation run, in order: runs, probes, exact, statistical, reference, search.

``_phases`` runs each phase of :func:`~spectr_gbv.validate.harness.driver.validate` on the
adapter (each reports, none crashes the harness) and ``_as_reuse`` re-diagnoses a failed law
check as ``reuses_uniform`` when the chain probe saw the deciding uniform reused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from spectr_gbv.validate.adversarial import search as adversarial_search
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks import reference as reference_check
from spectr_gbv.validate.checks import statistical, structural
from spectr_gbv.validate.harness.phase_exact import REFERENCE_TV_FACTOR, ExactOutcome, exact_phase
from spectr_gbv.validate.harness.state import _LAW_CHECKS, _Run
from spectr_gbv.validate.harness.support import search_sizes
from spectr_gbv.validate.isolation.failures import VerifierFailure
from spectr_gbv.validate.probes import coin_probes, free_probes, input_probes
from spectr_gbv.validate.report.results import CheckResult


def _as_reuse(c: CheckResult) -> CheckResult:
    if c.passed is False and c.name.split("[")[0] in _LAW_CHECKS and c.diagnosis in ("not_lossless", "wrong_residual"):
        return dataclasses.replace(c, diagnosis="reuses_uniform")
    return c


def _phases(
    run: _Run,
    verify: Any,
    battery: list[BatteryInstance],
    level: str,
    reference: str | None,
    seed: int,
    budget: str,
    *,
    probes: bool = True,
    search: bool = True,
) -> None:
    adapter, report = run.adapter, run.report
    first = battery[0]
    tables0 = Tables(first.float_instance)
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
    smoke = run.guarded(
        "the first batch", first.spec(), structural.run_batch, adapter, tables0, first, probe_d, rng0, run.tally
    )
    if smoke is None:
        report.notes.append(
            "the verifier raised on the first batch: no other check was run (is the interface right? this run "
            f"used {adapter.interface!r}; docs/validate.md lists each interface's signature)"
        )
        return

    # 2. structural probes
    K0 = first.K
    run.add(run.guarded("determinism", first.spec(), input_probes.check_determinism, adapter, tables0, first, seed))
    if probes:
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
        for res in run.guarded("forcing-free probes", None, free_probes.check_degenerate_rows, adapter, K0, seed) or []:
            run.add(res)
        run.add(run.guarded("NaN probe", None, coin_probes.check_nan_row, adapter, K0, seed))
        if adapter.family == "chain":
            res, run.reuse_seen = coin_probes.check_uniform_reuse(adapter, seed)
            run.add(res)
    else:
        report.notes.append(
            "probes skipped (probes=False): placeholder ids, zero coin, all-zero residuals (forced and forcing-free), "
            "NaN row"
        )
    report.checks = [c for c in report.checks if c is not None]

    # significance plan
    tv = statistical.TV_BY_BUDGET[budget]
    alpha = statistical.ALPHA

    # 3. exact level
    ex = ExactOutcome()
    if level == "exact":
        exact_phase(run, verify, battery, reference, seed, budget, ex)
        if not ex.done:
            report.level_used = f"statistical (exact unavailable: {ex.why})"
        elif len(ex.laws) < len(battery):
            report.level_used = "exact (statistical where noted)"
        else:
            report.level_used = "exact"
    stat_battery = [bi for bi in battery if bi.label not in ex.laws]

    family = max(3 * len(stat_battery) + (len(stat_battery) if reference else 0) + (1 if search else 0), 1)
    # every law test runs in the group-sequential looks of statistical.LOOKS (alpha split over the looks)
    alpha_test = alpha / family
    report.settings.update(
        {
            "alpha_family": alpha,
            "family_size": family,
            "alpha_per_test": alpha_test,
            "power_target": statistical.POWER_TARGET,
            "tv_detected": tv,
        }
    )

    # 4. statistical level (instances without an exact law)
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

    # 5. reference
    if reference and stat_battery:
        rng = np.random.default_rng([seed, 3])
        tv_ref = min(REFERENCE_TV_FACTOR * tv, 0.2)
        res = run.guarded(
            "reference check",
            None,
            reference_check.reference_checks,
            adapter,
            stat_battery,
            reference,
            rng,
            alpha_test,
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

    # 6. adversarial
    if not search:
        report.notes.append("adversarial search skipped (search=False)")
        return
    res = run.guarded(
        "adversarial search",
        None,
        adversarial_search.adversarial_check,
        adapter,
        budget,
        seed,
        alpha_test,
        tv,
        reference,
        run.tally,
        ex.search,
        ex.tol,
        run.reuse_seen,
        ex.confirm,
    )
    if res is not None:
        run.add(res)
    restarts, rounds, per = adversarial_search.SEARCH[budget]
    report.settings["adversarial_search"] = {
        "restarts_per_size": restarts,
        "improvement_rounds": rounds,
        "samples_per_scored_instance": None if ex.search else per,
        "sizes": [list(x) for x in search_sizes(budget, adapter.single_draft)],
    }
