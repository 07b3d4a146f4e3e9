"""Verifier calls under a per-call time limit, isolated from the harness, and the failures they report.

:class:`CallGuard` runs every call of a third-party verifier away from the harness, so that a
verifier that raises (:class:`VerifierRaised`), hangs (:class:`VerifierTimedOut`) or ends its
process (:class:`VerifierExited`: ``sys.exit``, ``SystemExit``, ``os._exit``, a fatal signal) is
reported instead of ending or hanging the run. Two isolations:

``"process"`` (default where POSIX ``fork`` exists)
    Verifier calls run in forked worker processes. :meth:`CallGuard.call` sends a method call
    (an object bound to the worker at fork time, a method name, picklable arguments) to a
    persistent worker, which keeps the verifier's state between calls as a thread would;
    :meth:`CallGuard.call_many` spreads calls over up to ``workers`` workers;
    :meth:`CallGuard.run` runs any closure in a fresh fork (closures and lambdas work). A call
    past the limit gets its worker killed (even one that holds the GIL in C code).
``"thread"``
    One daemon worker thread (the in-process fallback for platforms without fork): a
    ``SystemExit`` is caught, but ``os._exit`` ends the harness, and a call blocked in C keeps
    its thread until the process exits.

In both, a verifier that timed out or exited is never called again.

This module holds the guard's API (and the thread isolation); the failure types are in
:mod:`spectr_gbv.validate.isolation.failures`, and the process machinery (forked workers,
shared-memory clocks, pipes, kills) is in :mod:`spectr_gbv.validate.isolation.workers`, which the
guard delegates to and which imports nothing of this module.
"""

from __future__ import annotations

import ctypes
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spectr_gbv.validate.isolation.failures import VerifierExited, VerifierRaised, VerifierTimedOut, as_raised
from spectr_gbv.validate.isolation.processes import Proc, exit_message, reap, shared_clock
from spectr_gbv.validate.isolation.workers import call_many_forked, run_forked

#: Isolation modes of :class:`CallGuard`.
ISOLATIONS: tuple[str, ...] = ("process", "thread")


def default_isolation() -> str:
    """``"process"`` where ``os.fork`` exists, ``"thread"`` otherwise."""
    return "process" if hasattr(os, "fork") else "thread"


def default_workers() -> int:
    """Default number of worker processes: ``min(2, os.cpu_count())``."""
    return max(1, min(2, os.cpu_count() or 1))


class _Abandon(BaseException):
    """Injected into a worker thread whose call timed out (stops pure-Python loops)."""


@dataclass
class _Box:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class CallGuard:
    """Run verifier calls isolated from the harness, under a per-call time limit.

    A job (a function that makes several verifier calls) calls :meth:`tick` before each
    verifier call; the guard raises :class:`VerifierTimedOut` when the call in progress has run
    longer than ``time_limit_s`` and :class:`VerifierExited` when the verifier ended its
    process, and then refuses every later job (see the module docstring for the isolations).

    Parameters
    ----------
    time_limit_s : float
        Seconds one verifier call may take, > 0.
    isolation : str, optional
        ``"process"`` (default where ``os.fork`` exists) or ``"thread"``.
    workers : int, optional
        Worker processes for :meth:`call_many` (default ``min(2, os.cpu_count())``), >= 1.

    Attributes
    ----------
    calls : int
        Verifier calls made so far (in every worker).
    dead : str or None
        Why the verifier is not called any more (a timeout or an exit), else None.

    Raises
    ------
    ValueError
        ``time_limit_s`` not a positive number; unknown ``isolation``, or ``"process"`` without
        ``os.fork``; ``workers`` not a positive int.
    """

    def __init__(self, time_limit_s: float, isolation: str | None = None, workers: int | None = None) -> None:
        if not isinstance(time_limit_s, int | float) or isinstance(time_limit_s, bool) or not time_limit_s > 0:
            raise ValueError(f"time_limit_s: expected a positive number of seconds, got {time_limit_s!r}")
        isolation = default_isolation() if isolation is None else isolation
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation: expected one of {', '.join(ISOLATIONS)}, got {isolation!r}")
        if isolation == "process" and not hasattr(os, "fork"):
            raise ValueError("isolation 'process' needs os.fork (POSIX); use isolation='thread'")
        workers = default_workers() if workers is None else workers
        if not isinstance(workers, int | np.integer) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers: expected an int >= 1, got {workers!r}")
        self.time_limit_s = float(time_limit_s)
        self.isolation = isolation
        self.workers = int(workers)
        self.dead: str | None = None
        self._dead_cls: type[VerifierTimedOut] = VerifierTimedOut
        # slots 0..workers-1: persistent workers (slot 0 also the thread); slot `workers`: one-shot forks
        self._clock = shared_clock(self.workers + 1, isolation == "process")
        self._slot = 0
        self._inside = False  # True in a worker process: jobs run inline there
        self._procs: list[Proc] = []
        self._finalizer = weakref.finalize(self, reap, self._procs)
        self._jobs: queue.Queue[tuple[Callable[[], Any], _Box]] = queue.Queue()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ bookkeeping
    @property
    def calls(self) -> int:
        """Verifier calls made so far (every worker, the calls of a killed worker up to its last tick)."""
        return int(self._clock[:, 1].sum())

    def tick(self) -> None:
        """Mark the start of one verifier call (called from the job, in the worker)."""
        row = self._clock[self._slot]
        row[0] = time.monotonic()
        row[1] += 1

    def clock_row(self) -> np.ndarray:
        """The (start, calls) row of the worker the caller runs in, for inlined ticks on a hot path.

        ``row[0] = time.monotonic()`` before a call marks its start, ``row[1] += n`` counts n calls.
        """
        return self._clock[self._slot]

    def _nested(self) -> bool:
        """True in a worker process or the worker thread: a job started there runs inline."""
        return self._inside or (self._thread is not None and threading.current_thread() is self._thread)

    def _refuse(self) -> None:
        if self.dead:
            raise self._dead_cls(self.dead)

    def _die(self, cls: type[VerifierTimedOut], message: str) -> VerifierTimedOut:
        self.dead, self._dead_cls = message, cls
        reap(self._procs)
        return cls(message)

    def _timeout_message(self) -> str:
        how = "its worker process was killed" if self.isolation == "process" else "its thread was abandoned"
        return (
            f"a verifier call ran longer than the per-call limit of {self.time_limit_s:g} s; "
            f"{how} and the verifier was not called again"
        )

    def fail(self, err: VerifierTimedOut) -> None:
        """Mark the verifier as not callable any more: every later job raises ``err``'s type and message."""
        self._die(type(err), str(err))

    def close(self) -> None:
        """Stop the worker processes (idle ones are simply killed); the guard stays usable."""
        reap(self._procs)

    # ------------------------------------------------------------------ public entry points
    def run(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` (any callable, a closure included) isolated, and return its value.

        ``process``: in a fresh fork of the caller (its value and exception are pickled back;
        effects on the caller's objects are lost, so a job returns what it computes); in a
        worker process (a nested run) inline. ``thread``: in the worker thread.

        Raises
        ------
        VerifierTimedOut
            A verifier call exceeded the limit now or in an earlier job.
        VerifierExited
            The verifier ended its process now or in an earlier job.
        Exception
            Whatever ``job`` raised (:class:`VerifierRaised` for the verifier's exceptions).
        """
        self._refuse()
        if self._nested():
            return job()
        if self.isolation == "thread":
            return self._run_thread(job)
        return run_forked(self, job)

    def call(self, obj: Any, method: str, args: tuple[Any, ...], needs_torch: bool = False) -> Any:
        """``getattr(obj, method)(*args)`` in the persistent worker 0 (process) or the thread.

        The worker is forked on first use holding ``obj`` (its copy of ``obj`` keeps its state
        between calls) and refork when ``obj`` changes, or when ``needs_torch`` and torch was
        not imported in the caller at fork time (no import in the timed region). ``args`` and
        the value are pickled.

        Raises
        ------
        VerifierTimedOut, VerifierExited, Exception
            As :meth:`run`.
        """
        return self.call_many(obj, method, [args], needs_torch)[0]

    def call_many(
        self, obj: Any, method: str, arg_list: Sequence[tuple[Any, ...]], needs_torch: bool = False
    ) -> list[Any]:
        """:meth:`call` for each argument tuple, up to ``workers`` at once; values in input order.

        Raises
        ------
        VerifierTimedOut, VerifierExited
            Some call hung or ended its worker (the other workers are stopped).
        Exception
            The exception of the first failing call in input order (after the calls in flight
            finished; no later call is started).
        """
        self._refuse()
        fn = getattr(obj, method)
        if self._nested():
            return [fn(*a) for a in arg_list]
        if self.isolation == "thread":
            return [self.run(lambda a=a: fn(*a)) for a in arg_list]
        return call_many_forked(self, obj, method, arg_list, needs_torch)

    # ------------------------------------------------------------------ hooks of the worker machinery
    def _exited(self, message: str) -> VerifierTimedOut:
        """Mark the verifier dead as exited; the :class:`VerifierExited` to raise (used by :mod:`.workers`)."""
        return self._die(VerifierExited, message)

    def _timed_out(self) -> VerifierTimedOut:
        """Mark the verifier dead as hung; the :class:`VerifierTimedOut` to raise (used by :mod:`.workers`)."""
        return self._die(VerifierTimedOut, self._timeout_message())

    def _raised(self, message: str = "", error: BaseException | None = None) -> VerifierRaised:
        """``as_raised(error, None)`` given ``error``, else ``VerifierRaised(message)`` (used by :mod:`.workers`)."""
        return VerifierRaised(message) if error is None else as_raised(error, None)

    # ------------------------------------------------------------------ thread isolation
    def _worker(self) -> None:
        while True:
            job, box = self._jobs.get()
            try:
                box.value = job()
            except BaseException as exc:  # noqa: BLE001 - everything is reported to the caller
                box.error = exc
            box.done.set()

    def _run_thread(self, job: Callable[[], Any]) -> Any:
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="spectr-gbv-verifier", daemon=True)
            self._thread.start()
        box = _Box()
        self._clock[0, 0] = time.monotonic()
        self._jobs.put((job, box))
        poll = min(0.05, self.time_limit_s / 4)
        while not box.done.wait(poll):
            if time.monotonic() - self._clock[0, 0] > self.time_limit_s:
                self._abandon()
                raise self._die(VerifierTimedOut, self._timeout_message())
        if isinstance(box.error, SystemExit):
            raise self._die(VerifierExited, exit_message(box.error))
        if box.error is not None:
            raise box.error
        return box.value

    def _abandon(self) -> None:
        thread = self._thread
        if thread is not None and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandon))


__all__ = ["ISOLATIONS", "CallGuard", "default_isolation", "default_workers"]
