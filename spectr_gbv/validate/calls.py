"""Verifier calls under a per-call time limit, and the failures they report.

Every call of a third-party verifier runs in one worker thread (:class:`CallGuard`): a
verifier that raises gives :class:`VerifierRaised`, one that hangs :class:`VerifierTimedOut`
(and is never called again), so the harness reports instead of crashing.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class VerifierFailure(Exception):
    """The verifier could not be run: it raised (:class:`VerifierRaised`) or hung."""

    diagnosis = "raises"


class VerifierRaised(VerifierFailure):
    """The verifier raised an exception; ``row`` is the batch row, ``error`` the exception."""

    diagnosis = "raises"

    def __init__(self, message: str, error: BaseException | None = None, row: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.row = row


class VerifierTimedOut(VerifierFailure):
    """A call exceeded the per-call time limit; the verifier is not called again."""

    diagnosis = "timeout"


class _Abandon(BaseException):
    """Injected into a worker thread whose call timed out (stops pure-Python loops)."""


@dataclass
class _Box:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None


class CallGuard:
    """Run verifier calls in a worker thread with a per-call time limit.

    A job (a function that makes several verifier calls) runs in one daemon worker thread;
    it calls :meth:`tick` before each verifier call. The caller waits and raises
    :class:`VerifierTimedOut` when the call in progress has run longer than ``time_limit_s``;
    the worker is then sent an asynchronous exception (which stops a pure-Python loop; a call
    blocked in C keeps its daemon thread until the process exits) and the guard refuses every
    later job.

    Parameters
    ----------
    time_limit_s : float
        Seconds one verifier call may take, > 0.

    Raises
    ------
    ValueError
        ``time_limit_s`` not a positive number.
    """

    def __init__(self, time_limit_s: float) -> None:
        if not isinstance(time_limit_s, int | float) or isinstance(time_limit_s, bool) or not time_limit_s > 0:
            raise ValueError(f"time_limit_s: expected a positive number of seconds, got {time_limit_s!r}")
        self.time_limit_s = float(time_limit_s)
        self.dead: str | None = None
        self.calls = 0
        self._jobs: queue.Queue[tuple[Callable[[], Any], _Box]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._call_start = 0.0

    def tick(self) -> None:
        """Mark the start of one verifier call (called from the job, in the worker)."""
        self._call_start = time.monotonic()
        self.calls += 1

    def _worker(self) -> None:
        while True:
            job, box = self._jobs.get()
            try:
                box.value = job()
            except BaseException as exc:  # noqa: BLE001 - everything is reported to the caller
                box.error = exc
            box.done.set()

    def run(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` in the worker and return its value (re-raising its exception).

        Raises
        ------
        VerifierTimedOut
            A verifier call exceeded the limit now or in an earlier job.
        """
        if self.dead:
            raise VerifierTimedOut(self.dead)
        if self._thread is None:
            self._thread = threading.Thread(target=self._worker, name="spectr-gbv-verifier", daemon=True)
            self._thread.start()
        box = _Box()
        self._call_start = time.monotonic()
        self._jobs.put((job, box))
        poll = min(0.05, self.time_limit_s / 4)
        while not box.done.wait(poll):
            if time.monotonic() - self._call_start > self.time_limit_s:
                self.dead = (
                    f"a verifier call ran longer than the per-call limit of {self.time_limit_s:g} s; "
                    "the verifier was not called again"
                )
                self._abandon()
                raise VerifierTimedOut(self.dead)
        if box.error is not None:
            raise box.error
        return box.value

    def _abandon(self) -> None:
        thread = self._thread
        if thread is not None and thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandon))


def as_raised(exc: BaseException, row: int | None) -> VerifierRaised:
    """:class:`VerifierRaised` for ``exc``: type, first line of the message, file:line where raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}{': ' + msg[:200] if msg else ''}{where}"
    return VerifierRaised(text, exc, row)


__all__ = ["CallGuard", "VerifierFailure", "VerifierRaised", "VerifierTimedOut", "as_raised"]
