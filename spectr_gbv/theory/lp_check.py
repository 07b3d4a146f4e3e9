"""Exact rational rechecks of the LP kernels of :mod:`spectr_gbv.theory.lp`.

Kernel entries are floats; each is read as the exact rational value of that float
(``Fraction(float)``) and multiplied by the exact multiset mass m(M), so the defects below
are exact statements about the kernel that was returned (THEORY.md section 2: compute the
validity defect in rational arithmetic).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from spectr_gbv.core.numbers import to_fraction_array, zeros_like_kind
from spectr_gbv.core.tabular import TabularAR

Kernel = dict[tuple[tuple[int, ...], ...], dict[tuple[int, ...], float]]


def exact(arr: np.ndarray) -> np.ndarray:
    """Object array of Fractions: unchanged if already exact, else the floats' exact values."""
    return arr if arr.dtype == object else to_fraction_array(arr)


def _masses(kernel: Kernel, draft: TabularAR, length: int) -> dict:
    """Exact m(M) = K!/prod(c!) prod_k q(x^(k)) for every multiset key of ``kernel``."""
    q_joint = exact(draft.joint(length))
    out = {}
    for key in kernel:
        mult = math.factorial(len(key))
        for _, group in itertools.groupby(key):
            mult //= math.factorial(len(list(group)))
        out[key] = mult * math.prod((q_joint[x] for x in key), start=Fraction(1))
    return out


def _row_defect(kernel: Kernel) -> Fraction:
    return max(abs(sum(map(Fraction, law.values()), Fraction(0)) - 1) for law in kernel.values())


def _lcp(x: Sequence[int], y: Sequence[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(x, y, strict=True)) if a != b), len(x))


def _scaled_masses(kernel: Kernel, draft: TabularAR, length: int) -> tuple[dict, int]:
    """Integers I(M) and one common denominator d with m(M) = I(M) / d, exactly."""
    q_joint = exact(draft.joint(length))
    drafts = {x for key in kernel for x in key}
    q = {x: Fraction(q_joint[x]) for x in drafts}
    den = math.lcm(1, *(f.denominator for f in q.values()))
    num = {x: f.numerator * (den // f.denominator) for x, f in q.items()}
    out = {}
    for key in kernel:
        mult = math.factorial(len(key))
        for _, group in itertools.groupby(key):
            mult //= math.factorial(len(list(group)))
        out[key] = mult * math.prod(num[x] for x in key)
    k = len(next(iter(kernel))) if kernel else 0
    return out, den**k


def check_opt(kernel: Kernel, target: TabularAR, draft: TabularAR, length: int) -> tuple[Fraction, Fraction, Fraction]:
    """(validity defect, row-sum defect, exact value) of an OPT kernel, in exact integers.

    Same exact quantities as :func:`check_opt_fractions`, computed on one common denominator:
    every float entry is num / 2^e (``float.as_integer_ratio``), every mass I(M) / d, so each
    product and sum is a Python integer over d * 2^max(e); Fractions are formed only per output.
    """
    if not kernel:
        return check_opt_fractions(kernel, target, draft, length)
    masses, den = _scaled_masses(kernel, draft, length)
    scale = max((v.as_integer_ratio()[1] for law in kernel.values() for v in law.values()), default=1)
    acc: dict[tuple[int, ...], int] = {}
    value = 0
    worst = 0
    for key, law in kernel.items():
        mass = masses[key]
        total = 0
        for o, prob in law.items():
            top, bottom = float(prob).as_integer_ratio()
            t = top * (scale // bottom)
            total += t
            w = mass * t
            acc[o] = acc.get(o, 0) + w
            value += w * (len(o) - 1)
        worst = max(worst, abs(total - scale))
    a = [zeros_like_kind((target.n,) * j, True) for j in range(length + 2)]
    common = den * scale
    for o, w in acc.items():
        a[len(o)][o] = Fraction(w, common)
    acc_level = a[1]
    for j in range(1, length + 1):
        acc_level = acc_level[..., None] * exact(target.level(j)) + a[j + 1]
    gaps = np.abs(acc_level - exact(target.joint(length + 1))).ravel().tolist()
    return sum(gaps, Fraction(0)) / 2, Fraction(worst, scale), Fraction(value, common)


def check_opt_fractions(
    kernel: Kernel, target: TabularAR, draft: TabularAR, length: int
) -> tuple[Fraction, Fraction, Fraction]:
    """(validity defect, row-sum defect, exact value) of an OPT kernel (plain Fraction loop).

    The left side sum_m a(y^m) p(y_{m+1..L+1}|y^m) is accumulated level by level,
    A_1 = a_1, A_{j+1} = A_j p(.|.) + a_{j+1}, over dense object arrays of shape (n,)*j.
    """
    masses = _masses(kernel, draft, length)
    a = [zeros_like_kind((target.n,) * j, True) for j in range(length + 2)]
    value = Fraction(0)
    for key, law in kernel.items():
        for o, prob in law.items():
            w = masses[key] * Fraction(prob)
            a[len(o)][o] += w
            value += w * (len(o) - 1)
    acc = a[1]
    for j in range(1, length + 1):
        acc = acc[..., None] * exact(target.level(j)) + a[j + 1]
    gaps = np.abs(acc - exact(target.joint(length + 1))).ravel().tolist()
    return sum(gaps, Fraction(0)) / 2, _row_defect(kernel), value


def check_ot(kernel: Kernel, target: TabularAR, draft: TabularAR, length: int) -> tuple[Fraction, Fraction, Fraction]:
    """(TV of the y-marginal from p, max row/column defect, exact value) of an OT kernel."""
    masses = _masses(kernel, draft, length)
    column = zeros_like_kind((target.n,) * length, True)
    value = Fraction(0)
    for key, law in kernel.items():
        for y, prob in law.items():
            w = masses[key] * Fraction(prob)
            column[y] += w
            value += w * max(_lcp(x, y) for x in key)
    gaps = np.abs(column - exact(target.joint(length))).ravel().tolist()
    return sum(gaps, Fraction(0)) / 2, max(_row_defect(kernel), max(gaps)), value
