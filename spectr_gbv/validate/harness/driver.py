"""``validate(verify, ...)``: run every check of the conformance harness on one verifier.

Order of a run (each phase reports, none crashes the harness):

1. **runs**: a first batch on the first battery instance (numpy arrays; torch tensors when
   numpy raises). A verifier that raises or hangs there gets one failed check and nothing else.
2. **structural probes**: determinism, -1 placeholder ids, coins of exactly 0, all-zero
   residuals (forced coins, and forcing-free rows run 20 times with ordinary randomness), a
   NaN target row, and (chain) whether corrections reuse the deciding uniform.
3. **exact level** (``level="exact"``): declared ``outcome_law`` or, for chain verifiers, the
   law located by bisection of the uniforms; falls back to 4 when unavailable (noted).
4. **statistical level**: sampled battery, end-to-end and positional G-tests, E[tau] vs bounds.
5. **reference** (``reference=NAME``): conditional law on fixed drafts vs the named algorithm.
6. **adversarial search** with a held-out confirmation.
7. **structural tally** over every output collected in 1-6.

Significance: the statistical tests of a run form one family at ``alpha = 1e-3``
(Bonferroni: each test at ``alpha / family``); sample sizes give power 0.99 against a
total-variation error of 0.02 (``budget="standard"``; quick 0.1, thorough 0.01). Each law test runs
in group-sequential looks (:data:`~spectr_gbv.validate.checks.statistical.LOOKS`), so a clearly wrong
verifier stops early; the verifier runs in worker processes (``isolation``), batches concurrently.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from spectr_gbv.validate.battery import default_battery, user_battery
from spectr_gbv.validate.harness.options import ValidateOptions
from spectr_gbv.validate.harness.phases import run_phases
from spectr_gbv.validate.harness.state import RunContext, RunStopped
from spectr_gbv.validate.harness.support import CapturedWarnings, make_guard, progress_bar, sizes_covered
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.report.results import CATEGORIES, CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport

#: The law checks a reused uniform can explain (re-diagnosed ``reuses_uniform`` when the chain probe saw one).
_LAW_CHECKS = (
    "exact_defect",
    "reference_law",
    "reference_law_exact",
    "end_to_end_law",
    "positional_law",
    "adversarial_search",
)


def _as_reuse(c: CheckResult) -> CheckResult:
    if c.passed is False and c.name.split("[")[0] in _LAW_CHECKS and c.diagnosis in ("not_lossless", "wrong_residual"):
        return dataclasses.replace(c, diagnosis="reuses_uniform")
    return c


def _options(options: ValidateOptions | None, keywords: dict[str, Any]) -> ValidateOptions:
    """The run's options: ``options`` as given, or built from ``validate``'s keywords (not both)."""
    unknown = [k for k in keywords if k not in ValidateOptions.field_names()]
    if unknown:
        raise TypeError(f"validate() got an unexpected keyword argument {unknown[0]!r}")
    if options is None:
        return ValidateOptions(**keywords)
    if keywords:
        raise ValueError(
            f"options: pass either options=ValidateOptions(...) or keywords, not both (got options and "
            f"{', '.join(sorted(keywords))})"
        )
    if not isinstance(options, ValidateOptions):
        raise ValueError(f"options: expected a ValidateOptions, got {type(options).__name__}")
    return options


def validate(verify: Any, *, options: ValidateOptions | None = None, **keywords: Any) -> ValidationReport:
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
    options : ValidateOptions, optional
        The run's options, checked when built (:class:`~spectr_gbv.validate.harness.options.ValidateOptions`,
        whose fields are documented there). Without it, ``validate`` builds one from its keywords.
    **keywords
        The fields of :class:`~spectr_gbv.validate.harness.options.ValidateOptions`, as keywords:
        ``interface`` (``"generic"``, ``"chain"``, ``"hf"``, ...), ``level`` (``"exact"`` or
        ``"statistical"``), ``reference`` (a method name, e.g. ``"sd"``, ``"mdbv"``), ``seed`` (>= 0),
        ``budget`` (``"quick"``, ``"standard"``, ``"thorough"``), ``time_limit_s`` (seconds one call
        may take before it counts as hung), ``instances`` (replaces the battery), ``probes``,
        ``search`` (False skips the robustness probes or the adversarial search), ``conventions``
        (``("vllm",)`` makes the -1 placeholder probes count), ``isolation`` (``"process"`` or
        ``"thread"``), ``workers`` and ``quiet``. Not together with ``options``.

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
        instance list; ``verify`` not callable; interface ``"hf"`` without torch; ``options``
        together with keywords, or not a ``ValidateOptions``. Failures *of the verifier* never
        raise: they are reported.
    TypeError
        A keyword that is not a field of ``ValidateOptions``.

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
    opts = _options(options, keywords)
    guard = make_guard(opts.time_limit_s, opts.isolation, opts.workers)
    adapter = make_adapter(verify, opts.interface, guard)
    battery = (
        user_battery(opts.instances, 1 if adapter.single_draft else None)
        if opts.instances is not None
        else default_battery(1 if adapter.single_draft else None)
    )
    report = ValidationReport(
        adapter.name, opts.interface, opts.level, opts.level, opts.reference, opts.seed, opts.budget
    )
    run = RunContext(adapter, report, verify, battery, opts)
    bar = progress_bar(adapter, battery, opts.budget, opts.reference, opts.search, opts.quiet)
    with CapturedWarnings() as captured:
        try:
            run_phases(run)
        except RunStopped:
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
    if opts.conventions:
        report.settings["conventions"] = list(opts.conventions)
    report.settings["sizes_covered"] = sizes_covered(battery, opts.budget, adapter.single_draft, opts.search)
    report.settings["verifier_calls"] = guard.calls
    report.settings["time_limit_s_per_call"] = opts.time_limit_s
    report.elapsed_s = time.perf_counter() - t0
    return report


__all__ = ["validate"]
