"""Run-time estimates for the exact report and simulation, made before any long stage starts.

``spectr-gbv report`` and ``spectr-gbv simulate`` run one exact iteration per (method, K) and,
with a horizon, one per reachable history view. Their cost spans six orders of magnitude
(at ``report --K 8`` on the 2-token default instance the three tuple-enumerating methods
dominate it), so the commands estimate it first:

* a method on the draft-tuple path (``spectr_gbv_released``, ``independent_bv``,
  ``traversal``, or any method whose structured path does not apply): the kernels it will
  evaluate (ordered tuples ``m^K`` or multisets, :func:`~spectr_gbv.simulate.exact.count_draft_tuples`)
  times the median time of up to :data:`SAMPLE_KERNELS` kernels drawn at random and timed now on
  this instance, each stopped at :data:`KERNEL_SECONDS_CAP` (exact kernels slow down as K grows
  their fractions, so no constant fits);
* a method on a structured path: its kernel estimate
  (:func:`~spectr_gbv.simulate.structured.structured_kernels`) times the work per kernel at
  :data:`STRUCTURED_UNIT_SECONDS` per unit (the simulator's own model);
* the multi-iteration comparison: the history views the dynamic programme can visit
  (:func:`history_views`) times the method's one-iteration estimate;
* a claims ledger: the one-iteration runs it makes on this instance (its witness searches on
  other instances are not counted).

``greedy_bv``, ``lp_oracle`` and the bounds are not modelled (they count 0), nor
the fixed cost of each run (the validity defect, gathering the rows): where they dominate the
total errs low, so a refusal (:func:`check_estimate`) does not stop a run that would have
finished within the limit because of them. Sampled kernel times vary by tens of percent, and
so does the estimate.
One stage can err high: a method that groups draft tuples by a law key (``sd``,
``bv``, ``hsd`` read only the first draft) off its structured path (a float64 instance) is
counted at one kernel per tuple, but such kernels take well under a millisecond.
"""

from __future__ import annotations

import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spectr_gbv.core.instance import Instance
from spectr_gbv.core.methods import METHOD_TABLE, is_registered
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.registry import check_method, get_verifier
from spectr_gbv.reference.user_rules import resolve_rule, rule_label
from spectr_gbv.simulate.exact import MAX_DRAFT_TUPLES, DraftTable, count_draft_tuples
from spectr_gbv.simulate.structured import ESTIMATE_CAP, declared_structure, structured_kernels

#: Longest estimated run (seconds) that ``report`` and ``simulate`` start: ten minutes.
MAX_RUN_SECONDS = 600.0
#: Most kernels timed per tuple-path method to estimate its cost (the median is used).
SAMPLE_KERNELS = 15
#: Sampling of one method stops after this many seconds (at least three kernels are timed).
SAMPLE_SECONDS = 0.5
#: A timed kernel is stopped after this many seconds (where ``signal.setitimer`` works: POSIX,
#: main thread, no other ``SIGALRM`` user); the estimate then counts this much per kernel, a
#: lower bound.
KERNEL_SECONDS_CAP = 2.0
#: Seconds per unit of structured kernel work (evaluations x K x (L+1) x n): 10 us, the rate
#: the simulator's refusals above :data:`~spectr_gbv.simulate.exact.MAX_KERNEL_WORK` quote.
STRUCTURED_UNIT_SECONDS = 1e-5
#: Methods whose cost is not modelled (counted as 0 s: the estimate is a lower bound): the
#: table's ``stateful`` and ``needs_instance`` methods (``greedy_bv``, ``lp_oracle``).
UNMODELLED_METHODS: tuple[str, ...] = tuple(m.name for m in METHOD_TABLE if m.stateful or m.needs_instance)


class RunTooLongError(ValueError):
    """The estimated run time exceeds the limit; raised before the long stages start."""


@dataclass(frozen=True)
class StageEstimate:
    """Estimated cost of one stage of a run.

    Attributes
    ----------
    label : str
        The stage, e.g. ``"spectr_gbv_released K=8"`` or ``"multi-iteration mdbv K=8 N=16"``.
    seconds : float
        Estimated wall time on one core, in seconds (0 when not modelled).
    detail : str
        How the estimate was made, e.g. ``"65536 kernels at ~7.1 ms each"``.
    """

    label: str
    seconds: float
    detail: str


class _KernelTimeout(Exception):
    """Raised by the timer inside a kernel that runs past :data:`KERNEL_SECONDS_CAP`."""


def _timed(fn: Callable[[], object], cap: float) -> float:
    """Seconds ``fn()`` takes, or ``cap`` once it runs that long (stopped by a timer where possible)."""
    can_stop = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0  # no one else's timer pending
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
    )
    previous = None
    if can_stop:

        def stop(signum: int, frame: object) -> None:
            raise _KernelTimeout

        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, cap)
    start = time.perf_counter()
    try:
        fn()
    except _KernelTimeout:
        return cap
    finally:
        if can_stop:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return min(time.perf_counter() - start, cap) if can_stop else time.perf_counter() - start


def _time_kernels(verifier: Any, table: DraftTable, K: int, exact: bool, seed: int = 0) -> float:
    """Median seconds of 3 to :data:`SAMPLE_KERNELS` kernels of ``verifier`` on random draft tuples.

    Each kernel is stopped at :data:`KERNEL_SECONDS_CAP`; one that reaches it ends the sampling.
    """
    rng = np.random.default_rng(seed)
    times: list[float] = []
    while len(times) < SAMPLE_KERNELS and (len(times) < 3 or sum(times) < SAMPLE_SECONDS):
        row = rng.integers(0, len(table.tokens), size=K)
        if verifier.symmetric:
            row = np.sort(row)
        batch = VerifyInput(table.tokens[row], table.draft_rows[row], table.target_rows[row], exact)
        times.append(_timed(lambda batch=batch: verifier.outcome_law_checked(batch), KERNEL_SECONDS_CAP))
        if times[-1] >= KERNEL_SECONDS_CAP:
            return KERNEL_SECONDS_CAP
    return statistics.median(times)


def method_estimate(instance: Instance, method: Any, num_drafts: int, table: DraftTable | None = None) -> StageEstimate:
    """Estimated time of one exact iteration of ``method`` with K drafts (see the module docstring).

    Parameters
    ----------
    instance : Instance
        The tabular instance (exact or float64).
    method : str, Verifier, Verifier subclass or callable
        A registered name, ``"module:attribute"`` naming a user's rule, or the rule itself
        (:func:`~spectr_gbv.reference.user_rules.resolve_rule`); a user's rule is estimated
        as a registered one, by its structured path when it declares a structure, else by
        timing its kernels.
    num_drafts : int
        K >= 1.
    table : DraftTable, optional
        ``DraftTable.from_instance(instance)``, when the caller already has it.

    Returns
    -------
    StageEstimate
        0 s for :data:`UNMODELLED_METHODS` and for a run the simulator refuses at once
        (over :data:`~spectr_gbv.simulate.exact.MAX_DRAFT_TUPLES` tuples).

    Raises
    ------
    ValueError
        Unknown method or a rule that cannot be loaded; a user's function whose draws cannot
        be enumerated (:class:`~spectr_gbv.reference.user_rules.NotEnumerableError`, while
        its kernels are timed).
    """
    label = f"{method if isinstance(method, str) else rule_label(method)} K={num_drafts}"
    if isinstance(method, str) and is_registered(method):
        check_method(method)
        if method in UNMODELLED_METHODS:
            return StageEstimate(label, 0.0, "not modelled")
        verifier = get_verifier(method)
    else:
        if isinstance(method, str) and ":" not in method:
            check_method(method)  # the registry's one line for an unknown name
        _, user = resolve_rule(method)
        verifier = user if user is not None else get_verifier(method)
    n, L, K = instance.n, instance.L, num_drafts
    kernels = structured_kernels(verifier, instance, K)
    if kernels is not None and kernels <= MAX_DRAFT_TUPLES:
        step = (L + 1) * n if declared_structure(verifier) == "draft_scan" else K * (L + 1) * n
        seconds = kernels * step * STRUCTURED_UNIT_SECONDS
        return StageEstimate(label, seconds, f"{kernels} structured kernels x {step} units at ~10 us per unit")
    table = DraftTable.from_instance(instance) if table is None else table
    count = count_draft_tuples(len(table.tokens), K, verifier.symmetric, cap=ESTIMATE_CAP)
    if count > MAX_DRAFT_TUPLES or not len(table.tokens):
        return StageEstimate(label, 0.0, "refused by the simulator's tuple limit")
    per_kernel = _time_kernels(verifier, table, K, instance.exact)
    each = f"over {KERNEL_SECONDS_CAP:g} s" if per_kernel >= KERNEL_SECONDS_CAP else f"~{per_kernel * 1e3:.2g} ms"
    return StageEstimate(label, count * per_kernel, f"{count} kernels at {each} each")


def history_views(instance: Instance, horizon: int) -> int:
    """Upper bound on the history views the multi-iteration programme visits before N tokens.

    A history of length < N is seen through its last ``depth`` tokens
    (:class:`~spectr_gbv.simulate.multi.MultiIterationResult`), so at most
    ``sum_{d=0}^{min(depth, N-1)} n^d`` distinct views occur.
    """
    depth = max(instance.target.depth, instance.draft.depth)
    return sum(instance.n**d for d in range(min(depth, horizon - 1) + 1))


def multi_estimate(one: StageEstimate, instance: Instance, method: str, num_drafts: int, horizon: int) -> StageEstimate:
    """Estimated time of the multi-iteration comparison of one method: views x one iteration.

    Parameters
    ----------
    one : StageEstimate
        The method's one-iteration estimate (:func:`method_estimate`).
    instance : Instance
    method : str
    num_drafts : int
    horizon : int
        N >= 1.

    Returns
    -------
    StageEstimate
    """
    views = history_views(instance, horizon)
    return StageEstimate(
        f"multi-iteration {method} K={num_drafts} N={horizon}",
        views * one.seconds,
        f"up to {views} history views x {one.seconds:.2g} s",
    )


def run_estimate(
    instance: Instance,
    pairs: Iterable[tuple[str, int]],
    multi_pairs: Iterable[tuple[str, int]] = (),
    horizon: int = 0,
    groups: Mapping[str, Iterable[tuple[str, int]]] | None = None,
) -> list[StageEstimate]:
    """Stage estimates of a run: one iteration per ``(method, K)`` in ``pairs``, the horizon, then groups.

    Parameters
    ----------
    instance : Instance
    pairs : iterable of (str, int)
        ``(method, K)`` of the one-iteration table.
    multi_pairs : iterable of (str, int)
        ``(method, K)`` compared over the horizon (ignored when ``horizon`` is 0).
    horizon : int
        N (0: no multi-iteration stage).
    groups : mapping of str to iterable of (str, int), optional
        Further stages, each the one-iteration runs it makes on this instance (e.g. a claims
        ledger that simulates ``spectr_gbv_released`` at every K): one stage per label, the sum
        of its runs' estimates (a lower bound for the stage).

    Returns
    -------
    list of StageEstimate
        In ``pairs`` order, then ``multi_pairs`` order, then ``groups`` order.

    Raises
    ------
    ValueError
        Unknown method.
    """
    table = DraftTable.from_instance(instance)
    cache: dict[tuple[str, int], StageEstimate] = {}

    def one(method: str, K: int) -> StageEstimate:
        if (method, K) not in cache:
            cache[(method, K)] = method_estimate(instance, method, K, table)
        return cache[(method, K)]

    stages = [one(m, k) for m, k in pairs]
    if horizon:
        stages += [multi_estimate(one(m, k), instance, m, k, horizon) for m, k in multi_pairs]
    for label, runs in (groups or {}).items():
        parts = [one(m, k) for m, k in runs]
        worst = max(parts, key=lambda e: e.seconds, default=None)
        detail = "" if worst is None else f"{len(parts)} runs on this instance, longest {worst.label}: {worst.detail}"
        stages.append(StageEstimate(label, sum(e.seconds for e in parts), detail))
    return stages


def _minutes(seconds: float) -> str:
    return f"~{seconds / 60:.0f} min" if seconds >= 90 else f"~{seconds:.0f} s"


def check_estimate(stages: Sequence[StageEstimate], max_seconds: float, hint: str) -> float:
    """Refuse a run whose estimated total exceeds ``max_seconds``; return the total.

    Parameters
    ----------
    stages : sequence of StageEstimate
    max_seconds : float
        The limit (e.g. :data:`MAX_RUN_SECONDS`); ``inf`` disables the check.
    hint : str
        What to lower, appended to the message (e.g. ``"lower --K / --horizon"``).

    Returns
    -------
    float
        The estimated total in seconds (a lower bound: see the module docstring).

    Raises
    ------
    RunTooLongError
        ``estimated at least ~52 min (longest: spectr_gbv_released K=8, 65536 kernels at ~6.5 ms
        each), above the limit of ~10 min; HINT``.
    """
    total = sum(s.seconds for s in stages)
    if total > max_seconds:
        worst = max(stages, key=lambda s: s.seconds)
        raise RunTooLongError(
            f"estimated at least {_minutes(total)} (longest: {worst.label}, {worst.detail}), above the limit "
            f"of {_minutes(max_seconds)}; {hint}"
        )
    return total


__all__ = [
    "MAX_RUN_SECONDS",
    "KERNEL_SECONDS_CAP",
    "SAMPLE_KERNELS",
    "SAMPLE_SECONDS",
    "STRUCTURED_UNIT_SECONDS",
    "UNMODELLED_METHODS",
    "RunTooLongError",
    "StageEstimate",
    "check_estimate",
    "history_views",
    "method_estimate",
    "multi_estimate",
    "run_estimate",
]
