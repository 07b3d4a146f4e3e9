"""One sweep task, computed without Ray: the rows of one instance for every (method, K).

:func:`run_task` is pure (no Ray, no files): the runner calls it inside a Ray worker, the
benchmark and the tests call it directly. Per K it computes the requested method-independent
measures once (the CIC bounds B(K) and B_BV(K), exact; the LP optima OPT(K) and OT(K), float64),
then per method the exact one-iteration result of
:func:`~spectr_gbv.simulate.methods.simulate_method`, timed. A ``ValueError`` (an LP or an
enumeration too large, an invalid instance file) never escapes: the failed measures are null
and the row's ``error`` column says what failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from spectr_gbv.sweep.grid import Task, build_instance
from spectr_gbv.sweep.schema import COLUMNS


def exact_text(value: Fraction | float) -> str:
    """The exact-string column of a value: ``"a/b"`` for a Fraction, the float's ``repr`` otherwise.

    Examples
    --------
    >>> exact_text(Fraction(61, 36)), exact_text(0.5)
    ('61/36', '0.5')
    """
    from spectr_gbv.core.numbers import json_value

    out = json_value(value)
    return out if isinstance(out, str) else repr(float(out))


def _one_line(exc: BaseException) -> str:
    """``"Type: message"`` on one line (cut to 500 characters)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= 500 else text[:497] + "..."


def _attempt(errors: list[str], what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None with ``"what: Type: message"`` appended to ``errors`` on a ValueError / LP failure."""
    from spectr_gbv.theory.lp import LPSolveError

    try:
        return fn()
    except (ValueError, LPSolveError) as exc:
        errors.append(f"{what}: {_one_line(exc)}")
        return None


def _measures(instance: Any, k: int, measures: tuple[str, ...], errors: list[str]) -> dict[str, Any]:
    """The method-independent columns of (instance, K): bounds and LP optima requested."""
    from spectr_gbv.theory.bounds import cic_bound, cic_bound_lossless
    from spectr_gbv.theory.lp import optimal_coupling, optimal_lossless

    out: dict[str, Any] = {}
    if "bounds" in measures:
        for column, fn in (("cic_bound", cic_bound), ("cic_bound_lossless", cic_bound_lossless)):
            value = _attempt(errors, column, lambda fn=fn: fn(instance.target, instance.draft, k, instance.L))
            if value is not None:
                out[column] = exact_text(value)
                out[f"{column}_float"] = float(value)
    if "opt" in measures:
        out["opt"] = _attempt(
            errors, "opt", lambda: float(optimal_lossless(instance.target, instance.draft, k, instance.L).value)
        )
    if "ot" in measures:
        out["ot"] = _attempt(
            errors, "ot", lambda: float(optimal_coupling(instance.target, instance.draft, k, instance.L).value)
        )
    return out


def run_task(task: Task) -> list[dict[str, Any]]:
    """The rows of one task: one per (method, K), in the task's method-major order.

    Parameters
    ----------
    task : Task
        The instance (rebuilt from ``Task.spec``), methods, K values and measures.

    Returns
    -------
    list of dict
        One row per method and K it runs at (:meth:`~spectr_gbv.sweep.grid.Task.method_ks`:
        K = 1 only for a single-draft method or ``ar``), each with exactly the keys of
        :data:`~spectr_gbv.sweep.schema.COLUMNS`. Exact values are strings
        (:func:`exact_text`) beside their float64 copies; measures not requested or failed
        are None; ``error`` is None when everything requested succeeded, else the one-line
        messages (``"opt: LPTooLargeError: ..."``) joined by ``"; "``. ``seconds`` is the wall
        time of the row's :func:`~spectr_gbv.simulate.methods.simulate_method` call.

    Examples
    --------
    >>> from spectr_gbv.sweep.grid import FamilySpec, SweepGrid
    >>> task = SweepGrid((FamilySpec.random("2,2,0"),), methods=("sd",), ks=(1,)).tasks()[0]
    >>> row = run_task(task)[0]
    >>> row["instance_id"], row["method"], row["K"], row["error"]
    ('random:2,2,0,0', 'sd', 1, None)
    """
    import spectr_gbv
    from spectr_gbv.reference.registry import available_methods, register
    from spectr_gbv.simulate.methods import simulate_method

    for name, cls in task.rules:  # classes the driver registered: a fresh worker has not
        if name not in available_methods():
            register(cls)
    base: dict[str, Any] = dict.fromkeys(COLUMNS)
    base.update(instance_id=task.instance_id, family=task.family, package_version=spectr_gbv.__version__)
    build_errors: list[str] = []
    instance = _attempt(build_errors, "instance", lambda: build_instance(task.spec))
    if instance is not None:
        base.update(n=int(instance.n), L=int(instance.L))
    rows = []
    per_k: dict[int, tuple[dict[str, Any], list[str]]] = {}
    for k in dict.fromkeys(k for m in task.methods for k in task.method_ks(m)):
        errors: list[str] = list(build_errors)
        per_k[k] = (_measures(instance, k, task.measures, errors) if instance is not None else {}, errors)
    for method in task.methods:
        for k in task.method_ks(method):
            measured, k_errors = per_k[k]
            row = dict(base, method=method, K=int(k), **measured)
            errors = list(k_errors)
            if instance is not None:
                start = time.perf_counter()
                result = _attempt(errors, "simulate", lambda method=method, k=k: simulate_method(instance, method, k))
                if result is not None:
                    row.update(
                        expected_accepted=exact_text(result.expected_accepted),
                        expected_accepted_float=float(result.expected_accepted),
                        validity_defect=exact_text(result.validity_defect),
                        validity_defect_float=float(result.validity_defect),
                        lossless=bool(result.lossless),
                        seconds=time.perf_counter() - start,
                    )
            row["error"] = "; ".join(errors) or None
            rows.append(row)
    return rows


__all__ = ["exact_text", "run_task"]
