"""Testing helpers for projects that implement a speculative-decoding verifier.

* :func:`assert_lossless` - one assertion that runs the conformance harness
  (:func:`spectr_gbv.validate.validate`) and fails with the report's text;
* :mod:`spectr_gbv.testing.strategies` - hypothesis strategies (instances, cases, inputs,
  configs); importing it needs ``hypothesis``;
* :mod:`spectr_gbv.testing.plugin` - the pytest plugin (entry point ``spectr_gbv`` of group
  ``pytest11``): fixtures ``spectr_validate``, ``spectr_instance``, ``spectr_budget`` and the
  option ``--spectr-budget``.

Nothing here imports torch, and the harness is imported on first use, so loading the pytest
plugin costs nothing until a fixture or :func:`assert_lossless` is used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["assert_lossless"]


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
) -> Any:
    """Assert that a verifier passes the conformance harness; the failure message is the report.

    Parameters
    ----------
    verify : callable
        The verifier, in the named interface (``"generic"``, ``"chain"`` or ``"hf"``; see
        :func:`spectr_gbv.validate.validate`).
    interface : str
        One of :data:`~spectr_gbv.validate.interfaces.INTERFACES`.
    budget : str
        ``"quick"`` (default, for unit tests), ``"standard"`` (the harness's full power target:
        total-variation error 0.01 detected with power >= 0.99 at alpha = 1e-3) or
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

    Returns
    -------
    ValidationReport
        The passing report.

    Raises
    ------
    AssertionError
        When ``not report.passed``; the message is ``report.to_text()``.
    ValueError
        Bad arguments (raised by the harness, naming the argument).

    Examples
    --------
    >>> from spectr_gbv.core import random_instance
    >>> from spectr_gbv.validate.mutants import correct_sd, zero_coin_accepts
    >>> assert_lossless(correct_sd, level="exact", instances=[(random_instance(2, 1, 0), 1)]).passed
    True
    >>> assert_lossless(zero_coin_accepts, instances=[(random_instance(2, 1, 0), 1)])
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    __tracebackhide__ = True  # pytest: show the report, not this function's source
    from spectr_gbv.validate import validate

    report = validate(
        verify,
        interface=interface,
        level=level,
        reference=reference,
        seed=seed,
        budget=budget,
        instances=instances,
        probes=probes,
        search=search,
    )
    if not report.passed:
        raise AssertionError(report.to_text())
    return report
