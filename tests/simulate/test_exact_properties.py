"""Properties of every verifier over random exact instances (hypothesis).

A lossless verifier must have validity defect exactly 0 on every instance; a counterexample
would be a major finding (THEORY.md section 6), so nothing here is tolerance-based.
"""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from spectr_gbv.core import TabularAR
from spectr_gbv.simulate import simulate_exact
from spectr_gbv.theory.bounds import (
    bv_expected_accepted,
    l1_optimum,
    prefix_relaxation,
    sd_expected_accepted,
)
from tests.simulate.sim_helpers import LOSSLESS
from tests.strategies import instances

#: Largest number of ordered draft tuples per generated case (keeps each example small).
MAX_TUPLES = 729


@st.composite
def cases(draw: st.DrawFn, max_tuples: int = MAX_TUPLES):
    """(instance, K): n in 2..3, L in 1..3, K in 1..3, zeros included, n^(L K) <= max_tuples."""
    inst = draw(instances(n=(2, 3), L=(1, 3), exact=True))
    K = draw(st.integers(1, 3).filter(lambda k: inst.n ** (inst.L * k) <= max_tuples))
    return inst, K


@settings(max_examples=150, deadline=None)
@given(cases())
def test_lossless_verifiers_are_exactly_lossless(case):
    inst, K = case
    p, q, L = inst.target, inst.draft, inst.L
    upper = prefix_relaxation(p, q, K, L)
    res = {m: simulate_exact(inst, m, K) for m in LOSSLESS}
    for m, r in res.items():
        assert r.validity_defect == 0, (m, inst.to_dict(), K)
        assert r.lossless and sum(r.output_law.values()) == 1
        assert 0 <= r.expected_accepted <= upper, (m, r.expected_accepted, upper)
    assert res["sd"].expected_accepted == sd_expected_accepted(p, q, L)
    assert res["bv"].expected_accepted == bv_expected_accepted(p, q, L)
    assert res["ar"].expected_accepted == 0
    if K == 1:
        assert res["mdbv"].output_law == res["bv"].output_law
        assert res["gbv_multipath"].output_law == res["bv"].output_law
        assert res["spectr"].output_law == res["sd"].output_law
        assert res["rrs"].output_law == res["sd"].output_law
    if L == 1:
        assert res["mdbv"].output_law == res["rrs"].output_law
        best, _ = l1_optimum(p.cond(()), q.cond(()), K)
        for m in LOSSLESS:
            assert res[m].expected_accepted <= best
    released = simulate_exact(inst, "spectr_gbv_released", K)
    assert released.diagnostics["clamped"] == 0  # h stays in [0, 1] in exact arithmetic


def _lexmax_model(inst, K):
    """Law of the lexmax of K i.i.d. drafts (ranks: min{1, p/q} ascending, then id), brute force."""
    p, q, L, n = inst.target, inst.draft, inst.L, inst.n

    def key(u, v):
        qv = q.cond(u)[v]
        return (min(F(1), p.cond(u)[v] / qv) if qv > 0 else F(1), v)

    def larger(x, y):
        for t in range(L):
            if x[t] != y[t]:
                return x if key(x[:t], x[t]) > key(y[:t], y[t]) else y
        return x

    support = [x for x in itertools.product(range(n), repeat=L) if q.prob(x) > 0]
    mass: dict[tuple[int, ...], F] = {}
    for drafts in itertools.product(support, repeat=K):
        w = functools.reduce(lambda a, b: a * b, (q.prob(x) for x in drafts), F(1))
        best = functools.reduce(larger, drafts)
        for t in range(L + 1):
            mass[best[:t]] = mass.get(best[:t], F(0)) + w
    laws = {}
    for t in range(L):
        for u in itertools.product(range(n), repeat=t):
            total = mass.get(u, F(0))
            laws[u] = [mass.get(u + (v,), F(0)) / total for v in range(n)] if total > 0 else list(q.cond(u))
    return TabularAR(n, laws, depth=L - 1, name="draft")


@settings(max_examples=20, deadline=None)
@given(cases(max_tuples=256))
def test_gbv_multipath_is_bv_against_the_law_of_the_selected_path(case):
    """Independent check of q_skew: BV's closed form with the brute-force lexmax law."""
    inst, K = case
    skew = _lexmax_model(inst, K)
    expected = bv_expected_accepted(inst.target, skew, inst.L)
    assert simulate_exact(inst, "gbv_multipath", K).expected_accepted == expected
