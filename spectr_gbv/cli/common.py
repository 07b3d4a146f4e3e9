"""Argument helpers shared by the CLI commands (instance selection, K lists, output)."""

from __future__ import annotations

import argparse
import errno
import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from spectr_gbv.core.instance import Instance


#: Largest number of exact table entries (both models, prefixes of length 0..L) ``--random``
#: draws: about 0.2 GB (n = 16, L = 4 fits; n = 16, L = 5 would need 36M entries and 3.6 GB,
#: and is refused).
MAX_RANDOM_CLI_ENTRIES = 2_500_000

#: Most K values a ``--K`` list may name (ranges count every value they expand to).
MAX_K_VALUES = 64


#: Most decimal digits an exact value's numerator or denominator may have in a command's output.
#: Python refuses int -> str beyond 4,300 digits by default; exact multi-iteration values reach
#: ~12,000 digits (``simulate --methods spectr --K 8 --horizon 16``). Conversion is quadratic
#: in the digits, so longer values are refused instead.
MAX_EXACT_DIGITS = 100_000

#: Exit status when the command's own output could not be written (``sysexits.h`` ``EX_IOERR``):
#: stdout is a full disk (``> /dev/full``), a closed descriptor or another failing file.
EXIT_OUTPUT_ERROR = 74


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


class GuardedStdout(io.TextIOBase):
    """A stand-in for ``sys.stdout`` that turns a failed write into a recorded fault.

    A reader that closes the pipe early (``| head -1``) or a stdout that cannot take the
    bytes (``> /dev/full``) makes every ``write``/``flush`` raise ``OSError`` in the middle of a
    command. This wrapper catches it, records it (:attr:`broken_pipe`, :attr:`error`) and, as
    Python's documented recipe for ``SIGPIPE`` asks, points file descriptor 1 at
    ``os.devnull`` so that later writes and the interpreter's final flush succeed silently.
    The command then runs to its end and returns its own exit status (a verdict survives a
    closed pipe); :func:`guarded_stdout` maps the recorded fault to the exit status.

    Parameters
    ----------
    stream : text stream or None
        The stdout being wrapped (None when Python started with file descriptor 1 closed).

    References
    ----------
    Python documentation, ``signal`` module, "Note on SIGPIPE".
    """

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream
        #: The reader closed the pipe (``EPIPE``): output is dropped, the exit status is kept.
        self.broken_pipe = False
        #: Any other write failure (``ENOSPC``, ``EBADF``, ...): reported on stderr, exit 74.
        self.error: OSError | None = None
        if stream is None:
            self.error = OSError(errno.EBADF, "stdout is closed")

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding (``utf-8`` when it has none)."""
        return getattr(self._stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        """Always True: failed writes are recorded, not raised."""
        return True

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal (False once a write failed)."""
        if self._stream is None or self.failed:
            return False
        try:
            return bool(self._stream.isatty())
        except (AttributeError, ValueError, OSError):
            return False

    def fileno(self) -> int:
        """The wrapped stream's descriptor (``io.UnsupportedOperation`` when it has none)."""
        if self._stream is None:
            raise io.UnsupportedOperation("stdout is closed")
        return self._stream.fileno()

    @property
    def failed(self) -> bool:
        """True once a write or flush failed (the rest of the output is dropped)."""
        return self.broken_pipe or self.error is not None

    def write(self, text: str) -> int:
        """Write ``text``; after a failure, drop it. Returns ``len(text)`` either way."""
        if not self.failed and self._stream is not None:
            try:
                self._stream.write(text)
            except OSError as exc:
                self._fail(exc)
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream, recording a failure instead of raising it."""
        if not self.failed and self._stream is not None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        if isinstance(exc, BrokenPipeError):
            self.broken_pipe = True
        else:
            self.error = exc
        try:  # Python's SIGPIPE recipe: later writes (and the final flush at exit) go nowhere
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # type: ignore[union-attr]
            os.close(devnull)
        except (AttributeError, OSError, ValueError):
            pass  # no descriptor (a test's captured stream): the dropped writes are enough


@contextmanager
def guarded_stdout() -> Iterator[GuardedStdout]:
    """Run a command with ``sys.stdout`` wrapped in a :class:`GuardedStdout`, then restore it.

    The command's output is flushed before the context ends, so a failure of the last
    buffered bytes is recorded too.

    Yields
    ------
    GuardedStdout
        Read ``broken_pipe`` and ``error`` after the block; :func:`output_status` maps them
        to the exit status.
    """
    original = sys.stdout
    guard = GuardedStdout(original)
    sys.stdout = guard  # type: ignore[assignment]
    try:
        yield guard
    finally:
        guard.flush()
        sys.stdout = original


def output_status(guard: GuardedStdout, code: Any, command: str | None) -> Any:
    """The exit status of a command that returned ``code`` with stdout guarded by ``guard``.

    Parameters
    ----------
    guard : GuardedStdout
        The guard the command wrote through.
    code : int or None
        The command's own exit status (e.g. ``validate``'s verdict: 0, 1 or 3), or the code of
        argparse's ``SystemExit`` (None after ``--help``).
    command : str or None
        The subcommand's name, for the message (None: before one was parsed).

    Returns
    -------
    int or None
        ``code`` when every write succeeded or the reader closed the pipe (the output was not
        wanted; the verdict still counts); :data:`EXIT_OUTPUT_ERROR` (74) after any other write
        failure, which is reported as one line on stderr, e.g. ``spectr-gbv report: error:
        cannot write to stdout: No space left on device``.
    """
    if guard.error is None:
        return code
    reason = guard.error.strerror or str(guard.error)
    prog = "spectr-gbv" if command is None else f"spectr-gbv {command}"
    try:
        print(f"{prog}: error: cannot write to stdout: {reason}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass  # stderr is gone too: the exit status is all that is left
    return EXIT_OUTPUT_ERROR


def add_instance_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--instance PATH`` / ``--random n,L,seed`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--instance",
        metavar="PATH",
        help="instance JSON file (default: the embedded public test vector, docs/theory.md)",
    )
    group.add_argument(
        "--random",
        metavar="n,L,seed[,zero_prob]",
        help="a random exact instance: vocabulary n, draft length L, seed, optional share of zero entries",
    )


def resolve_instance(args: argparse.Namespace) -> Instance:
    """The instance chosen by ``--instance`` / ``--random``, else the embedded default.

    Raises
    ------
    UsageError
        Unreadable or invalid instance, malformed ``--random``.
    """
    from spectr_gbv.core.instance import default_instance, load_instance, random_instance

    try:
        if getattr(args, "instance", None) is not None:
            if not args.instance:
                raise UsageError("--instance: the path is empty")
            return load_instance(args.instance)
        if getattr(args, "random", None) is not None:
            parts = args.random.split(",")
            usage = f"--random expects n,L,seed[,zero_prob] (ints, then a float), got {args.random!r}"
            if len(parts) not in (3, 4):
                raise UsageError(usage)
            try:
                n, L, seed = (int(x) for x in parts[:3])
                zero_prob = float(parts[3]) if len(parts) == 4 else 0.0
            except ValueError as exc:
                raise UsageError(usage) from exc
            if n < 1 or L < 1 or not 0 <= zero_prob < 1:
                raise UsageError(f"--random: need n >= 1, L >= 1, 0 <= zero_prob < 1; got {args.random!r}")
            from spectr_gbv.core.tabular import ENTRY_BYTES, format_bytes, table_entries

            entries = 2 * table_entries(n, L)
            if entries > MAX_RANDOM_CLI_ENTRIES:
                count = str(entries) if entries < 2**62 else "over 10^18"
                raise UsageError(
                    f"--random {args.random}: n={n}, L={L} needs {count} exact table entries for p and q "
                    f"(~{format_bytes(entries * ENTRY_BYTES)}, ~{entries * 12e-6:.0f} s to draw), above the "
                    f"--random limit {MAX_RANDOM_CLI_ENTRIES} (e.g. n=16, L=4 or n=2, L=18)"
                )
            return random_instance(n, L, seed, exact=True, zero_prob=zero_prob)
        return default_instance()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


@contextmanager
def exact_output(hint: str) -> Iterator[None]:
    """Let exact values up to :data:`MAX_EXACT_DIGITS` digits print in the block (Python stops at 4,300).

    The limit is raised only for the block and restored after it, so parsing untrusted input
    elsewhere keeps Python's protection.

    Parameters
    ----------
    hint : str
        What the user can change to get smaller values (e.g. ``"lower --horizon or --K"``),
        appended to the error.

    Raises
    ------
    UsageError
        A value in the block has more than :data:`MAX_EXACT_DIGITS` digits: ``an exact value
        has over 100000 decimal digits (MAX_EXACT_DIGITS); HINT``.
    """
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(max(previous, MAX_EXACT_DIGITS) if previous else 0)
    try:
        yield
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        raise UsageError(
            f"an exact value has over {MAX_EXACT_DIGITS} decimal digits (MAX_EXACT_DIGITS), too long to print; {hint}"
        ) from exc
    finally:
        sys.set_int_max_str_digits(previous)


def parse_ks(text: str, *, max_k: int = 64) -> list[int]:
    """Parse ``"1,2,3"`` or ``"1-4"`` into a list of K values in ``1..max_k``.

    Raises
    ------
    UsageError
        Not a list of ints, a value outside ``1..max_k`` (a range's ends are checked before it
        is expanded), or more than :data:`MAX_K_VALUES` values.
    """
    out: list[int] = []
    bounds = f"--K values must lie in 1..{max_k}, got {text!r}"
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise UsageError(f"--K range {part!r} is empty: write it low-high (e.g. 1-4)")
                if not 1 <= lo <= max_k or not 1 <= hi <= max_k:  # check before expanding the range
                    raise UsageError(bounds)
                out.extend(range(lo, hi + 1))
                if len(out) > MAX_K_VALUES:
                    raise UsageError(f"--K names more than {MAX_K_VALUES} values, got {text!r}")
            elif part:
                out.append(int(part))
            else:
                raise ValueError("empty element")
    except ValueError as exc:
        raise UsageError(f"--K expects comma-separated ints (e.g. 1,2,3 or 1-4), got {text!r}") from exc
    if not out or any(not 1 <= k <= max_k for k in out):
        raise UsageError(bounds)
    if len(out) > MAX_K_VALUES:
        raise UsageError(f"--K names more than {MAX_K_VALUES} values, got {text!r}")
    return out


def print_json(obj: Any) -> None:
    """Print one JSON object to stdout."""
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    """Plain-text table with right-aligned columns."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(lines)
