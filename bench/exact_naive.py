"""Naive exact enumeration of MDBV and multi-path GBV: the baseline the exact simulator must beat.

A straightforward program, written apart from the package: the conditionals as Python lists of
``fractions.Fraction`` keyed by prefix, every ordered K-tuple of drafts of positive draft
probability, the verifier's law per tuple by branching over its coins, all in Fractions. It
shares no code with ``spectr_gbv.reference``, so agreement with the package is also a check.

Used by ``bench/exact_simulator_speedup.py``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from spectr_gbv.core import Instance

Row = list[Fraction]
Law = dict[tuple[int, ...], Fraction]


class Tables:
    """``p(. | u)`` and ``q(. | u)`` as lists of Fractions for every prefix u (depth <= L)."""

    def __init__(self, instance: Instance) -> None:
        self.n, self.L = instance.n, instance.L
        self.p: dict[tuple[int, ...], Row] = {}
        self.q: dict[tuple[int, ...], Row] = {}
        for t in range(self.L + 1):
            for u in itertools.product(range(self.n), repeat=t):
                self.p[u] = [Fraction(v) for v in instance.target.cond(u).tolist()]
                if t < self.L:
                    self.q[u] = [Fraction(v) for v in instance.draft.cond(u).tolist()]

    def drafts(self) -> list[tuple[tuple[int, ...], Fraction]]:
        """Every draft x in V^L with q(x) > 0 and q(x)."""
        out = []
        for x in itertools.product(range(self.n), repeat=self.L):
            prob = Fraction(1)
            for t in range(self.L):
                prob *= self.q[x[:t]][x[t]]
            if prob > 0:
                out.append((x, prob))
        return out


def _normalize(row: Row) -> Row:
    total = sum(row)
    return [v / total for v in row]


def naive_bv(
    tokens: tuple[int, ...], p_rows: list[Row], q_rows: list[Row], bonus: Row
) -> list[tuple[int, Row, Fraction]]:
    """Block verification (Sun et al. 2024, Algorithm 2): ``(tau, next-token law, probability)``."""
    m = len(tokens)
    w = [Fraction(1)]
    h = []
    for i in range(1, m + 1):
        x = tokens[i - 1]
        w.append(min(Fraction(1), w[-1] * p_rows[i - 1][x] / q_rows[i - 1][x]))
        if i < m:
            r = sum(max(w[i] * pv - qv, Fraction(0)) for pv, qv in zip(p_rows[i], q_rows[i], strict=True))
            den = r + 1 - w[i]
            h.append(r / den if den > 0 else Fraction(0))
        else:
            h.append(w[i])
    out = []
    for tau in range(m + 1):
        prob = h[tau - 1] if tau else Fraction(1)
        for j in range(tau + 1, m + 1):
            prob *= 1 - h[j - 1]
        if prob == 0:
            continue
        if tau == m:
            out.append((tau, bonus, prob))
        else:
            res = [max(w[tau] * pv - qv, Fraction(0)) for pv, qv in zip(p_rows[tau], q_rows[tau], strict=True)]
            out.append((tau, _normalize(res), prob))
    return out


def _emit(law: Law, prefix: tuple[int, ...], row: Row, prob: Fraction) -> None:
    for z, v in enumerate(row):
        if v > 0:
            law[prefix + (z,)] = law.get(prefix + (z,), Fraction(0)) + prob * v


def naive_mdbv_tuple(tables: Tables, drafts: tuple[tuple[int, ...], ...], weight: Fraction, law: Law) -> None:
    """Add ``weight`` times MDBV's output law on ``drafts`` to ``law``."""
    L = tables.L

    def scan(k: int, prefix: tuple[int, ...], row: Row, prob: Fraction) -> None:
        while k < len(drafts) and len(prefix) < L and drafts[k][: len(prefix)] != prefix:
            k += 1
        if k == len(drafts) or len(prefix) == L:
            _emit(law, prefix, row, prob)
            return
        x, s = drafts[k], len(prefix)
        p_rows = [row] + [tables.p[x[:t]] for t in range(s + 1, L)]
        q_rows = [tables.q[x[:t]] for t in range(s, L)]
        for tau, nxt, pr in naive_bv(x[s:], p_rows, q_rows, tables.p[x]):
            scan(k + 1, x[: s + tau], nxt, prob * pr)

    scan(0, (), tables.p[()], weight)


def naive_gbv_multipath_tuple(tables: Tables, drafts: tuple[tuple[int, ...], ...], weight: Fraction, law: Law) -> None:
    """Add ``weight`` times multi-path GBV's output law on ``drafts`` to ``law``."""
    L, K, n = tables.L, len(drafts), tables.n

    def order(u: tuple[int, ...]) -> list[int]:
        p, q = tables.p[u], tables.q[u]
        return sorted(range(n), key=lambda v: (min(Fraction(1), p[v] / q[v]) if q[v] > 0 else Fraction(1), v))

    active = list(drafts)
    for t in range(L):
        rank = {v: i for i, v in enumerate(order(active[0][:t]))}
        best = max((x[t] for x in active), key=rank.__getitem__)
        active = [x for x in active if x[t] == best]
    x = active[0]
    skew = []
    a_mass, x_mass = Fraction(0), Fraction(1)
    for t in range(L):
        u, q = x[:t], tables.q[x[:t]]
        nums = [Fraction(0)] * n
        below, below_of = Fraction(0), {}
        for v in order(u):
            below_of[v] = below
            lo, z = a_mass + x_mass * below, x_mass * q[v]
            nums[v] = (lo + z) ** K - lo**K
            below += q[v]
        skew.append(_normalize(nums))
        a_mass += x_mass * below_of[x[t]]
        x_mass *= q[x[t]]
    for tau, row, pr in naive_bv(x, [tables.p[x[:t]] for t in range(L)], skew, tables.p[x]):
        _emit(law, x[:tau], row, weight * pr)


NAIVE = {"mdbv": naive_mdbv_tuple, "gbv_multipath": naive_gbv_multipath_tuple}


def naive_law(instance: Instance, method: str, K: int) -> Law:
    """Exact output law of ``method`` averaged over every ordered K-tuple of drafts."""
    tables = Tables(instance)
    singles = tables.drafts()
    per_tuple = NAIVE[method]
    law: Law = {}
    for combo in itertools.product(singles, repeat=K):
        weight = Fraction(1)
        for _, prob in combo:
            weight *= prob
        per_tuple(tables, tuple(x for x, _ in combo), weight, law)
    return law


def main(argv: list[str]) -> None:
    """``python bench/exact_naive.py n L seed method K``: print the naive loop's exact E[tau]."""
    from spectr_gbv.core import random_instance

    n, L, seed, method, K = int(argv[0]), int(argv[1]), int(argv[2]), argv[3], int(argv[4])
    law = naive_law(random_instance(n, L, seed), method, K)
    print(f"{method} K={K}: E[tau] = {sum(v * (len(o) - 1) for o, v in law.items())}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
