"""Exact and float64 scalar/array helpers shared by every layer.

The package computes with two number kinds behind one API:

* exact: :class:`fractions.Fraction` scalars, held in numpy ``object`` arrays;
* float: ``numpy.float64`` arrays.

numpy's element-wise operators (``+ - * /``, ``**``, ``np.minimum``/``np.maximum``,
comparisons) work on both, so the theory layer writes each formula once. The helpers here
cover what numpy does not do safely on object arrays (division by zero raises there) and
the parsing/printing of probabilities.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from numbers import Rational, Real
from typing import Any

import numpy as np

#: Absolute tolerance on a float64 probability row's sum (``|sum - 1| <= FLOAT_ROW_ATOL``).
#: Exact rows must sum to exactly 1.
FLOAT_ROW_ATOL = 1e-9

Scalar = Fraction | float

#: Longest probability string :func:`parse_probability` reads (``"1/3"``, ``"0.25"``, ``"1e-3"``).
MAX_PROBABILITY_CHARS = 200
#: Largest decimal exponent magnitude in a probability string (``"1e-400"`` is fine,
#: ``"1e-99999999"`` would build a huge integer).
MAX_PROBABILITY_EXPONENT = 1000

_EXPONENT = re.compile(r"[eE]\s*([+-]?\d+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: object) -> str:
    r"""``str(text)`` with control and bidirectional-override characters written as escapes.

    Terminal escapes (``\x1b[31m``), carriage returns, NUL bytes, Unicode direction overrides and
    lone surrogates (undecodable bytes of a file name) would otherwise act on the terminal, or
    fail, when printed; other Unicode (``"θ"``, ``"数"``) is kept.

    Examples
    --------
    >>> printable("red\x1b[31m")
    'red\\x1b[31m'
    >>> printable("θ-instance")
    'θ-instance'
    """
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(text))


def check_seed(seed: Any, name: str = "seed", *, allow_generator: bool = False) -> int | None:
    """Return ``seed`` as an int (or None) after checking it is a valid numpy seed.

    Parameters
    ----------
    seed : int, None or numpy.random.Generator
        An int ``>= 0`` (numpy's rule), None for fresh entropy, or, with ``allow_generator``,
        a :class:`numpy.random.Generator` (returned unchanged).
    name : str
        The argument's name, used in the message.
    allow_generator : bool
        Accept a Generator.

    Returns
    -------
    int, None or numpy.random.Generator

    Raises
    ------
    ValueError
        A negative int, or a value that is not an int (a bool, float or string); the message
        names ``name``.

    Examples
    --------
    >>> check_seed(3)
    3
    """
    if seed is None or (allow_generator and isinstance(seed, np.random.Generator)):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"{name} must be an int >= 0 or None, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be an int >= 0 or None, got {seed!r}")
    return int(seed)


def parse_probability(value: Any, where: str) -> Scalar:
    """Parse one probability given as a fraction string, an int or a float.

    Parameters
    ----------
    value : str | int | float | Fraction
        ``"3/4"``, ``"0.25"``, ``"1"`` and ints parse to an exact :class:`Fraction`;
        a Python/numpy float parses to ``float`` (the instance then becomes float64).
    where : str
        Human-readable location used in the error message (e.g. ``"target prefix (0, 1)"``).

    Returns
    -------
    Fraction or float

    Raises
    ------
    ValueError
        If the value is not a number, is NaN/inf, or is negative; the message names ``where``.
    """
    out: Scalar
    if isinstance(value, float):  # the common case first (numpy float64 too): no ABC checks
        out = float(value)
        if not math.isfinite(out):
            raise ValueError(f"{where}: probability {value!r} is not finite")
    elif type(value) is Fraction:  # exact rows: integer comparisons (the denominator is > 0)
        if value.numerator < 0:
            raise ValueError(f"{where}: probability {_short_value(value)} is negative")
        if value.numerator > value.denominator:
            raise ValueError(f"{where}: probability {_short_value(value)} is above 1")
        return value
    elif isinstance(value, bool):
        raise ValueError(f"{where}: probability {value!r} is a bool, not a number")
    elif isinstance(value, Rational):
        out = Fraction(value)
    elif isinstance(value, str):
        if len(value) > MAX_PROBABILITY_CHARS:
            raise ValueError(f"{where}: probability string of {len(value)} characters (limit {MAX_PROBABILITY_CHARS})")
        exponent = _EXPONENT.search(value)
        if exponent and abs(int(exponent.group(1))) > MAX_PROBABILITY_EXPONENT:
            raise ValueError(f"{where}: probability {value!r} has an exponent beyond +-{MAX_PROBABILITY_EXPONENT}")
        try:
            out = Fraction(value.strip())
        except (ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"{where}: cannot parse probability {value!r}") from exc
    elif isinstance(value, Real):
        out = float(value)
        if not math.isfinite(out):
            raise ValueError(f"{where}: probability {value!r} is not finite")
    else:
        raise ValueError(f"{where}: probability {value!r} is not a number")
    if out < 0:
        raise ValueError(f"{where}: probability {_short_value(value)} is negative")
    if out > 1 if isinstance(out, Fraction) else out > 1 + FLOAT_ROW_ATOL:
        raise ValueError(f"{where}: probability {_short_value(value)} is above 1")
    return out


def _short_value(value: Any) -> str:
    """``repr(value)``, or the size of a huge int or long string (their repr can fail or flood)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value).bit_length() > 160:
        return f"(an int of {abs(value).bit_length()} bits)"
    if isinstance(value, str) and len(value) > 40:
        return repr(value[:40] + "...")
    return repr(value)


def check_distribution(values: Any, name: str) -> None:
    """Raise unless ``values`` is a probability distribution: finite, >= 0, summing to 1.

    Parameters
    ----------
    values : iterable of Fraction, int or float
        The probabilities (a row, or the values of a law).
    name : str
        The argument's name, used in the message.

    Raises
    ------
    ValueError
        A value that is not a real number, NaN/inf, negative, or a sum different from 1
        (exactly for rationals, within :data:`FLOAT_ROW_ATOL` when any value is a float).
    """
    vals = list(values)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, Real):
            raise ValueError(f"{name}: {v!r} is not a probability")
        if not math.isfinite(float(v)):
            raise ValueError(f"{name}: {v!r} is not finite")
        if v < 0:
            raise ValueError(f"{name}: {v!r} is negative")
    exact = all(isinstance(v, Rational) for v in vals)
    total = sum(vals, Fraction(0)) if exact else math.fsum(float(v) for v in vals)
    if (total != 1) if exact else abs(total - 1) > FLOAT_ROW_ATOL:
        raise ValueError(f"{name}: probabilities sum to {total}, not 1")


def is_exact_array(arr: np.ndarray) -> bool:
    """True when ``arr`` is a numpy object array (holding Fractions), False for float64."""
    return np.asarray(arr).dtype == object


def zeros_like_kind(shape: tuple[int, ...] | int, exact: bool) -> np.ndarray:
    """Array of zeros of the given shape: Fractions (object dtype) when ``exact``, else float64."""
    if exact:
        out = np.empty(shape, dtype=object)
        out[...] = Fraction(0)
        return out
    return np.zeros(shape, dtype=np.float64)


def scalar_one(exact: bool) -> Scalar:
    """1 as a Fraction when ``exact``, else 1.0."""
    return Fraction(1) if exact else 1.0


def safe_divide(num: np.ndarray, den: np.ndarray, fill: Scalar) -> np.ndarray:
    """Element-wise ``num / den`` where ``den > 0`` and ``fill`` elsewhere.

    Works for float64 and Fraction (object) arrays; never divides by zero, so it never raises
    :class:`ZeroDivisionError` on object arrays nor emits numpy warnings on floats.

    Parameters
    ----------
    num, den : ndarray, same shape (or broadcastable), float64 or object
    fill : Fraction or float
        Value where ``den <= 0``.

    Returns
    -------
    ndarray of the broadcast shape, object dtype if either input is object, else float64.
    """
    num = np.asarray(num)
    den = np.asarray(den)
    positive = den > 0
    exact = is_exact_array(num) or is_exact_array(den)
    one = scalar_one(exact)
    safe_den = np.where(positive, den, one)
    out = np.where(positive, num / safe_den, fill)
    if exact:
        return out.astype(object)
    return out.astype(np.float64)


def to_float_array(arr: np.ndarray) -> np.ndarray:
    """Convert an object array of Fractions (or anything numeric) to float64."""
    return np.asarray(arr, dtype=np.float64)


def to_fraction_array(arr: np.ndarray) -> np.ndarray:
    """Convert a float64 array to an object array of the exactly equal Fractions."""
    arr = np.asarray(arr)
    out = np.empty(arr.shape, dtype=object)
    flat_in = arr.reshape(-1)
    flat_out = out.reshape(-1)
    for i, v in enumerate(flat_in):
        flat_out[i] = v if isinstance(v, Fraction) else Fraction(float(v))
    return out


def sum_exact(arr: np.ndarray) -> Scalar:
    """Sum of all entries: an exact Fraction for object arrays, a Python float otherwise."""
    arr = np.asarray(arr)
    if is_exact_array(arr):
        return sum(arr.reshape(-1).tolist(), Fraction(0))
    return float(arr.sum())


def format_value(value: Scalar | float, digits: int = 6) -> str:
    """``"a/b"`` for a Fraction (``"a"`` if integral), a rounded decimal for a float."""
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    return f"{float(value):.{digits}f}"


def json_value(value: Scalar | float) -> str | float:
    """JSON encoding used by every CLI command: ``"a/b"`` strings when exact, numbers otherwise."""
    if isinstance(value, Fraction):
        return format_value(value)
    return float(value)


def _decimal(x: float) -> str:
    return f"{x:.6f}" if x == 0 or abs(x) >= 1e-3 else f"{x:.3e}"


def display_value(value: Scalar | float | None, *, max_fraction_len: int = 13) -> str:
    """How every command prints a value: one format everywhere.

    * ``None`` -> ``"-"``;
    * an integral Fraction -> ``"2"``;
    * a short Fraction -> ``"61/36 = 1.694444"``;
    * a Fraction too long to read -> ``"~1.568056"`` (``~`` marks an exact rational shown rounded;
      ``--json`` prints it exactly);
    * a float (LP optimum, float64 instance) -> ``"1.972222"`` (``"4.531e-05"`` below 1e-3).
    """
    if value is None:
        return "-"
    if isinstance(value, Fraction):
        text = format_value(value)
        if "/" not in text:
            return text
        if len(text) <= max_fraction_len:
            return f"{text} = {_decimal(float(value))}"
        return "~" + _decimal(float(value))
    return _decimal(float(value))
