"""Shared machinery of the bad-input tests (``tests/<layer>/test_bad_input.py``, docs/bad_input.md).

Each case feeds one entry point one class of bad input (:data:`CLASSES`) and states what must
happen: an exception of a given type whose message contains the argument's name (and any
other words that make it clear), an exception with exactly a given message, or a result
checked against the correct value. Cases where the package misbehaves (silent wrong result,
unclear error, hang) are marked ``xfail(strict=True)`` with the reason, for the integrator to
fix; they must keep failing until the library is fixed. Calls run under a time limit
(SIGALRM), so a hang fails instead of blocking the suite.

Each layer's test file builds a list of :class:`Case` and runs it with
``@pytest.mark.parametrize("case", params(CASES))`` and :func:`run_case`;
``tests/test_bad_input_classes.py`` checks that every class is tried across all layers.
"""

from __future__ import annotations

import atexit
import importlib.util
import io
import json
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spectr_gbv.core import TabularAR, default_instance
from spectr_gbv.reference import iteration_inputs

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_TRANSFORMERS = HAS_TORCH and importlib.util.find_spec("transformers") is not None

#: The classes of bad input tried (each case belongs to one; ``test_bad_input_classes`` checks them all).
CLASSES: tuple[str, ...] = (
    "nan",
    "inf",
    "negative",
    "unnormalised",
    "wrong_shape",
    "vocab_mismatch",
    "K_zero",
    "L_zero",
    "K_huge",
    "L_huge",
    "id_out_of_range",
    "fp16",
    "wrong_type",
    "too_large",
    "duplicate_key",
    "bad_file",
    "bad_seed",
    "bad_parameter",
    "control_chars",
    "huge_number",
)

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------------------- case machinery
@dataclass(frozen=True)
class Raises:
    """The call must raise ``exc`` with every string of ``names`` in its message."""

    exc: type[BaseException] | tuple[type[BaseException], ...]
    names: tuple[str | tuple[str, ...], ...]  # a tuple entry: any one of its strings


@dataclass(frozen=True)
class Result:
    """The call must return a value accepted by ``check`` (which asserts)."""

    check: Callable[[Any], None]


@dataclass(frozen=True)
class Message:
    """The call must raise ``exc`` with exactly ``text`` as its message."""

    exc: type[BaseException] | tuple[type[BaseException], ...]
    text: str


@dataclass(frozen=True)
class Case:
    """One entry point (``entry``), one bad input of class ``cls`` described by ``what``, and what must happen."""

    entry: str
    cls: str
    what: str
    call: Callable[[], Any]
    expect: Raises | Result | Message
    needs: str | None = None  # "torch" or "transformers"
    xfail: str | None = None  # reason, when the package misbehaves
    timeout: float = 20.0


class CallTimeout(Exception):
    """The call ran past its time limit (a hang)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CallTimeout` in the main thread after ``seconds`` (SIGALRM)."""

    def handler(signum: int, frame: Any) -> None:
        raise CallTimeout(f"call did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def err(*names: str, exc: Any = ValueError) -> Raises:
    """Expect ``exc`` with every string of ``names`` (a tuple: any one of its strings) in its message."""
    return Raises(exc, names)


def msg(text: str, exc: Any = ValueError) -> Message:
    """Expect ``exc`` with exactly ``text`` as its message."""
    return Message(exc, text)


def ok(check: Callable[[Any], None]) -> Result:
    """Expect a result that ``check`` accepts."""
    return Result(check)


def equals(expected: Any) -> Callable[[Any], None]:
    """A check that the result equals ``expected``."""

    def check(value: Any) -> None:
        assert value == expected

    return check


def check_prefix_of(out: tuple[int, ...], draft: tuple[int, ...]) -> None:
    """Assert that ``out`` is an accepted prefix of ``draft`` followed by one token of {0, 1}."""
    assert 1 <= len(out) <= len(draft) + 1 and out[:-1] == draft[: len(out) - 1] and out[-1] in (0, 1)


def params(cases: Sequence[Case]) -> list[Any]:
    """One ``pytest.param`` per case, id ``entry-cls-what``, skipped without its optional dependency."""
    out = []
    for case in cases:
        marks = []
        if case.needs == "torch" and not HAS_TORCH:
            marks.append(pytest.mark.skip(reason="torch not installed"))
        if case.needs == "transformers" and not HAS_TRANSFORMERS:
            marks.append(pytest.mark.skip(reason="torch/transformers not installed"))
        if case.xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
        ident = f"{case.entry}-{case.cls}-{case.what}".replace(" ", "_")
        out.append(pytest.param(case, id=ident, marks=marks))
    return out


def run_case(case: Case) -> None:
    """Run one case under its time limit and assert what it expects."""
    with time_limit(case.timeout):
        if isinstance(case.expect, Message):
            with pytest.raises(case.expect.exc) as info:
                case.call()
            assert str(info.value) == case.expect.text
        elif isinstance(case.expect, Raises):
            with pytest.raises(case.expect.exc) as info:
                case.call()
            message = str(info.value)
            for name in case.expect.names:
                alternatives = name if isinstance(name, tuple) else (name,)
                assert any(a in message for a in alternatives), f"{name!r} not in the message {message!r}"
        else:
            case.expect.check(case.call())


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


# ---------------------------------------------------------------------------- shared inputs
P, Q = default_instance()
P3 = TabularAR.random(3, 2, 0, exact=True, name="target")
INST = default_instance()
FLOAT = default_instance().to_float()
D, DQ, DP = iteration_inputs(FLOAT, [[0, 1], [1, 1]])  # float64 [2, 2], [2, 2, 2], [2, 3, 2]

# ---------------------------------------------------------------------------- files
#: A temporary folder for the files the cases write, removed at exit.
TMP = Path(tempfile.mkdtemp(prefix="spectr_bad_input_"))
atexit.register(shutil.rmtree, TMP, True)
DEFAULT_JSON = default_instance().to_dict()


def write_file(name: str, content: str | bytes) -> str:
    """Write ``content`` to a file of :data:`TMP` and return its path."""
    path = TMP / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def json_file(filename: str, **overrides: Any) -> str:
    """Write the default instance's JSON with ``overrides`` to ``TMP/filename`` and return its path."""
    return write_file(filename, json.dumps({**DEFAULT_JSON, **overrides}))


def duplicate_key_file() -> str:
    """Write ``TMP/dup.json``: the default instance with a second ``""`` key in its target."""
    # a second "" in target: json's last-one-wins would change B(1) from 13/8 to 57/40
    target = json.dumps(DEFAULT_JSON["target"])[:-1] + ', "": ["1/4", "3/4"]}'
    text = f'{{"name": "dup", "n": 2, "L": 2, "target": {target}, "draft": {json.dumps(DEFAULT_JSON["draft"])}}}'
    return write_file("dup.json", text)
