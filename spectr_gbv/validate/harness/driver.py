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

import time
from typing import Any

import numpy as np

from spectr_gbv.validate.battery import default_battery, user_battery
from spectr_gbv.validate.checks import reference as reference_check
from spectr_gbv.validate.harness.phases import _as_reuse, _phases
from spectr_gbv.validate.harness.state import _Run, _Stop
from spectr_gbv.validate.harness.support import CapturedWarnings, make_guard, progress_bar, sizes_covered
from spectr_gbv.validate.interfaces.names import check_interface
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.report.results import CATEGORIES, CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport

LEVELS: tuple[str, ...] = ("exact", "statistical")
BUDGETS: tuple[str, ...] = ("quick", "standard", "thorough")
#: Conventions an interface does not promise, which a run checks only when declared:
#: ``"vllm"``: drafts padded with -1 placeholder ids (stop there and draw from the target row).
CONVENTIONS: tuple[str, ...] = ("vllm",)


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
        ``"quick"`` (TV 0.1 detected with power 0.99, ``wide_vocab`` at 0.3, a lighter search:
        seconds for a fast verifier, for unit tests and a first look),
        ``"standard"`` (TV 0.02, the default) or ``"thorough"`` (TV 0.01).
    time_limit_s : float
        Seconds one verifier call may take before it counts as hung.
    instances : optional
        Replaces the battery: an :class:`~spectr_gbv.core.Instance`, an ``(Instance, K)``
        pair, a :class:`~spectr_gbv.validate.battery.instance.BatteryInstance`, or a list of them (K
        defaults to 2, or 1 for chain/hf).
    probes : bool
        Run the fixed robustness probes (placeholder ids, a zero coin, all-zero residuals
        forced and forcing-free, a NaN target row; chain: uniform reuse). False tests only the instances (and the
        determinism check on the first), e.g. in a property test whose examples are instances;
        the report notes what was skipped.
    search : bool
        Run the adversarial search. False likewise.
    conventions : sequence of str or str
        Conventions the interface does not promise, to check as part of the verdict (see
        :data:`~spectr_gbv.validate.harness.driver.CONVENTIONS`): ``("vllm",)`` makes the -1
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


__all__ = ["BUDGETS", "CONVENTIONS", "LEVELS", "validate"]
