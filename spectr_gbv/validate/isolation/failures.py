"""The failures a guarded verifier call reports: raised, timed out, or ended its process.

:class:`VerifierFailure` and its kinds (:class:`VerifierRaised`, :class:`VerifierTimedOut`,
:class:`VerifierExited`), each with the diagnosis tag it reports, and :func:`as_raised`, which
turns an exception of the verifier into a :class:`VerifierRaised` that names where it was raised.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any


def _roundtrip(err: BaseException | None) -> BaseException | None:
    """``err`` if it survives pickling (without its traceback), else None."""
    if err is None:
        return None
    try:
        return pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - unpicklable exceptions are dropped, their text is kept
        return None


class VerifierFailure(Exception):
    """The verifier could not be run: it raised, hung or exited; ``diagnosis`` names which."""

    diagnosis = "raises"


class VerifierRaised(VerifierFailure):
    """The verifier raised an exception; ``row`` is the batch row, ``error`` the exception (or None).

    ``error`` is None when the exception was raised in a worker process and could not be
    pickled back; the message always names its type, text and location.
    """

    diagnosis = "raises"

    def __init__(self, message: str, error: BaseException | None = None, row: int | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.row = row

    def __reduce__(self) -> tuple[Any, ...]:
        return (VerifierRaised, (str(self), _roundtrip(self.error), self.row))


class VerifierTimedOut(VerifierFailure):
    """The verifier cannot be called any more: a call exceeded the per-call limit.

    Also the base of :class:`VerifierExited`, so that every handler that stops a run on a hung
    verifier stops it on one that ended its process.
    """

    diagnosis = "timeout"


class VerifierExited(VerifierTimedOut):
    """The verifier ended its process (``sys.exit``, ``SystemExit``, ``os._exit``, a signal).

    The message says which, with the exit code or the signal; the verifier is not called again.
    """

    diagnosis = "exits"


def as_raised(exc: BaseException, row: int | None) -> VerifierRaised:
    """:class:`VerifierRaised` for ``exc``: type, first line of the message, file:line where raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}{': ' + msg[:200] if msg else ''}{where}"
    return VerifierRaised(text, exc, row)


__all__ = ["VerifierExited", "VerifierFailure", "VerifierRaised", "VerifierTimedOut", "as_raised"]
