"""One entry point for every stable method name, stateless, stateful or instance-specific.

:func:`simulate_method` runs one exact iteration of any method in
:data:`~spectr_gbv.reference.registry.STABLE_METHOD_NAMES` on a tabular instance:

* row-based verifiers (``ar``, ``sd``, ``bv``, ``spectr``, ``rrs``, ``gbv_multipath``,
  ``mdbv``, ``spectr_gbv_released``, ``independent_bv``) through
  :func:`~spectr_gbv.simulate.exact.simulate_exact`;
* ``greedy_bv`` (stateful, needs whole tables) through
  :func:`~spectr_gbv.simulate.stateful.simulate_greedy_exact`;
* ``lp_oracle`` (its kernel is the OPT(K) LP solution of this very instance) through
  :class:`~spectr_gbv.reference.lp_oracle.LPOracleVerifier`.
"""

from __future__ import annotations

from spectr_gbv.core.instance import Instance
from spectr_gbv.reference.registry import available_methods, check_method, get_verifier
from spectr_gbv.simulate.exact import ExactResult, simulate_exact
from spectr_gbv.simulate.multi import StepFn
from spectr_gbv.simulate.stateful import greedy_step, simulate_greedy_exact, stateless_step

#: Methods that are not lossless: registered verifiers whose class says ``lossless = False``
#: (kept on purpose: the released SpecTr-GBV rule, independent BV, published rules found lossy).
LOSSY_METHODS: tuple[str, ...] = tuple(m for m in available_methods() if not get_verifier(m).lossless)
#: Methods that carry state between iterations.
STATEFUL_METHODS = ("greedy_bv",)


def simulate_method(instance: Instance, method: str, num_drafts: int) -> ExactResult:
    """Exact one-iteration result of any stable method (see module docstring).

    Parameters
    ----------
    instance : Instance
    method : str
        A stable method name.
    num_drafts : int
        K >= 1.

    Returns
    -------
    ExactResult

    Raises
    ------
    ValueError
        Unknown method, bad K, or an enumeration / LP too large (the subclasses
        :class:`~spectr_gbv.simulate.exact.EnumerationTooLargeError` and
        :class:`~spectr_gbv.theory.lp.LPTooLargeError`).
    """
    check_method(method)
    if method == "greedy_bv":
        return simulate_greedy_exact(instance, num_drafts)
    if method == "lp_oracle":
        from spectr_gbv.reference.lp_oracle import LPOracleVerifier

        return simulate_exact(instance, LPOracleVerifier(instance, num_drafts), num_drafts)
    return simulate_exact(instance, get_verifier(method), num_drafts)


def method_step(instance: Instance, method: str, num_drafts: int) -> StepFn:
    """The per-iteration step law of ``method`` for multi-iteration simulation.

    ``lp_oracle`` is excluded (its kernel is solved for one context only).

    Raises
    ------
    ValueError
        Unknown method or ``lp_oracle``.
    """
    check_method(method)
    if method == "greedy_bv":
        return greedy_step(instance)
    if method == "lp_oracle":
        raise ValueError("lp_oracle has no multi-iteration form (its LP is solved per context)")
    return stateless_step(instance, method, num_drafts)
