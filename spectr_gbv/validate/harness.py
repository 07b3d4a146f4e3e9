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
total-variation error of 0.01 (``budget="standard"``; quick 0.05, thorough 0.005).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np

from spectr_gbv.simulate.exact import expected_accepted
from spectr_gbv.validate import (
    adversarial,
    checks_exact,
    checks_probes,
    checks_statistical,
    checks_structural,
    reference_check,
)
from spectr_gbv.validate.battery import BatteryInstance, Tables, default_battery, user_battery
from spectr_gbv.validate.calls import CallGuard, VerifierFailure, VerifierTimedOut
from spectr_gbv.validate.interfaces import Adapter, check_interface, make_adapter
from spectr_gbv.validate.report import CATEGORIES, CheckResult, ValidationReport

LEVELS: tuple[str, ...] = ("exact", "statistical")
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")
#: Reference check: TV error (in the conditional law) detected with power 0.99, as a multiple of the budget's.
REFERENCE_TV_FACTOR = 3.0
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

    def add(self, *checks: CheckResult) -> None:
        self.report.checks.extend(checks)

    def guarded(self, name: str, spec: dict[str, Any] | None, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call ``fn``; record a raise (run continues) or a timeout (run stops)."""
        try:
            return fn(*args, **kw)
        except VerifierTimedOut as err:
            self.crash = checks_structural.failure_result("runs", "robustness", err, spec)
            raise _Stop from err
        except VerifierFailure as err:
            if self.crash is None:
                self.crash = checks_structural.failure_result("runs", "robustness", err, spec)
                self.crash = dataclasses.replace(self.crash, detail=f"during {name}: {err}")
            self.report.notes.append(f"{name}: skipped, the verifier raised ({err})")
            return None


def _check_args(level: str, budget: str, seed: Any, reference: str | None) -> None:
    if level not in LEVELS:
        raise ValueError(f"level: expected one of {', '.join(LEVELS)}, got {level!r}")
    if budget not in BUDGETS:
        raise ValueError(f"budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    if reference is not None and not isinstance(reference, str):
        raise ValueError(f"reference: expected a method name or None, got {type(reference).__name__}")
    if reference is not None:
        from spectr_gbv.reference import available_methods

        if reference not in available_methods():
            raise ValueError(f"reference: unknown method {reference!r}; valid: {', '.join(available_methods())}")


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
        ``"standard"`` (TV 0.01, the harness's full power target) or ``"thorough"`` (TV 0.005).
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

    Returns
    -------
    ValidationReport
        ``passed`` is False iff some check failed; ``failures``, ``smallest_failure``,
        ``to_text()``, ``to_json()``.

    Raises
    ------
    ValueError
        Unknown interface, level, budget or reference; a bad seed, time limit or instance
        list; ``verify`` not callable; interface ``"hf"`` without torch. Failures *of the
        verifier* never raise: they are reported.

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
    reference = reference_check.check_reference(reference)
    guard = CallGuard(time_limit_s)
    adapter = make_adapter(verify, interface, guard)
    battery = (
        user_battery(instances, 1 if adapter.single_draft else None)
        if instances is not None
        else default_battery(1 if adapter.single_draft else None)
    )
    report = ValidationReport(adapter.name, interface, level, level, reference, int(seed), budget)
    run = _Run(adapter, report)
    with _CapturedWarnings() as captured:
        try:
            _phases(run, verify, battery, level, reference, int(seed), budget, probes=probes, search=search)
        except _Stop:
            report.notes.append("the run stopped after the verifier hung; later checks were not run")
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
    report.settings["verifier_calls"] = guard.calls
    report.settings["time_limit_s_per_call"] = time_limit_s
    report.elapsed_s = time.perf_counter() - t0
    return report


class _CapturedWarnings:
    """Count the Python warnings issued during a run instead of printing them.

    Probes feed degenerate inputs on purpose, so a verifier's ``RuntimeWarning`` (0/0, NaN)
    would otherwise be printed between the report's lines, or fill pytest's warning summary.
    Counts are kept per (category, first line of the message), at most 20 distinct ones.
    """

    MAX_KINDS = 20

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.total = 0
        self._ctx = warnings.catch_warnings()

    def _show(self, message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
        self.total += 1
        key = f"{category.__name__}: {str(message).strip().splitlines()[0][:120] if str(message).strip() else ''}"
        if key in self.counts or len(self.counts) < self.MAX_KINDS:
            self.counts[key] = self.counts.get(key, 0) + 1

    def __enter__(self) -> _CapturedWarnings:
        self._ctx.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = self._show
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)

    def summary(self) -> str:
        """One note: how many warnings, the most frequent kinds."""
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:3]
        kinds = "; ".join(f"{k} (x{n})" for k, n in top)
        plural = "warning was" if self.total == 1 else "warnings were"
        return (
            f"{self.total} Python {plural} issued during the run (probes feed degenerate inputs on purpose) "
            f"and captured, not printed: {kinds}"
        )


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
        report.notes.append("the verifier raised on the first batch: no other check was run")
        return

    # 2. structural probes
    K0 = first.K
    run.add(run.guarded("determinism", first.spec(), checks_probes.check_determinism, adapter, tables0, first, seed))
    if probes:
        for res in run.guarded("placeholder probe", None, checks_probes.check_placeholders, adapter, K0, seed) or []:
            run.add(res)
        run.add(run.guarded("zero-coin probe", None, checks_probes.check_zero_coin, adapter, K0, seed))
        run.add(
            run.guarded("degenerate residual probe", None, checks_probes.check_degenerate_residual, adapter, K0, seed)
        )
        run.add(run.guarded("NaN probe", None, checks_probes.check_nan_row, adapter, K0, seed))
        if adapter.interface == "chain":
            res, run.reuse_seen = checks_probes.check_uniform_reuse(adapter, seed)
            run.add(res)
    else:
        report.notes.append("probes skipped (probes=False): placeholder ids, zero coin, all-zero residual, NaN row")
    report.checks = [c for c in report.checks if c is not None]

    # significance plan
    tv = checks_statistical.TV_BY_BUDGET[budget]
    alpha = checks_statistical.ALPHA

    # 3. exact level
    ex = _Exact()
    if level == "exact":
        _exact_phase(run, verify, battery, reference, seed, budget, ex)
        if not ex.done:
            report.level_used = f"statistical (exact unavailable: {ex.why})"
        elif len(ex.laws) < len(battery):
            report.level_used = "exact (statistical where noted)"
        else:
            report.level_used = "exact"
    stat_battery = [bi for bi in battery if bi.label not in ex.laws]

    family = max(3 * len(stat_battery) + (len(stat_battery) if reference else 0) + (1 if search else 0), 1)
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
    for bi in stat_battery:
        N = checks_statistical.sample_size(bi, alpha_test, tv)
        sizes[bi.label] = N
        s = run.guarded(
            f"statistical[{bi.label}]", bi.spec(), checks_statistical.collect, adapter, bi, N, rng, run.tally
        )
        if s is None:
            continue
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
        run.add(*checks_statistical.law_checks(s, alpha_test, tv, reference, run.reuse_seen))
        run.add(checks_statistical.efficiency(s, alpha_test))
    if sizes:
        report.settings["samples_per_instance"] = sizes

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
        "sizes": list(adversarial.SIZES_SINGLE if adapter.single_draft else adversarial.SIZES_MULTI),
    }


@dataclasses.dataclass
class _Exact:
    """Outcome of the exact phase."""

    done: bool = False
    why: str = ""
    laws: dict[str, Any] = dataclasses.field(default_factory=dict)
    search: Any = None
    confirm: Any = None
    tol: float = 0.0


def _exact_phase(
    run: _Run, verify: Any, battery: list[BatteryInstance], reference: str | None, seed: int, budget: str, ex: _Exact
) -> None:
    """Exact checks; fills ``ex`` (laws per instance, scorers for the adversarial search)."""
    from spectr_gbv.simulate.exact import validity_defect  # noqa: PLC0415

    adapter, report = run.adapter, run.report
    if adapter.interface == "generic":
        law_fn = checks_exact.find_outcome_law(verify)
        if law_fn is None:
            ex.why = "the verifier exposes no outcome_law"
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        checks, laws = run.guarded(
            "exact level", None, checks_exact.outcome_law_checks, law_fn, battery, adapter, reference
        ) or ([], {})
        if not laws:
            ex.why = checks[0].detail if checks else "outcome_law could not be evaluated"
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        run.add(*checks)
        ex.done, ex.laws, ex.tol = True, laws, checks_exact.FLOAT_TOL
        _exact_efficiency(run, laws, battery)
        # the sampler must follow the declared law
        rng = np.random.default_rng([seed, 4])
        tv_ref = min(REFERENCE_TV_FACTOR * checks_statistical.TV_BY_BUDGET[budget], 0.2)
        res = run.guarded("sampler check", None, _sampler_checks, adapter, battery, law_fn, rng, run.tally, tv_ref)
        if res:
            run.add(*res)

        def scorer(bi: BatteryInstance) -> float:
            try:
                law, exact, _ = checks_exact.declared_law(law_fn, bi, adapter, None)
            except checks_exact.ExactUnavailable:
                return -1.0
            target = bi.instance.target if exact else bi.instance.target.to_float()
            return float(validity_defect(target, law, bi.instance.L))

        ex.search = ex.confirm = scorer
        return
    if adapter.interface == "chain":
        out = run.guarded("exact level", None, checks_exact.chain_checks, adapter, battery, reference, seed)
        if out is None:
            ex.why = "the verifier raised during the breakpoint sweep"
            return
        checks, ok, laws = out
        if not ok:
            ex.why = checks[0].detail.removeprefix("exact level unavailable: ")
            report.notes.append(f"level exact: {ex.why}; statistical level used")
            return
        run.add(*checks)
        ex.done, ex.laws, ex.tol = True, laws, checks_exact.CHAIN_TOL
        _exact_efficiency(run, laws, battery)

        def chain_confirm(bi: BatteryInstance) -> float:
            try:
                law, _, _ = checks_exact.chain_law(adapter, bi, seed)
            except checks_exact.ExactUnavailable:
                return -1.0
            return float(validity_defect(bi.float_instance.target, law, bi.instance.L))

        ex.confirm = chain_confirm  # the search itself samples (bisection per candidate is too costly)
        return
    ex.why = "the hf interface draws from torch's global RNG (no supplied uniforms, no declared law)"
    report.notes.append(f"level exact: {ex.why}; statistical level used")


def _exact_efficiency(run: _Run, laws: dict[str, Any], battery: list[BatteryInstance]) -> None:
    for bi in battery:
        if bi.label not in laws:
            continue
        law = laws[bi.label]
        e_tau = float(expected_accepted(law))
        bbv, opt, ot, note = checks_statistical._optima(bi)  # noqa: SLF001 - shared cache
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
    tally: checks_structural.StructuralTally,
    tv: float,
) -> list[CheckResult]:
    """The sampler against its own declared law on fixed drafts (first three instances)."""
    out = []
    for res in reference_check.reference_checks(
        adapter, battery[:3], "declared", rng, checks_statistical.ALPHA / 3, tv, tally, law_fn=law_fn
    ):
        out.append(
            dataclasses.replace(
                res, name=res.name.replace("reference_law", "sampler_matches_outcome_law"), category="exact"
            )
        )
    return out


__all__ = ["BUDGETS", "LEVELS", "validate"]
