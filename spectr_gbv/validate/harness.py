"""``validate(verify, ...)``: run every check of the conformance harness on one verifier.

Order of a run (each phase reports, none crashes the harness):

1. **runs**: a first batch on the first battery instance (numpy arrays; torch tensors when
   numpy raises). A verifier that raises or hangs there gets one failed check and nothing else.
2. **structural probes**: determinism, -1 placeholder ids, coins of exactly 0, an all-zero
   residual, a NaN target row, and (chain) whether corrections reuse the deciding uniform.
3. **exact level** (``level="exact"``): declared ``outcome_law`` or, for chain verifiers, the
   law located by bisection of the uniforms; falls back to 4 when unavailable (noted).
4. **statistical level**: sampled battery, end-to-end and positional G-tests, E[tau] vs bounds.
5. **reference** (``reference=NAME``): conditional law on fixed drafts vs the named algorithm.
6. **adversarial search** with a held-out confirmation.
7. **structural tally** over every output collected in 1-6.

Significance: the statistical tests of a run form one family at ``alpha = 1e-3``
(Bonferroni: each test at ``alpha / family``); sample sizes give power 0.99 against a
total-variation error of 0.02 (``budget="standard"``; quick 0.05, thorough 0.01). Each law test runs
in group-sequential looks (:data:`~spectr_gbv.validate.checks_statistical.LOOKS`), so a clearly wrong
verifier stops early; the verifier runs in worker processes (``isolation``), batches concurrently.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from spectr_gbv.validate import (
    adversarial,
    checks_probes,
    checks_statistical,
    checks_structural,
    reference_check,
)
from spectr_gbv.validate.battery import BatteryInstance, Tables, default_battery, user_battery
from spectr_gbv.validate.calls import VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.interfaces import Adapter, check_interface, make_adapter
from spectr_gbv.validate.phase_exact import REFERENCE_TV_FACTOR, ExactOutcome, exact_phase
from spectr_gbv.validate.report import CATEGORIES, CheckResult, ValidationReport
from spectr_gbv.validate.run_support import CapturedWarnings, make_guard, progress_bar, search_sizes, sizes_covered

LEVELS: tuple[str, ...] = ("exact", "statistical")
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")
#: Conventions an interface does not promise, which a run checks only when declared:
#: ``"vllm"``: drafts padded with -1 placeholder ids (stop there and draw from the target row).
CONVENTIONS: tuple[str, ...] = ("vllm",)
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
        self.tally = checks_structural.StructuralTally()
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
                self.crash = checks_structural.failure_result("runs", "robustness", err, spec)
                self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")
                raise _Stop from err
            self.record_raise(name, err, spec)
            self.report.notes.append(f"{name}: skipped, the verifier raised ({err})")
            return None

    def record_raise(self, name: str, err: VerifierFailure, spec: dict[str, Any] | None) -> None:
        """Keep the first exception on a valid input as the failed ``runs`` check."""
        if self.crash is None:
            self.crash = checks_structural.failure_result("runs", "robustness", err, spec)
            self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")


def _check_conventions(conventions: Any) -> tuple[str, ...]:
    if isinstance(conventions, str):
        conventions = tuple(c.strip() for c in conventions.split(",") if c.strip())
    try:
        out = tuple(conventions)
    except TypeError:
        raise ValueError(f"conventions: expected names among {', '.join(CONVENTIONS)}, got {conventions!r}") from None
    bad = [c for c in out if c not in CONVENTIONS]
    if bad:
        raise ValueError(f"conventions: unknown {bad[0]!r}; valid: {', '.join(CONVENTIONS)}")
    return out


def _check_args(level: str, budget: str, seed: Any, reference: str | None) -> None:
    if level not in LEVELS:
        raise ValueError(f"level: expected one of {', '.join(LEVELS)}, got {level!r}")
    if budget not in BUDGETS:
        raise ValueError(f"budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    if reference is not None and not isinstance(reference, str):
        raise ValueError(f"reference: expected a method name or None, got {type(reference).__name__}")


def validate(
    verify: Any,
    *,
    interface: str = "generic",
    level: str = "statistical",
    reference: str | None = None,
    seed: int = 0,
    budget: str = "standard",
    time_limit_s: float = 10.0,
    instances: Any = None,
    probes: bool = True,
    search: bool = True,
    conventions: Any = (),
    isolation: str | None = None,
    workers: int | None = None,
    quiet: bool | None = None,
) -> ValidationReport:
    """Check that a speculative-decoding verifier is lossless, and how efficient it is.

    Parameters
    ----------
    verify : callable
        The verifier in the named interface (see :mod:`spectr_gbv.validate.interfaces`):
        generic ``verify(draft_tokens [K, L], draft_probs [K, L, V], target_probs [K, L+1, V],
        rng) -> list[int]``; chain ``verify(draft_ids [B, L], draft_probs [B, L, V],
        target_probs [B, L+1, V], uniforms [B, L+1]) -> int64 [B, L+1]`` (-1 padded); hf:
        transformers' ``_speculative_sampling``. A reference
        :class:`~spectr_gbv.reference.Verifier` (instance or class) is accepted for generic.
    interface : str
        ``"generic"``, ``"chain"`` or ``"hf"``.
    level : str
        ``"exact"``: the law computed exactly where possible (declared ``outcome_law``, or a
        chain verifier's supplied uniforms), otherwise statistical (the report says so).
        ``"statistical"``: sampling only.
    reference : str, optional
        Stable method name the verifier claims to implement (``"sd"``, ``"bv"``, ``"mdbv"``,
        ``"spectr"``, ``"rrs"``, ``"gbv_multipath"``, ...): adds the conditional-law checks.
    seed : int
        Seed of every random draw of the harness (>= 0).
    budget : str
        ``"quick"`` (TV 0.05 detected with power 0.99, lighter search: for unit tests),
        ``"standard"`` (TV 0.02, the default) or ``"thorough"`` (TV 0.01).
    time_limit_s : float
        Seconds one verifier call may take before it counts as hung.
    instances : optional
        Replaces the battery: an :class:`~spectr_gbv.core.Instance`, an ``(Instance, K)``
        pair, a :class:`~spectr_gbv.validate.battery.BatteryInstance`, or a list of them (K
        defaults to 2, or 1 for chain/hf).
    probes : bool
        Run the fixed robustness probes (placeholder ids, a zero coin, an all-zero residual,
        a NaN target row; chain: uniform reuse). False tests only the instances (and the
        determinism check on the first), e.g. in a property test whose examples are instances;
        the report notes what was skipped.
    search : bool
        Run the adversarial search. False likewise.
    conventions : sequence of str or str
        Conventions the interface does not promise, to check as part of the verdict (see
        :data:`~spectr_gbv.validate.harness.CONVENTIONS`): ``("vllm",)`` makes the -1
        placeholder probes count. Without it they are advisory notes.
    isolation : str, optional
        ``"process"`` (default where ``fork`` exists: the verifier runs in a worker process, so
        an exit, a crash or a hang in C code is reported) or ``"thread"`` (in-process).
    workers : int, optional
        Worker processes that run batches concurrently (default ``min(2, os.cpu_count())``).
    quiet : bool, optional
        Hide the progress bar (shown on stderr only when it is a terminal); None follows
        :func:`spectr_gbv.core.progress.set_quiet` and ``SPECTR_GBV_QUIET``.

    Returns
    -------
    ValidationReport
        ``passed`` is False iff a check showed a wrong output law or a failure on a valid
        input; ``exit_code`` (0, 1, or 3 for a difference from the named reference),
        ``failures``, ``smallest_failure``, ``to_text()``, ``to_json()``.

    Raises
    ------
    ValueError
        Unknown interface, level, budget, reference or convention; a bad seed, time limit or
        instance list; ``verify`` not callable; interface ``"hf"`` without torch. Failures *of
        the verifier* never raise: they are reported.

    References
    ----------
    THEORY.md section 2 (validity defect); ECOSYSTEM.md, shipped as docs/project/ECOSYSTEM.md (bug classes B1-B12).

    Examples
    --------
    >>> from spectr_gbv.core import random_instance
    >>> from spectr_gbv.reference import get_verifier
    >>> from spectr_gbv.validate import validate
    >>> rep = validate(get_verifier("spectr_gbv_released").sample, level="exact",
    ...                instances=[(random_instance(2, 1, 0), 2)], budget="quick")
    >>> rep.passed, rep.smallest_failure.diagnosis
    (False, 'not_lossless')
    """
    t0 = time.perf_counter()
    check_interface(interface)
    _check_args(level, budget, seed, reference)
    conventions = _check_conventions(conventions)
    reference = reference_check.check_reference(reference)
    guard = make_guard(time_limit_s, isolation, workers)
    adapter = make_adapter(verify, interface, guard)
    battery = (
        user_battery(instances, 1 if adapter.single_draft else None)
        if instances is not None
        else default_battery(1 if adapter.single_draft else None)
    )
    report = ValidationReport(adapter.name, interface, level, level, reference, int(seed), budget)
    run = _Run(adapter, report)
    run.conventions = conventions
    bar = progress_bar(adapter, battery, budget, reference, search, quiet)
    with CapturedWarnings() as captured:
        try:
            _phases(run, verify, battery, level, reference, int(seed), budget, probes=probes, search=search)
        except _Stop:
            what = "exited" if run.crash is not None and run.crash.diagnosis == "exits" else "hung"
            report.notes.append(f"the run stopped after the verifier {what}; later checks were not run")
        finally:
            bar.close()
            close = getattr(guard, "close", None)
            if close is not None:
                close()
    if captured.total:
        report.notes.append(captured.summary())
    if run.crash is not None:
        run.add(run.crash)
    elif report.checks:
        run.add(CheckResult("runs", "robustness", True, sample_size=guard.calls, detail="no call raised or hung"))
    if not (run.crash and run.crash.detail and not run.tally.outputs):
        run.add(*run.tally.results())
    if run.reuse_seen:
        report.checks = [_as_reuse(c) for c in report.checks]
    report.checks.sort(key=lambda c: CATEGORIES.index(c.category))
    if conventions:
        report.settings["conventions"] = list(conventions)
    report.settings["sizes_covered"] = sizes_covered(battery, budget, adapter.single_draft, search)
    report.settings["verifier_calls"] = guard.calls
    report.settings["time_limit_s_per_call"] = time_limit_s
    report.elapsed_s = time.perf_counter() - t0
    return report


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
        "the first batch", first.spec(), checks_structural.run_batch, adapter, tables0, first, probe_d, rng0, run.tally
    )
    if smoke is None:
        report.notes.append(
            "the verifier raised on the first batch: no other check was run (is the interface right? this run "
            f"used {adapter.interface!r}; docs/validate.md lists each interface's signature)"
        )
        return

    # 2. structural probes
    K0 = first.K
    run.add(run.guarded("determinism", first.spec(), checks_probes.check_determinism, adapter, tables0, first, seed))
    if probes:
        declared = "vllm" in run.conventions
        placeholders = run.guarded(
            "placeholder probe", None, checks_probes.check_placeholders, adapter, K0, seed, declared=declared
        )
        for res in placeholders or []:
            run.add(res)
        run.add(run.guarded("zero-coin probe", None, checks_probes.check_zero_coin, adapter, K0, seed))
        run.add(
            run.guarded("degenerate residual probe", None, checks_probes.check_degenerate_residual, adapter, K0, seed)
        )
        run.add(run.guarded("NaN probe", None, checks_probes.check_nan_row, adapter, K0, seed))
        if adapter.family == "chain":
            res, run.reuse_seen = checks_probes.check_uniform_reuse(adapter, seed)
            run.add(res)
    else:
        report.notes.append("probes skipped (probes=False): placeholder ids, zero coin, all-zero residual, NaN row")
    report.checks = [c for c in report.checks if c is not None]

    # significance plan
    tv = checks_statistical.TV_BY_BUDGET[budget]
    alpha = checks_statistical.ALPHA

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
    # every law test runs in the group-sequential looks of checks_statistical.LOOKS (alpha split over the looks)
    alpha_test = alpha / family
    report.settings.update(
        {
            "alpha_family": alpha,
            "family_size": family,
            "alpha_per_test": alpha_test,
            "power_target": checks_statistical.POWER_TARGET,
            "tv_detected": tv,
        }
    )

    # 4. statistical level (instances without an exact law)
    sizes: dict[str, int] = {}
    rng = np.random.default_rng([seed, 2])
    stopped: dict[str, str] = {}
    for bi in stat_battery:
        N = checks_statistical.sample_size(bi, checks_statistical.final_alpha(alpha_test), tv)
        sizes[bi.label] = N
        out = run.guarded(
            f"statistical[{bi.label}]",
            bi.spec(),
            checks_statistical.collect_sequential,
            adapter,
            bi,
            N,
            rng,
            alpha_test,
            run.tally,
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
        if look < len(checks_statistical.LOOKS):
            stopped[bi.label] = f"look {look} of {len(checks_statistical.LOOKS)}, {s.calls} of {N} iterations"
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
        law = checks_statistical.law_checks(s, level, tv, reference, run.reuse_seen)
        if look < len(checks_statistical.LOOKS):  # a rejection stopped the sampling: the others are not powered
            law = [
                c
                if c.passed is not True
                else dataclasses.replace(
                    c,
                    passed=None,
                    detail=f"not powered: sampling stopped at look {look} of {len(checks_statistical.LOOKS)} after "
                    f"another law test on this instance rejected. {c.detail}",
                )
                for c in law
            ]
        run.add(*law)
        run.add(checks_statistical.efficiency(s, alpha_test))
    if sizes:
        report.settings["samples_per_instance"] = sizes
        report.settings["sequential_looks"] = [list(x) for x in checks_statistical.LOOKS]
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
        adversarial.adversarial_check,
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
    restarts, rounds, per = adversarial.SEARCH[budget]
    report.settings["adversarial_search"] = {
        "restarts_per_size": restarts,
        "improvement_rounds": rounds,
        "samples_per_scored_instance": None if ex.search else per,
        "sizes": [list(x) for x in search_sizes(budget, adapter.single_draft)],
    }


__all__ = ["BUDGETS", "CONVENTIONS", "LEVELS", "validate"]
