"""Worker processes of the process isolation: handles, shared clocks, kills and exit messages.

:class:`Proc` (a forked worker and its pipe), :func:`shared_clock` (a shared-memory clock per
worker slot: the start of the call in progress and the calls made), :func:`kill` and
:func:`reap`, and the messages that name how a worker ended (:func:`status_message`,
:func:`exit_message`). Imports the standard library and numpy only.
"""

from __future__ import annotations

import mmap
import os
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np


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


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    src = f" (`{f.line.strip()[:80]}`)" if f.line else ""
    return f" at {f.filename.rsplit('/', 1)[-1]}:{f.lineno}{src}"


def exit_message(exc: SystemExit) -> str:
    """The message of a :class:`~spectr_gbv.validate.isolation.failures.VerifierExited` for a ``SystemExit``.

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
    """The message of a :class:`~spectr_gbv.validate.isolation.failures.VerifierExited` for a worker that ended.

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


__all__ = ["Proc", "exit_message", "kill", "reap", "shared_clock", "status_message"]
