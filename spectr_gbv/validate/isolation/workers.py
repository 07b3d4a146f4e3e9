"""Process isolation of :class:`~spectr_gbv.validate.isolation.guard.CallGuard`: forked workers, clocks, pipes, kills.

What the ``"process"`` isolation of a guard runs on: persistent forked workers that hold an
object and answer method calls (:func:`call_many_forked`), a fresh fork per closure
(:func:`run_forked`), a shared-memory clock per worker slot (:func:`shared_clock`: the start of
the call in progress and the calls made, written by the child and read by the parent), the
pickled request/reply protocol over a pipe (warnings recorded in the child are re-issued in
the parent), and killing and reaping (:func:`kill`, :func:`reap`), with the messages that name
how a worker ended (:func:`status_message`, :func:`exit_message`).

Imports: the standard library, numpy and :mod:`spectr_gbv.validate.isolation.processes` only.
:mod:`spectr_gbv.validate.isolation.guard` imports this module, so the functions here take the guard as
an argument (typed by the :class:`Guard` protocol), use its bookkeeping (``_clock``, ``_procs``, ``_inside``, ``_slot``,
``_finalizer``) and build the failures they raise through its hooks (``_exited``,
``_timed_out``, ``_raised``), never by importing the failure types.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any, Protocol

import numpy as np

from spectr_gbv.validate.isolation.processes import Proc, exit_message, kill, status_message


class Guard(Protocol):
    """What the process isolation uses of a :class:`~spectr_gbv.validate.isolation.guard.CallGuard`.

    Its bookkeeping (``_clock``, ``_procs``, ``_inside``, ``_slot``, ``_finalizer``), its limits
    (``time_limit_s``, ``workers``) and the hooks that build the failures to raise (``_exited``,
    ``_timed_out``, ``_raised``): this module never imports the guard or the failure types.
    """

    time_limit_s: float
    workers: int
    _clock: np.ndarray
    _slot: int
    _inside: bool
    _procs: list[Proc]
    _finalizer: weakref.finalize

    def _exited(self, message: str) -> Exception: ...

    def _timed_out(self) -> Exception: ...

    def _raised(self, message: str = "", error: BaseException | None = None) -> Exception: ...


def run_forked(guard: Guard, job: Callable[[], Any]) -> Any:
    """Run ``job`` in a fresh fork of the caller (one-shot slot) and return its value.

    The body of :meth:`CallGuard.run <spectr_gbv.validate.isolation.guard.CallGuard.run>` under process
    isolation; the fork is killed afterwards.

    Parameters
    ----------
    guard : Guard
    job : callable
        Any callable, a closure included; its value and exception are pickled back.

    Returns
    -------
    object
        What ``job`` returned.

    Raises
    ------
    VerifierTimedOut, VerifierExited, Exception
        As :meth:`CallGuard.run <spectr_gbv.validate.isolation.guard.CallGuard.run>`.
    """
    proc = _fork(guard, None, guard.workers, job=job)
    try:
        return _collect(guard, {0: proc})[0]
    finally:
        if proc in guard._procs:
            guard._procs.remove(proc)
        kill(proc)


def call_many_forked(
    guard: Guard, obj: Any, method: str, arg_list: Sequence[tuple[Any, ...]], needs_torch: bool = False
) -> list[Any]:
    """``getattr(obj, method)(*args)`` for each ``args`` in the guard's persistent workers.

    The body of :meth:`CallGuard.call_many <spectr_gbv.validate.isolation.guard.CallGuard.call_many>`
    under process isolation: up to ``guard.workers`` calls at once, a worker forked on first
    use holding ``obj`` and refork when ``obj`` changes or when ``needs_torch`` and torch was
    not imported at fork time.

    Parameters
    ----------
    guard : Guard
    obj : object
    method : str
    arg_list : sequence of tuple
        Picklable arguments of each call.
    needs_torch : bool

    Returns
    -------
    list
        The values, in input order.

    Raises
    ------
    VerifierTimedOut, VerifierExited, Exception
        As :meth:`CallGuard.call_many <spectr_gbv.validate.isolation.guard.CallGuard.call_many>`.
    """
    torch_now = "torch" in sys.modules
    pool = [p for p in guard._procs if p.slot < guard.workers]
    for p in list(pool):
        if p.bound != id(obj) or (needs_torch and not p.torch):
            guard._procs.remove(p)
            kill(p)
            pool.remove(p)
    free = sorted({p.slot for p in pool} | set(range(guard.workers)))
    by_slot = {p.slot: p for p in pool}
    todo = list(enumerate(arg_list))
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}
    busy: dict[int, Proc] = {}
    while todo or busy:
        while todo and free and not errors:
            slot = free.pop(0)
            proc = by_slot.get(slot)
            if proc is None:
                proc = by_slot[slot] = _fork(guard, obj, slot, torch_now)
            i, args = todo.pop(0)
            guard._clock[slot, 0] = time.monotonic()
            try:
                proc.conn.send_bytes(pickle.dumps((method, args)))
            except (BrokenPipeError, OSError):
                raise guard._exited(status_message(kill(proc) or 0)) from None
            busy[i] = proc
        if errors and not busy:
            break
        done = _collect(guard, busy, first=True, errors=errors)
        for i, value in done.items():
            free.append(busy.pop(i).slot)
            if i not in errors:
                results[i] = value
        free.sort()
    if errors:
        raise errors[min(errors)]
    return [results[i] for i in range(len(arg_list))]


def _roundtrip_type(cls: type) -> bool:
    try:
        return pickle.loads(pickle.dumps(cls)) is cls
    except Exception:  # noqa: BLE001 - a class defined in a function
        return False


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or odd stream: nothing to flush
            pass


def _fork(
    guard: Guard, obj: Any, slot: int, torch_now: bool | None = None, job: Callable[[], Any] | None = None
) -> Proc:
    parent_end, child_end = Pipe(duplex=True)
    _flush()
    guard._clock[slot, 0] = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            parent_end.close()
            for other in guard._procs:
                other.conn.close()
            _child(guard, child_end, slot, obj, job)
        finally:
            os._exit(70)
    child_end.close()
    torch = "torch" in sys.modules if torch_now is None else torch_now
    proc = Proc(pid, parent_end, slot, 0 if obj is None else id(obj), torch)
    guard._procs.append(proc)
    return proc


def _child(guard: Guard, conn: Connection, slot: int, obj: Any, job: Callable[[], Any] | None) -> None:
    """Body of a worker process: a one-shot ``job``, or a loop of method calls on ``obj``."""
    guard._inside, guard._slot, guard._procs = True, slot, []
    guard._finalizer.detach()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    if job is not None:
        _reply(guard, conn, job)
        return
    while True:
        try:
            method, args = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        guard._clock[slot, 0] = time.monotonic()
        fn = getattr(obj, method)
        _reply(guard, conn, lambda fn=fn, args=args: fn(*args))


def _reply(guard: Guard, conn: Connection, job: Callable[[], Any]) -> None:
    """Run ``job``; send (kind, value, warnings) back, kind ``ok``, ``raised`` or ``exits``."""
    with warnings.catch_warnings(record=True) as caught:  # the current filters; re-issued by the parent
        try:
            reply: tuple[str, Any] = ("ok", job())
        except SystemExit as exc:
            reply = ("exits", exit_message(exc))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            reply = ("raised", exc if isinstance(exc, Exception) else guard._raised(error=exc))
    _flush()
    kind, value = reply
    warns: dict[tuple[Any, ...], int] = {}
    for w in caught:
        cat = w.category if _roundtrip_type(w.category) else UserWarning
        key = (str(w.message), cat, w.filename, w.lineno)
        warns[key] = warns.get(key, 0) + 1
    try:
        data = pickle.dumps((kind, value, warns))
        if kind != "ok":
            pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - an unpicklable value or exception
        text = str(value) if kind != "ok" else f"a {type(value).__name__}"
        err = guard._raised(f"{text} (could not be sent back from the worker: {type(exc).__name__})")
        data = pickle.dumps(("raised", err, warns))
    conn.send_bytes(data)


def _collect(
    guard: Guard,
    busy: dict[int, Proc],
    first: bool = False,
    errors: dict[int, BaseException] | None = None,
) -> dict[int, Any]:
    """Wait for replies of the busy workers (all, or the first ready when ``first``)."""
    out: dict[int, Any] = {}
    poll = min(0.05, guard.time_limit_s / 4)
    pending = dict(busy)
    while pending:
        ready = wait([p.conn for p in pending.values()], timeout=poll)
        for i, proc in list(pending.items()):
            if proc.conn not in ready:
                continue
            del pending[i]
            try:
                kind, value, warns = pickle.loads(proc.conn.recv_bytes())
            except (EOFError, OSError):
                status = kill(proc)
                if proc in guard._procs:
                    guard._procs.remove(proc)
                raise guard._exited(status_message(status or 0)) from None
            except Exception as exc:  # noqa: BLE001 - a reply that does not unpickle here
                kind, value = "raised", guard._raised(f"the worker's reply could not be read: {exc}")
                warns = {}
            for (msg, cat, filename, lineno), n in warns.items():
                for _ in range(n):
                    warnings.warn_explicit(msg, cat, filename, lineno)
            if kind == "exits":
                raise guard._exited(value)
            if kind == "raised":
                if errors is None:
                    raise value
                errors[i] = value
            out[i] = value
        if out and first:
            return out
        now = time.monotonic()
        for proc in pending.values():
            if now - guard._clock[proc.slot, 0] > guard.time_limit_s:
                raise guard._timed_out()
    return out


__all__ = ["Guard", "call_many_forked", "run_forked"]
