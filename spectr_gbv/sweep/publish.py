"""Atomic files of a sweep folder: written under a temporary name, fsynced, renamed into the folder.

Each file of a sweep folder (:mod:`spectr_gbv.sweep.store`) is written under a temporary name
outside the folder (in its parent, when that is writable and on the same file system; else a
hidden ``.tmp`` name inside it), then renamed into it (``os.replace``), so a reader or a resumed
run sees whole files only, whatever happened to the writer (an exception, Ctrl-C, a full disk,
a read-only folder). A write that fails raises :class:`SweepWriteError`, one line naming the
folder and the reason, never the error of the temporary file's cleanup.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path

#: errno values of a staging folder that cannot take the temporary file: fall back to the folder itself.
_STAGING_ERRORS = frozenset({errno.EXDEV, errno.EACCES, errno.EPERM, errno.EROFS})


class SweepWriteError(OSError):
    """A file of the sweep folder could not be written (read-only or immutable folder, disk full).

    The message is one line naming the folder and the reason; ``errno`` is the cause's. What
    the folder held before stays whole (parts are written to a temporary name, then renamed).
    """


def write_error(directory: Path, what: str, exc: OSError) -> SweepWriteError:
    """A :class:`SweepWriteError` for ``exc`` raised while writing ``what`` into ``directory``."""
    code = errno.errorcode.get(exc.errno, "") if exc.errno is not None else ""
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    err = SweepWriteError(
        f"out: cannot write {what} into {str(directory)!r}: {reason}{f' ({code})' if code else ''}; "
        "the parts stored before are whole"
    )
    err.errno = exc.errno
    return err


def _staging(directory: Path) -> list[Path]:
    """Where a temporary file may be written before its rename into ``directory``, best first.

    The parent folder when it is writable and on the same file system (readers of ``directory``
    then never see a temporary file), then ``directory`` itself (a hidden ``.tmp`` name).
    """
    here = directory.resolve()
    parent = here.parent
    try:
        same_fs = parent != here and parent.stat().st_dev == here.stat().st_dev
    except OSError:
        same_fs = False
    if same_fs and os.access(parent, os.W_OK | os.X_OK):
        return [parent, here]
    return [here]


def publish(directory: Path, name: str, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` a file under a temporary name (see ``_staging``), fsync it, rename it to ``directory/name``.

    A failure leaves no temporary file behind and nothing at ``directory/name`` (an existing file
    there is kept whole), and raises :class:`SweepWriteError` (one line, naming the folder).
    """
    token = uuid.uuid4().hex
    stages = _staging(directory)
    for i, stage in enumerate(stages):
        prefix = "." if stage == stages[-1] else f".{stages[-1].name}."  # beside the folder: name it after it
        tmp = stage / f"{prefix}{name}.{token}.tmp"
        try:
            write(tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, directory / name)
            return directory / name
        except OSError as exc:
            if exc.errno in _STAGING_ERRORS and i + 1 < len(stages):
                continue
            raise write_error(directory, name, exc) from exc
        finally:
            with contextlib.suppress(OSError):  # a read-only folder refuses the cleanup too: keep the first error
                tmp.unlink(missing_ok=True)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


__all__ = ["SweepWriteError", "publish", "write_error"]
