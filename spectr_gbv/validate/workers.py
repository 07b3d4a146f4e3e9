"""Process isolation of :class:`~spectr_gbv.validate.calls.CallGuard`: forked workers, clocks, pipes, kills.

What the ``"process"`` isolation of a guard runs on: persistent forked workers that hold an
object and answer method calls (:func:`call_many_forked`), a fresh fork per closure
(:func:`run_forked`), a shared-memory clock per worker slot (:func:`shared_clock`: the start of
the call in progress and the calls made, written by the child and read by the parent), the
pickled request/reply protocol over a pipe (warnings recorded in the child are re-issued in
the parent), and killing and reaping (:func:`kill`, :func:`reap`), with the messages that name
how a worker ended (:func:`status_message`, :func:`exit_message`).

Imports: the standard library and numpy only; nothing of ``spectr_gbv``.
:mod:`spectr_gbv.validate.calls` imports this module, so the functions here take the guard as
an argument, use its bookkeeping (``_clock``, ``_procs``, ``_inside``, ``_slot``,
``_finalizer``) and build the failures they raise through its hooks (``_exited``,
``_timed_out``, ``_raised``), never by importing the failure types.
"""

from __future__ import annotations

import mmap
import os
import pickle
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe, wait
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from spectr_gbv.validate.calls import CallGuard


@dataclass
class Proc:
    """A forked worker: its pid, the parent's end of its pipe, its clock slot.

    Attributes
    ----------
    pid : int
    conn : multiprocessing.connection.Connection
        The parent's end of the worker's duplex pipe.
    slot : int
        Row of the guard's clock the worker writes.
    bound : int
        ``id()`` of the object the worker holds (0 for a one-shot fork).
    torch : bool
        torch was imported in the parent when it forked.
    """

    pid: int
    conn: Connection
    slot: int
    bound: int
    torch: bool


def _roundtrip_type(cls: type) -> bool:
    try:
        return pickle.loads(pickle.dumps(cls)) is cls
    except Exception:  # noqa: BLE001 - a class defined in a function
        return False


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    src = f" (`{f.line.strip()[:80]}`)" if f.line else ""
    return f" at {f.filename.rsplit('/', 1)[-1]}:{f.lineno}{src}"


def exit_message(exc: SystemExit) -> str:
    """The message of a :class:`~spectr_gbv.validate.calls.VerifierExited` for a ``SystemExit``.

    Parameters
    ----------
    exc : SystemExit
        Raised by the verifier (its code and the file:line where it was raised are named).

    Returns
    -------
    str
    """
    return (
        f"the verifier ended the run: SystemExit({exc.code!r}) was raised (sys.exit({exc.code!r}) or "
        f"raise SystemExit){_where(exc)}; it was not called again"
    )


def status_message(status: int) -> str:
    """The message of a :class:`~spectr_gbv.validate.calls.VerifierExited` for a worker that ended.

    Parameters
    ----------
    status : int
        The worker's wait status (``os.waitpid``): a signal or an exit code is named.

    Returns
    -------
    str
    """
    if os.WIFSIGNALED(status):
        num = os.WTERMSIG(status)
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = "unknown"
        return f"the worker process running the verifier was killed by signal {num} ({name}); it was not called again"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return (
        f"the worker process running the verifier exited with status {code} without returning "
        f"(os._exit({code}) or an exit from C code); it was not called again"
    )


def shared_clock(rows: int, shared: bool) -> np.ndarray:
    """Per-slot clock: (start of the call in progress, calls made), shared across fork.

    Parameters
    ----------
    rows : int
        Slots (workers, plus one for one-shot forks).
    shared : bool
        Back the array by an anonymous ``MAP_SHARED`` mapping (a forked child writes, the
        parent reads); else plain memory.

    Returns
    -------
    ndarray, shape [rows, 2], float64
        Zeros.
    """
    if not shared:
        return np.zeros((rows, 2))
    buf = mmap.mmap(-1, rows * 16)  # anonymous MAP_SHARED: a forked child writes, the parent reads
    return np.frombuffer(buf, dtype=np.float64).reshape(rows, 2)


def reap(procs: list[Proc]) -> None:
    """Kill and reap every worker in ``procs``, then empty the list.

    Parameters
    ----------
    procs : list of Proc
    """
    for proc in procs:
        kill(proc)
    procs.clear()


def kill(proc: Proc) -> int | None:
    """Kill a worker (SIGKILL) and reap it.

    Parameters
    ----------
    proc : Proc

    Returns
    -------
    int or None
        Its wait status (None if it was already reaped).
    """
    try:
        proc.conn.close()
    except OSError:
        pass
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return os.waitpid(proc.pid, 0)[1]
    except ChildProcessError:
        return None


def run_forked(guard: CallGuard, job: Callable[[], Any]) -> Any:
    """Run ``job`` in a fresh fork of the caller (one-shot slot) and return its value.

    The body of :meth:`CallGuard.run <spectr_gbv.validate.calls.CallGuard.run>` under process
    isolation; the fork is killed afterwards.

    Parameters
    ----------
    guard : CallGuard
    job : callable
        Any callable, a closure included; its value and exception are pickled back.

    Returns
    -------
    object
        What ``job`` returned.

    Raises
    ------
    VerifierTimedOut, VerifierExited, Exception
        As :meth:`CallGuard.run <spectr_gbv.validate.calls.CallGuard.run>`.
    """
    proc = _fork(guard, None, guard.workers, job=job)
    try:
        return _collect(guard, {0: proc})[0]
    finally:
        if proc in guard._procs:
            guard._procs.remove(proc)
        kill(proc)


def call_many_forked(
    guard: CallGuard, obj: Any, method: str, arg_list: Sequence[tuple[Any, ...]], needs_torch: bool = False
) -> list[Any]:
    """``getattr(obj, method)(*args)`` for each ``args`` in the guard's persistent workers.

    The body of :meth:`CallGuard.call_many <spectr_gbv.validate.calls.CallGuard.call_many>`
    under process isolation: up to ``guard.workers`` calls at once, a worker forked on first
    use holding ``obj`` and refork when ``obj`` changes or when ``needs_torch`` and torch was
    not imported at fork time.

    Parameters
    ----------
    guard : CallGuard
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
        As :meth:`CallGuard.call_many <spectr_gbv.validate.calls.CallGuard.call_many>`.
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


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or odd stream: nothing to flush
            pass


def _fork(
    guard: CallGuard, obj: Any, slot: int, torch_now: bool | None = None, job: Callable[[], Any] | None = None
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


def _child(guard: CallGuard, conn: Connection, slot: int, obj: Any, job: Callable[[], Any] | None) -> None:
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


def _reply(guard: CallGuard, conn: Connection, job: Callable[[], Any]) -> None:
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
    guard: CallGuard,
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


__all__ = [
    "Proc",
    "call_many_forked",
    "exit_message",
    "kill",
    "reap",
    "run_forked",
    "shared_clock",
    "status_message",
]
