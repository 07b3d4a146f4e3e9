"""Progress bars for long computations: a tqdm bar on a terminal, a no-op everywhere else.

:func:`progress` is the one entry point. A bar is shown only when all of these hold:

* the stream it writes to (default ``sys.stderr``, read at call time) is a terminal
  (``isatty()`` is true), so pipes, files, CI logs and captured test output stay clean;
* quiet mode is off: not requested by the call (``quiet=True``), by :func:`set_quiet`
  (the CLI's ``--quiet`` flags), nor by the environment variable ``SPECTR_GBV_QUIET``
  (any value other than ``""``, ``"0"``, ``"false"``, ``"no"``);
* ``tqdm`` can be imported (a base dependency; it is imported lazily, inside
  :func:`progress`, so importing this module costs nothing).

Otherwise the caller gets a :class:`NullProgress` with the same methods, which does nothing.
Bars never write to stdout, so the results a command prints are unaffected.

Layer rule: this module is part of ``core`` and imports nothing from the package.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol, TextIO

#: Environment variable that silences every bar when set to a true value (e.g. ``1``).
QUIET_ENV = "SPECTR_GBV_QUIET"

_quiet = False


class ProgressBar(Protocol):
    """The part of ``tqdm.tqdm``'s interface the package uses (also :class:`NullProgress`'s)."""

    def update(self, n: float = 1) -> Any:
        """Advance by ``n`` units."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Show ``s`` after the bar (e.g. the current stage)."""

    def close(self) -> None:
        """Finish the bar (it is cleared when created with ``leave=False``)."""

    def __enter__(self) -> ProgressBar: ...

    def __exit__(self, *exc: object) -> Any: ...


class NullProgress:
    """A progress bar that shows nothing: what :func:`progress` returns when no bar is shown."""

    disable = True

    def update(self, n: float = 1) -> None:
        """Do nothing."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Do nothing."""

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Do nothing."""

    def close(self) -> None:
        """Do nothing."""

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def set_quiet(quiet: bool = True) -> bool:
    """Switch every progress bar of the process off (``True``) or back on (``False``).

    Parameters
    ----------
    quiet : bool
        The new setting.

    Returns
    -------
    bool
        The previous setting, to restore it afterwards.

    Examples
    --------
    >>> previous = set_quiet(True)
    >>> is_quiet()
    True
    >>> _ = set_quiet(previous)
    """
    global _quiet
    previous, _quiet = _quiet, bool(quiet)
    return previous


def is_quiet() -> bool:
    """True when :func:`set_quiet` or the environment variable :data:`QUIET_ENV` silences the bars."""
    env = os.environ.get(QUIET_ENV, "").strip().lower()
    return _quiet or env not in ("", "0", "false", "no")


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def progress(
    total: int | None,
    desc: str,
    *,
    quiet: bool | None = None,
    file: TextIO | None = None,
    unit: str = "it",
    leave: bool = False,
    delay: float = 0.0,
    force: bool = False,
) -> ProgressBar:
    """A progress bar over ``total`` units of work, or a no-op when none should be shown.

    Parameters
    ----------
    total : int or None
        Units of work (None: unknown, tqdm then shows a counter).
    desc : str
        Label written before the bar.
    quiet : bool or None
        True: never show a bar. None (default): follow :func:`set_quiet` and the environment
        variable :data:`QUIET_ENV`. False: ignore both (the terminal check still applies).
    file : text stream, optional
        Where the bar is written (default: ``sys.stderr`` at call time). A bar is shown
        only when ``file.isatty()`` is true.
    unit : str
        Name of one unit of work (default ``"it"``).
    leave : bool
        Keep the finished bar on screen (default False: it is cleared by ``close()``).
    delay : float
        Seconds before the bar first appears (default 0): shorter work prints nothing.
    force : bool
        Show the bar whatever ``quiet`` and the terminal check say (default False).

    Returns
    -------
    ProgressBar
        A ``tqdm.tqdm`` bar, or a :class:`NullProgress`. Both are context managers with
        ``update(n)``, ``set_postfix_str(s)`` and ``close()``.

    Examples
    --------
    >>> import io
    >>> with progress(3, "work", file=io.StringIO()) as bar:  # not a terminal: a no-op
    ...     bar.update()
    >>> type(bar).__name__
    'NullProgress'
    """
    stream = sys.stderr if file is None else file
    silent = is_quiet() if quiet is None else quiet
    if not force and (silent or not _is_tty(stream)):
        return NullProgress()
    try:
        from tqdm import tqdm  # lazy: importing core stays light
    except ImportError:
        return NullProgress()
    # no monitor thread: the validate harness forks worker processes while a bar is open, and a
    # fork copies no thread but every lock a thread may hold
    tqdm.monitor_interval = 0
    return tqdm(total=total, desc=desc, file=stream, unit=unit, leave=leave, delay=delay, dynamic_ncols=True)


__all__ = ["QUIET_ENV", "NullProgress", "ProgressBar", "is_quiet", "progress", "set_quiet"]
