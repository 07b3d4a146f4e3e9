"""Building the rows of the battery's instances in exact rationals.

Helpers of :func:`~spectr_gbv.validate.battery.default_battery`: rounding float weights to
rational rows that sum to exactly 1, tabular models from a row function, Dirichlet and softmax
rows, tilted and tied rows, and the deep-residual root row :data:`DEEP_RESIDUAL_ROW` of
``wide_tree``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from spectr_gbv.core.tabular import TabularAR

#: Root row of ``wide_tree``: q puts 4/5 of its mass on tokens 2, 3 (p = 1/20 each), so most
#: drafts are rejected; token 0 (q = 1/5) keeps a share of each residual, which changes at
#: every rejection: R_1 = (3/7, 4/7, 0, 0), R_2 = (2/7, 5/7, 0, 0), R_3 = (3/28, 25/28, 0, 0).
DEEP_RESIDUAL_ROW: tuple[tuple[Fraction, ...], tuple[Fraction, ...]] = (
    (Fraction(1, 2), Fraction(2, 5), Fraction(1, 20), Fraction(1, 20)),
    (Fraction(1, 5), Fraction(0), Fraction(3, 10), Fraction(1, 2)),
)


def _fractions(weights: np.ndarray, denominator: int) -> list[Fraction]:
    """Round non-negative weights to a rational row summing to exactly 1.

    Positive weights stay positive (at least 1/denominator before normalising), zeros stay 0.
    """
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    ints = np.rint(w * denominator).astype(np.int64)
    ints[(w > 0) & (ints == 0)] = 1
    total = int(ints.sum())
    return [Fraction(int(i), total) for i in ints]


def tabular_model(
    n: int, depth: int, row: Callable[[tuple[int, ...]], np.ndarray], denominator: int, name: str
) -> TabularAR:
    """A tabular model over ``n`` tokens to ``depth``: each prefix's row is ``row(prefix)`` rounded to rationals.

    The weights of ``row(prefix)`` (float ``[n]``, non-negative) are rounded to a row of
    denominator about ``denominator`` summing to exactly 1 (positive weights stay positive).
    """
    laws = {
        prefix: _fractions(row(prefix), denominator)
        for t in range(depth + 1)
        for prefix in itertools.product(range(n), repeat=t)
    }
    return TabularAR(n, laws, depth=depth, name=name)


def dirichlet_row(rng: np.random.Generator, n: int, conc: float = 1.0) -> np.ndarray:
    """One float64 row ``[n]`` drawn from a symmetric Dirichlet of concentration ``conc``."""
    return rng.dirichlet(np.full(n, conc))


def softmax_row(logits: np.ndarray, temperature: float) -> np.ndarray:
    """The softmax of ``logits / temperature`` (float64, shape of ``logits``)."""
    z = logits / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


Rows = dict[tuple[int, ...], list[Fraction]]


def _tilted(q_row: list[Fraction], loser: int, share: Fraction) -> list[Fraction]:
    """p = q with ``share`` of token ``loser``'s mass moved to the others in proportion to q.

    Every other token then has the same ratio p/q > 1 (a tie before and after clamping at 1).
    """
    moved = q_row[loser] * share
    rest = 1 - q_row[loser]
    return [q_row[v] - moved if v == loser else q_row[v] * (1 + moved / rest) for v in range(len(q_row))]


def tied_rows(rng: np.random.Generator, n: int, L: int) -> tuple[Rows, Rows]:
    """``tied_ratios``: tilted rows (ties at ratio > 1), one p = q row, Dirichlet rows at the bonus depth."""
    p_rows: Rows = {}
    q_rows: Rows = {}
    for t in range(L):
        for pre in itertools.product(range(n), repeat=t):
            q_row = _fractions(dirichlet_row(rng, n, 2.0), 60)
            if pre == (0,) * t and t > 0:
                p_rows[pre] = list(q_row)  # p = q: every ratio is 1, the residual is zero
            else:
                p_rows[pre] = _tilted(q_row, int(rng.integers(n)), Fraction(1, 2))
            q_rows[pre] = q_row
    for pre in itertools.product(range(n), repeat=L):
        p_rows[pre] = _fractions(dirichlet_row(rng, n), 240)
    return p_rows, q_rows


def deep_rows(rng: np.random.Generator, n: int, L: int) -> tuple[Rows, Rows]:
    """``wide_tree``: :data:`DEEP_RESIDUAL_ROW` at the root, token-permuted copies below it."""
    base_p, base_q = DEEP_RESIDUAL_ROW
    p_rows: Rows = {}
    q_rows: Rows = {}
    for t in range(L):
        for pre in itertools.product(range(n), repeat=t):
            perm = np.arange(n) if t == 0 else rng.permutation(n)
            p_rows[pre] = [base_p[int(perm[v])] for v in range(n)]
            q_rows[pre] = [base_q[int(perm[v])] for v in range(n)]
    for pre in itertools.product(range(n), repeat=L):
        p_rows[pre] = _fractions(dirichlet_row(rng, n), 240)
    return p_rows, q_rows


__all__ = ["DEEP_RESIDUAL_ROW", "deep_rows", "dirichlet_row", "softmax_row", "tabular_model", "tied_rows"]
