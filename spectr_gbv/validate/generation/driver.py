"""``validate_generation(generate, ...)``: the referee for whole speculative generation loops.

Order of a run (each step reports, none crashes the referee):

1. **interface**: the callable's signature (a wrong one is a usage error, :class:`ValueError`);
   the plan: scenarios, exact laws (:func:`~spectr_gbv.gpu.models.sequence_law.sequence_law`),
   sample sizes, the Bonferroni family.
2. **determinism** (advisory): two calls with each of :data:`DETERMINISM_SEEDS` seeds on the first
   scenario (:data:`DETERMINISM_TOKENS` tokens each); these are the run's first calls, so a
   system that raises or hangs at once stops here.
3. **sequence and positional laws** per scenario: N seeded calls in the group-sequential looks
   of :data:`~spectr_gbv.validate.checks.statistical.LOOKS` (a clearly wrong loop stops early).
4. **draft invariance** per pair: the same scenario with the pair's second draft.
5. **batch invariance** (``generation_batched``): row 0 in batches with other prompts.

A system that raises, hangs, exits or returns a bad output ends the run with one failed
``runs`` check (diagnosis ``raises``, ``timeout``, ``exits``, ``bad_output``); the report's
verdict, text, JSON and exit statuses are those of :func:`spectr_gbv.validate.validate`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.validate.checks.statistical import ALPHA, LOOKS, POWER_TARGET
from spectr_gbv.validate.generation import checks, invariance
from spectr_gbv.validate.generation.interface import (
    check_declared_interface,
    check_interface_name,
    check_signature,
    load_generate,
)
from spectr_gbv.validate.generation.plan import (
    BATCH_ROWS,
    GenerationPlan,
    Planned,
    Scenario,
    build_plan,
    describe_power,
    sizes_covered,
)
from spectr_gbv.validate.generation.runner import GenerationRunner, RunStopped
from spectr_gbv.validate.harness.support import CapturedWarnings, make_guard
from spectr_gbv.validate.interfaces.loading import UnloadableVerifier, verifier_name
from spectr_gbv.validate.report.results import CATEGORIES, CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport

#: Seeds the determinism note calls twice each.
DETERMINISM_SEEDS = 3
#: Tokens each of the determinism note's calls generates.
DETERMINISM_TOKENS = 8


def check_seed(seed: Any) -> int:
    """``seed`` as a Python int.

    Raises
    ------
    ValueError
        ``seed: expected an int >= 0, got ...`` for a negative number, a bool or a non-integer.
    """
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    return int(seed)


def _sequential(runner: GenerationRunner, plan: GenerationPlan, p: Planned) -> tuple[np.ndarray, float, str]:
    """Collect ``p.num`` calls in looks; stop at the first rejection. Returns (tokens, level, note)."""
    sc, alpha = p.scenario, plan.alpha_test
    parts: list[np.ndarray] = []
    have = 0
    for k, (frac, share) in enumerate(LOOKS, start=1):
        want = p.num if k == len(LOOKS) else max(1, int(np.ceil(p.num * frac)))
        parts.append(runner.collect(sc, want - have, plan.new_tokens(sc)))
        have = want
        tokens = np.concatenate(parts)
        level = alpha * share
        if k == len(LOOKS):
            return tokens, level, ""
        if checks.zero_probability(tokens, p.law) is not None:
            return tokens, level, f"; stopped at look {k} of {len(LOOKS)} ({have} of {p.num} planned calls)"
        e2e = checks.sequence_law(sc.label, sc.spec(), tokens, p.law, level, plan.tv)
        pos = checks.positional_law(sc.label, sc.spec(), tokens, p.law, level, plan.tv)
        if not (e2e.passed and pos.passed):
            return (
                tokens,
                level,
                (
                    f"; stopped at look {k} of {len(LOOKS)} after {have:,} of the {p.num:,} planned calls on a "
                    "rejection (conclusive; the stated power is that of the planned N)"
                ),
            )
    raise AssertionError("unreachable")  # pragma: no cover


def _neighbours(plan: GenerationPlan, p: Planned) -> list[tuple[int, ...]]:
    """Rows 1.. of a batch-invariance batch: the pair's other prompts, longest length differences first."""
    sc = p.scenario
    others = [tuple(q) for q in plan.pairs[sc.pair].prompts if tuple(q) != sc.prompt]
    others.sort(key=lambda q: -abs(len(q) - len(sc.prompt)))
    return others[: BATCH_ROWS - 1]


def _run_checks(runner: GenerationRunner, plan: GenerationPlan, report: ValidationReport) -> None:
    first = plan.scenarios[0].scenario
    seeds = list(range(runner.next_seed, runner.next_seed + DETERMINISM_SEEDS))
    runner.next_seed += DETERMINISM_SEEDS
    new = max(plan.new_tokens(first), DETERMINISM_TOKENS)  # long enough that two random outputs rarely agree
    outs = runner.full_outputs(first, new, [s for s in seeds for _ in range(2)])
    differ = [i for i in range(DETERMINISM_SEEDS) if not np.array_equal(outs[2 * i], outs[2 * i + 1])]
    i = differ[0] if differ else 0
    report.checks.append(invariance.determinism(first.spec(), outs[2 * i], outs[2 * i + 1], seeds[i], len(seeds)))
    samples: dict[Scenario, np.ndarray] = {}
    stopped: list[str] = []
    for p in plan.scenarios:
        sc = p.scenario
        tokens, level, note = _sequential(runner, plan, p)
        samples[sc] = tokens
        if note:
            stopped.append(sc.label)
        found = [
            checks.sequence_law(sc.label, sc.spec(), tokens, p.law, level, plan.tv, note),
            checks.positional_law(sc.label, sc.spec(), tokens, p.law, level, plan.tv, note),
        ]
        # a rejection at an early look is conclusive; the stated power belongs to the planned N
        report.checks.extend(dataclasses.replace(c, power=None) if note else c for c in found)
    for p in plan.invariance:
        sc = p.scenario
        base = samples[sc]
        alt = runner.collect(sc, p.num, plan.new_tokens(sc), which="alt_draft", what=f"draft_invariance[{sc.pair}]")
        report.checks.append(
            invariance.draft_invariance(sc.pair, sc.spec(), base, alt, p.law, plan.alpha_test, plan.tv)
        )
    for p in plan.batch:
        sc = p.scenario
        nb = _neighbours(plan, p)
        spec = {**sc.spec(), "neighbours": [list(q) for q in nb]}
        batched = runner.collect(sc, p.num, plan.new_tokens(sc), neighbours=nb, what=f"batch_invariance[{sc.label}]")
        report.checks.append(
            invariance.batch_invariance(sc.label, spec, batched, samples[sc], p.law, plan.alpha_test, plan.tv)
        )
    if stopped:
        report.settings["stopped_early"] = stopped


def validate_generation(
    generate: Callable[..., Any] | str,
    *,
    interface: str = "generation",
    budget: str = "standard",
    seed: int = 0,
    time_limit_s: float = 60.0,
    isolation: str | None = None,
    workers: int | None = None,
    pairs: Any = None,
    m: int | None = None,
    max_new_tokens: int | None = None,
    quiet: bool | None = None,
) -> ValidationReport:
    """Check that a complete speculative generation loop samples the target's exact sequence law.

    The referee gives the system reference models (causal LMs whose law is known exactly,
    :mod:`spectr_gbv.gpu.models.reference_pairs`), a prompt, sampling settings and a seed;
    the system drafts, verifies and manages its caches itself. The first m generated tokens of N
    seeded calls per scenario are tested against the target's exact law after temperature,
    top-k and top-p (transformers' warpers, in that order).

    Parameters
    ----------
    generate : callable or str
        ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p,
        seed) -> new ids`` (``list[int]``, 1-D numpy array or torch tensor of length
        ``max_new_tokens``); with ``interface="generation_batched"`` ``prompt_ids`` is a list of
        B prompts (ragged) and the result a list of B such outputs. A string is loaded with
        :func:`~spectr_gbv.validate.generation.interface.load_generate` (``MODULE:FUNC`` or a
        ready adapter's name such as ``"hf-assisted"``).
    interface : str
        ``"generation"`` or ``"generation_batched"``.
    budget : str
        ``"quick"`` (TV 0.2, two scenarios: for unit tests), ``"standard"`` (TV 0.1, the
        default: every reference pair) or ``"thorough"`` (TV 0.05, m = 3 everywhere); see
        :mod:`spectr_gbv.validate.generation.plan`.
    seed : int
        Harness seed (>= 0): call i of the run gets seed ``seed * 10**6 + i``.
    time_limit_s : float
        Seconds one generate call may take before it counts as hung.
    isolation : str, optional
        ``"process"`` (default where fork exists: forked workers that inherit the models) or
        ``"thread"``.
    workers : int, optional
        Worker processes (default ``min(2, os.cpu_count())``).
    pairs : sequence of str or ReferencePair, optional
        Run only the scenarios on these reference pairs; a ``ReferencePair``-like object is a
        custom pair (its target a ``ReferenceLM``: the exact law must be known), tested at T = 1,
        m = 2 on its first prompt (:func:`~spectr_gbv.validate.generation.plan.check_custom_pair`).
    m : int, optional
        Test the first m tokens in every scenario (default: the budget's, 2 or 3).
    max_new_tokens : int, optional
        ``max_new_tokens`` passed to the system (default m); must be >= m.
    quiet : bool, optional
        Hide the progress bar (stderr, shown on a terminal); None follows
        :func:`spectr_gbv.core.progress.set_quiet` and ``SPECTR_GBV_QUIET``.

    Returns
    -------
    ValidationReport
        ``interface`` the one given, ``level_used`` ``"statistical"``; ``passed`` is False iff a
        law check rejected, a sequence of probability 0 was generated, or the system raised,
        hung, exited or returned a bad output.

    Raises
    ------
    ValueError
        One line: unknown interface, budget or pair, a bad seed, time limit or worker count,
        a callable with the wrong signature, an unknown adapter, ``m`` too large to enumerate,
        ``max_new_tokens < m``. Failures *of the system* never raise: they are reported.

    References
    ----------
    Leviathan et al., Fast Inference from Transformers via Speculative Decoding, ICML 2023
    (the loop's output law must be the target's); THEORY.md section 2; docs/validate.md.

    Examples
    --------
    >>> from spectr_gbv.validate.generation import validate_generation
    >>> rep = validate_generation("hf-assisted", budget="quick")  # doctest: +SKIP
    >>> rep.passed  # doctest: +SKIP
    True
    """
    t0 = time.perf_counter()
    check_interface_name(interface)
    seed = check_seed(seed)
    if isinstance(generate, str):
        generate = load_generate(generate, isolation=isolation)
    if not isinstance(generate, UnloadableVerifier):
        check_signature(generate, interface)
        check_declared_interface(generate, interface)
    guard = make_guard(time_limit_s, isolation, workers)
    plan = build_plan(budget, interface=interface, pairs=pairs, m=m, max_new_tokens=max_new_tokens)

    def runner(bar: Any) -> GenerationRunner:
        return GenerationRunner(generate, plan.pairs, guard, interface == "generation_batched", seed, bar.update)

    return run_referee(generate, interface, plan, guard, runner, seed, budget, time_limit_s, quiet, t0)


def run_referee(
    system: Any,
    interface: str,
    plan: GenerationPlan,
    guard: Any,
    make_runner: Callable[[Any], GenerationRunner],
    seed: int,
    budget: str,
    time_limit_s: float,
    quiet: bool | None,
    t0: float,
    settings: dict[str, Any] | None = None,
) -> ValidationReport:
    """Run a planned generation-referee run and assemble its report (the body of :func:`validate_generation`).

    Parameters
    ----------
    system : callable or UnloadableVerifier
        The system under test (its signature already checked).
    interface : str
        The report's interface name.
    plan : GenerationPlan
    guard : CallGuard
        Closed when the run ends.
    make_runner : callable
        ``make_runner(bar) -> GenerationRunner`` (``bar.update`` is the progress callback).
    seed, budget, time_limit_s, quiet
        As :func:`validate_generation`.
    t0 : float
        ``time.perf_counter()`` at the start of the call (the report's elapsed time).
    settings : dict, optional
        Extra entries of the report's ``settings``.

    Returns
    -------
    ValidationReport
    """
    name = getattr(system, "adapter_name", None) or verifier_name(system)
    report = ValidationReport(str(name), interface, "statistical", "statistical", None, seed, budget)
    from spectr_gbv.core.progress import progress  # noqa: PLC0415

    bar = progress(plan.total_calls, f"validate {interface.replace('_', ' ')} ({budget})", quiet=quiet, unit="calls")
    runner = make_runner(bar)
    crash: CheckResult | None = None
    with CapturedWarnings() as captured:
        try:
            if isinstance(system, UnloadableVerifier):
                err = system.failure
                crash = CheckResult("runs", "robustness", False, detail=str(err), diagnosis=err.diagnosis)
            else:
                _run_checks(runner, plan, report)
        except RunStopped as stop:
            crash = stop.check
            report.notes.append(
                f"the run stopped after the system failed ({crash.diagnosis}); later checks were not run"
            )
        finally:
            bar.close()
            guard.close()
    if captured.total:
        report.notes.append(captured.summary().replace("probes feed degenerate inputs on purpose", "the system's own"))
    report.checks.append(
        crash
        or CheckResult(
            "runs",
            "robustness",
            True,
            sample_size=runner.calls,
            detail=f"no {'kernel' if interface == 'self_drafting' else 'generate'} call raised, hung, exited or "
            "returned a bad output",
        )
    )
    report.checks.sort(key=lambda c: CATEGORIES.index(c.category))
    report.settings.update(
        {
            "alpha_family": ALPHA,
            "family_size": plan.family_size,
            "power_target": POWER_TARGET,
            "tv_detected": plan.tv,
            "power": describe_power(plan),
            "calls_per_scenario": {p.scenario.label: p.num for p in plan.scenarios},
            "sizes_covered": sizes_covered(plan),
            "max_new_tokens": "each scenario's m" if plan.max_new_tokens is None else plan.max_new_tokens,
            "determinism_calls": f"{DETERMINISM_SEEDS} seeds x 2 calls of max(m, {DETERMINISM_TOKENS}) new tokens",
            "looks": (
                "each law test runs in group-sequential looks (validate.checks.statistical.LOOKS), each look at a "
                "share of the test's level, so a check's detail may state a smaller level than the family's"
            ),
            "verifier_calls": runner.calls,
            "seconds_in_generate": round(runner.seconds_in_calls, 3),
            "time_limit_s_per_call": time_limit_s,
            **(settings or {}),
        }
    )
    report.elapsed_s = time.perf_counter() - t0
    return report


__all__ = ["DETERMINISM_SEEDS", "DETERMINISM_TOKENS", "check_seed", "run_referee", "validate_generation"]
