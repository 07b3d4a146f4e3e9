"""One entry point for every method: registered (stateless, stateful or instance-specific) or a user's rule.

:func:`simulate_method` runs one exact iteration of any method on a tabular instance,
dispatching on the facts of :data:`~spectr_gbv.core.methods.METHOD_TABLE`:

* stateless registered verifiers through :func:`~spectr_gbv.simulate.exact.simulate_exact`;
* a ``stateful`` method (``greedy_bv``, needs whole tables) through
  :func:`~spectr_gbv.simulate.stateful.simulate_greedy_exact`;
* a method that ``needs_instance`` (``lp_oracle``: its kernel is the OPT(K) LP solution of
  this very instance) through :class:`~spectr_gbv.reference.lp_oracle.LPOracleVerifier`;
* a user's rule (``"module:attribute"``, a Verifier or a function;
  :func:`~spectr_gbv.reference.user_rules.resolve_rule`) through
  :func:`~spectr_gbv.simulate.exact.simulate_exact`.
"""

from __future__ import annotations

from typing import Any

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import METHOD_TABLE, is_registered, method_spec, methods_where
from spectr_gbv.reference.registry import check_method, get_verifier
from spectr_gbv.reference.user_rules import resolve_rule
from spectr_gbv.simulate.exact import ExactResult, simulate_exact
from spectr_gbv.simulate.multi import StepFn
from spectr_gbv.simulate.stateful import greedy_step, simulate_greedy_exact, stateless_step

#: Methods that are not lossless: registered verifiers whose class says ``lossless = False``
#: (kept on purpose: the released SpecTr-GBV rule, independent BV, published rules found lossy).
LOSSY_METHODS: tuple[str, ...] = methods_where(lossless=False)
#: Methods that carry state between iterations.
STATEFUL_METHODS: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.stateful)


def simulate_method(instance: Instance, method: Any, num_drafts: int) -> ExactResult:
    """Exact one-iteration result of any method (see module docstring).

    Parameters
    ----------
    instance : Instance
    method : str, Verifier, Verifier subclass or callable
        A registered name, ``"module:attribute"`` naming a user's rule, or the rule itself.
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
        :class:`~spectr_gbv.theory.lp.LPTooLargeError`); a user's function whose draws cannot
        be enumerated (:class:`~spectr_gbv.reference.user_rules.NotEnumerableError`).
    """
    if not (isinstance(method, str) and is_registered(method)):
        _, verifier = resolve_rule(method)
        return simulate_exact(instance, verifier if verifier is not None else get_verifier(method), num_drafts)
    spec = method_spec(method)
    if spec.stateful:
        return simulate_greedy_exact(instance, num_drafts)
    if spec.needs_instance:
        from spectr_gbv.reference.lp_oracle import LPOracleVerifier

        return simulate_exact(instance, LPOracleVerifier(instance, num_drafts), num_drafts)
    return simulate_exact(instance, get_verifier(method), num_drafts)


def method_step(instance: Instance, method: Any, num_drafts: int) -> StepFn:
    """The per-iteration step law of ``method`` for multi-iteration simulation.

    ``lp_oracle`` is excluded (its kernel is solved for one context only).

    Raises
    ------
    ValueError
        Unknown method or ``lp_oracle``.
    """
    if not (isinstance(method, str) and is_registered(method)):
        _, verifier = resolve_rule(method)
        return stateless_step(instance, verifier if verifier is not None else method, num_drafts)
    check_method(method)
    spec = method_spec(method)
    if spec.stateful:
        return greedy_step(instance)
    if spec.needs_instance:
        raise ValueError(f"{method} has no multi-iteration form (its LP is solved per context)")
    return stateless_step(instance, method, num_drafts)
