"""Testing helpers for projects that implement a speculative-decoding verifier.

* :func:`assert_lossless` - one assertion that runs the conformance harness
  (:func:`spectr_gbv.validate.validate`) and fails with the report's text;
* :func:`assert_generation_lossless` - the same for a whole generation loop (the generation
  referee, :func:`spectr_gbv.validate.generation.validate_generation`);
* :func:`property_settings` - hypothesis settings for property tests whose examples are
  harness runs: bounded time (no shrinking, no deadline), so a failing property test ends;
* :mod:`spectr_gbv.testing.strategies` - hypothesis strategies (instances, cases, inputs,
  configs); importing it needs ``hypothesis``;
* :mod:`spectr_gbv.testing.plugin` - the pytest plugin (entry point ``spectr_gbv`` of group
  ``pytest11``): fixtures ``spectr_validate``, ``spectr_instance``, ``spectr_budget`` and the
  option ``--spectr-budget``;
* :mod:`spectr_gbv.testing.mutants` - planted bugs, fixtures for a checker's own tests: mutants
  of the reference verifiers (registries ``MUTANTS``, ``CHAIN_MUTANTS``, ``COVERAGE_MUTANTS``,
  ``DIAGNOSIS_MUTANTS``, ``VOCAB_MUTANTS``, ``ROBUSTNESS_MUTANTS``), each reproducing one public
  bug class and carrying ``bug``, the diagnosis the harness must report (its expected verdict:
  fail with that tag), beside correct verifiers (``CORRECT``, ``CHAIN_CORRECT``: ``bug == "ok"``,
  expected to pass); planted-bug generation loops and kernels
  (:mod:`~spectr_gbv.testing.mutants.generation_bugs`,
  :mod:`~spectr_gbv.testing.mutants.kernel_loops`) with their correct loops
  (:mod:`~spectr_gbv.testing.mutants.generation_loops`). ``spectr-gbv validate
  spectr_gbv.testing.mutants:reused_uniform`` runs one from the command line.

Nothing here imports torch, and the harness is imported on first use, so loading the pytest
plugin costs nothing until a fixture or :func:`assert_lossless` is used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["assert_generation_lossless", "assert_lossless", "property_settings"]


def property_settings(max_examples: int = 20, **kwargs: Any) -> Any:
    """Hypothesis settings for a property test whose examples each run the harness.

    Every example is a full harness run (seconds), so the defaults of hypothesis do not fit:
    no deadline, no shrinking (each shrink step would rerun the harness, so a failing test would
    run many more harness runs than it has examples), at most ``max_examples`` examples, and the
    "too slow" health check off.
    The run time is bounded by ``max_examples`` harness runs.

    Parameters
    ----------
    max_examples : int
        Examples per test (>= 1).
    **kwargs
        Passed on to ``hypothesis.settings`` (override any of the above).

    Returns
    -------
    hypothesis.settings
        Usable as a decorator.

    Raises
    ------
    ImportError
        hypothesis is not installed (``pip install 'spectr_gbv[test]'``).

    Examples
    --------
    >>> property_settings(max_examples=5).max_examples
    5
    """
    from hypothesis import HealthCheck, Phase, settings  # noqa: PLC0415 - optional dependency

    base: dict[str, Any] = {
        "max_examples": max_examples,
        "deadline": None,
        "phases": (Phase.explicit, Phase.reuse, Phase.generate),
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    }
    base.update(kwargs)
    return settings(**base)


def assert_lossless(
    verify: Callable[..., Any],
    *,
    interface: str = "generic",
    budget: str = "quick",
    seed: int = 0,
    reference: str | None = None,
    level: str = "statistical",
    instances: Sequence[Any] | None = None,
    probes: bool = True,
    search: bool = True,
    conventions: Sequence[str] = (),
    confirm: bool = True,
) -> Any:
    """Assert that a verifier passes the conformance harness; the failure message is the report.

    Fails when the report fails (a wrong output law, a token of target probability 0, an
    exception, hang, exit or invalid output on a valid input) and, when ``reference`` is
    given, when the output differs from that reference's conditional law. With ``confirm``,
    a failure found only by sampling is re-tested on the failing instance with fresh samples
    (seed + 1) and raised only when confirmed: a lossless verifier then fails a call with
    probability at most about alpha^2 = 1e-6, so a property test over many examples never
    reports a falsifying example the verifier is lossless on, short of that chance.

    Parameters
    ----------
    verify : callable
        The verifier, in the named interface (``"generic"``, ``"chain"`` or ``"hf"``; see
        :func:`spectr_gbv.validate.validate`).
    interface : str
        One of :data:`~spectr_gbv.validate.interfaces.names.INTERFACES`.
    budget : str
        ``"quick"`` (default, for unit tests), ``"standard"`` (the CLI default:
        total-variation error 0.02 detected with power >= 0.99 at alpha = 1e-3) or
        ``"thorough"``.
    seed : int
        Seed of every random choice of the harness (reproducible reports).
    reference : str, optional
        Stable method name the verifier claims to implement (``"sd"``, ``"bv"``, ``"mdbv"``,
        ...): adds the far more sensitive law test given the drafts and the stop position.
    level : str
        ``"statistical"`` (default) or ``"exact"`` (uses ``verify.outcome_law`` where present).
    instances : sequence, optional
        Overrides the harness's battery (items as ``validate(instances=...)`` takes them, e.g.
        the ``(instance, K)`` pairs of :func:`spectr_gbv.testing.strategies.cases`).
    probes, search : bool
        Run the fixed robustness probes and the adversarial search (default). ``False`` for
        both tests only ``instances``: in a property test, every example then tests its own
        instance, and a falsifying example is one the verifier fails on.
    conventions : sequence of str
        Conventions to check as part of the verdict (``("vllm",)``: -1 placeholder ids).
    confirm : bool
        Re-test a purely statistical failure on fresh samples before failing (default True).

    Returns
    -------
    ValidationReport
        The passing report (after an unconfirmed sampled failure: the confirmation's report,
        whose notes say so).

    Raises
    ------
    AssertionError
        When ``not report.passed`` (or the reference differs); the message is
        ``report.to_text()``.
    ValueError
        Bad arguments (raised by the harness, naming the argument).

    Examples
    --------
    >>> from spectr_gbv.core import random_instance
    >>> from spectr_gbv.testing.mutants import correct_sd, zero_coin_accepts
    >>> assert_lossless(correct_sd, level="exact", instances=[(random_instance(2, 1, 0), 1)]).passed
    True
    >>> assert_lossless(zero_coin_accepts, instances=[(random_instance(2, 1, 0), 1)])
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    __tracebackhide__ = True  # pytest: show the report, not this function's source
    from spectr_gbv.validate import validate

    def run(seed: int, instances: Any, probes: bool, search: bool) -> Any:
        return validate(
            verify,
            interface=interface,
            level=level,
            reference=reference,
            seed=seed,
            budget=budget,
            instances=instances,
            probes=probes,
            search=search,
            conventions=conventions,
        )

    report = run(seed, instances, probes, search)
    if report.exit_code == 0:
        return report
    if confirm and _sampled_only(report):
        from spectr_gbv.validate.battery import instance_from_spec  # noqa: PLC0415

        case = report.smallest_failure
        again = run(seed + 1, [instance_from_spec(case.instance)], False, False)
        if again.exit_code == 0:
            again.notes.append(
                f"the sampled failure {case.name} of the first run (seed {seed}) was not confirmed on fresh "
                f"samples (this run, seed {seed + 1}): taken as a false alarm of the test at its level"
            )
            return again
        report.notes.append(f"the failure {case.name} was confirmed on fresh samples (seed {seed + 1})")
    raise AssertionError(report.to_text())


def assert_generation_lossless(generate: Callable[..., Any], *, confirm: bool = True, **kwargs: Any) -> Any:
    """Assert that a whole generation loop samples the target's exact sequence law; the failure message is the report.

    Runs the same checks as ``spectr-gbv validate MODULE:FUNC --interface generation``
    (:func:`spectr_gbv.validate.generation.validate_generation`) and fails when the report
    fails: a wrong law of the first m tokens, a sequence of target probability 0, a law that
    depends on the draft or on the batch's other rows, or a call that raised, hung, exited or
    returned a bad output. With ``confirm``, a failure found only by a statistical test (a
    p-value above 0, no robustness failure) is re-tested with fresh seeds (harness seed + 1)
    and raised only when confirmed: a correct loop then fails with probability about
    alpha^2 = 1e-6.

    Parameters
    ----------
    generate : callable
        ``generate(target, draft, prompt_ids, max_new_tokens, *, temperature, top_k, top_p,
        seed) -> new ids`` (or its batched form with ``interface="generation_batched"``).
    confirm : bool
        Re-test a purely statistical failure before failing (default True).
    **kwargs
        Passed to :func:`~spectr_gbv.validate.generation.validate_generation` (``interface``,
        ``budget`` (default ``"quick"`` here), ``seed``, ``pairs``, ``m``, ``time_limit_s``, ...).

    Returns
    -------
    ValidationReport
        The passing report (after an unconfirmed statistical failure: the confirmation's
        report, whose notes say so).

    Raises
    ------
    AssertionError
        When the report fails; the message is ``report.to_text()``.
    ValueError
        Bad arguments or a callable with the wrong signature (raised by the referee).

    Examples
    --------
    >>> from spectr_gbv.testing.mutants.generation_loops import speculative_generate
    >>> assert_generation_lossless(speculative_generate, pairs=["far"]).passed  # doctest: +SKIP
    True
    """
    __tracebackhide__ = True  # pytest: show the report, not this function's source
    from spectr_gbv.validate.generation import validate_generation  # noqa: PLC0415

    kwargs.setdefault("budget", "quick")
    kwargs.setdefault("quiet", True)
    report = validate_generation(generate, **kwargs)
    if report.exit_code == 0:
        return report
    fails = report.failures
    if confirm and all(c.category == "statistical" and (c.p_value or 0.0) > 0.0 for c in fails):
        seed = int(kwargs.pop("seed", 0))
        again = validate_generation(generate, seed=seed + 1, **kwargs)
        if again.exit_code == 0:
            again.notes.append(
                f"the statistical failures of the first run (seed {seed}: {', '.join(c.name for c in fails)}) were "
                f"not confirmed with fresh seeds (this run, seed {seed + 1}): taken as a false alarm at the tests' "
                "level"
            )
            return again
        report = again
        report.notes.append(f"the failure was confirmed with fresh seeds (seed {seed + 1})")
    raise AssertionError(report.to_text())


def _sampled_only(report: Any) -> bool:
    """True when every failure is a statistical test on a rebuildable instance (a p-value, no probe)."""
    fails = report.failures
    return bool(fails) and all(
        c.p_value is not None and c.instance is not None and c.instance.get("kind") != "probe" for c in fails
    )
