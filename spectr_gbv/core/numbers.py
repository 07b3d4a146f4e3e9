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
from fractions import Fraction
from numbers import Rational, Real
from typing import Any

import numpy as np

#: Absolute tolerance on a float64 probability row's sum (``|sum - 1| <= FLOAT_ROW_ATOL``).
#: Exact rows must sum to exactly 1.
FLOAT_ROW_ATOL = 1e-9

Scalar = Fraction | float


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
    if isinstance(value, bool):
        raise ValueError(f"{where}: probability {value!r} is a bool, not a number")
    if isinstance(value, Rational):
        out: Scalar = Fraction(value)
    elif isinstance(value, str):
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
        raise ValueError(f"{where}: probability {value!r} is negative")
    return out


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
