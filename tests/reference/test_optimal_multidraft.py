"""optimal_multidraft: the node rule is optimal and exact; the verifier attains OPT(K) at L = 1.

The L = 1 optimum has a closed form (THEORY.md section 5, :func:`bounds.l1_optimum`) and an LP
(:func:`optimal_lossless`): the verifier's exact E[tau] must equal the closed form exactly and
the LP within LP_TOL, with validity defect exactly 0, on 300 seeded random instances with
V up to 6 and K up to 6 (dense and sparse).
"""

from __future__ import annotations

import random
from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.reference.optimal_multidraft import (
    OptimalMultiDraftVerifier,
    decompose,
    node_rule,
    order_vertex,
    selection_probabilities,
)
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.bounds import l1_optimum
from spectr_gbv.theory.lp import optimal_lossless
from spectr_gbv.theory.properties import LP_TOL


def _row(rng: random.Random, n: int, zeros: bool) -> tuple[F, ...]:
    w = [F(rng.randint(0 if zeros and rng.random() < 0.3 else 1, 12)) for _ in range(n)]
    if not any(w):
        w[rng.randrange(n)] = F(1)
    total = sum(w)
    return tuple(x / total for x in w)


def _battery() -> list[tuple[int, int, float, int]]:
    """300 (n, seed, zero_prob, K) cases: n in 2..6, K in 1..6, every third sparse."""
    rng = random.Random(20261201)
    return [(rng.randint(2, 6), seed, 0.3 if seed % 3 == 0 else 0.0, rng.randint(1, 6)) for seed in range(300)]


def test_hand_case_two_tokens():
    # p = (1/2, 1/2), q = (2/3, 1/3), c = 2: OPT = 1, so d = p; the orders (1, 0) and (0, 1) have
    # vertices (4/9, 5/9) and (8/9, 1/9), and 7/8 (4/9, 5/9) + 1/8 (8/9, 1/9) = (1/2, 1/2)
    p, q = (F(1, 2), F(1, 2)), (F(2, 3), F(1, 3))
    d, orders = node_rule(p, q, 2)
    assert d == p
    assert dict((o, w) for w, o in orders) == {(1, 0): F(7, 8), (0, 1): F(1, 8)}
    assert selection_probabilities(orders, [0, 1]) == {1: F(7, 8), 0: F(1, 8)}
    assert selection_probabilities(orders, [0, 0]) == {0: F(1)}
    assert order_vertex(q, (0, 1), 2) == [F(8, 9), F(1, 9)]


def test_node_rule_is_optimal_and_decomposes_exactly():
    rng = random.Random(7)
    for trial in range(300):
        n, c = rng.randint(2, 6), rng.randint(1, 6)
        p, q = _row(rng, n, trial % 2 == 0), _row(rng, n, trial % 3 == 0)
        d, orders = node_rule(p, q, c)
        opt, _ = l1_optimum(list(p), list(q), c)
        assert sum(min(a, b) for a, b in zip(p, d, strict=True)) == opt
        support = [y for y in range(n) if q[y] > 0]
        assert all(d[y] == 0 for y in range(n) if q[y] == 0)
        assert sum(w for w, _ in orders) == 1 and all(w > 0 for w, _ in orders)
        assert len(orders) <= len(support)
        mix = [sum((w * order_vertex(q, o, c)[y] for w, o in orders), F(0)) for y in range(n)]
        assert mix == list(d)
        if c == 1:
            assert d == q


def test_decompose_of_a_vertex_is_that_order():
    q = (F(1, 2), F(1, 3), F(1, 6))
    v = order_vertex(q, (2, 0, 1), 3)
    assert decompose(v, q, 3) == ((F(1), (2, 0, 1)),)


@pytest.mark.parametrize("chunk", range(3))
def test_l1_equals_closed_form_optimum_on_300_instances(chunk):
    cases = _battery()[chunk * 100 : (chunk + 1) * 100]
    for n, seed, zp, k in cases:
        inst = random_instance(n, 1, seed, zero_prob=zp)
        r = simulate_exact(inst, OptimalMultiDraftVerifier(), k)
        opt, _ = l1_optimum(inst.target.cond(()), inst.draft.cond(()), k)
        assert r.validity_defect == 0, (n, seed, zp, k)
        assert r.expected_accepted == opt, (n, seed, zp, k)


def test_l1_equals_the_lp_optimum():
    for n, seed, zp, k in _battery()[::5]:
        inst = random_instance(n, 1, seed, zero_prob=zp)
        r = simulate_exact(inst, "optimal_multidraft", k)
        lp = optimal_lossless(inst.target, inst.draft, k, 1).value
        assert abs(float(r.expected_accepted) - lp) <= LP_TOL, (n, seed, zp, k)


def test_k1_is_speculative_sampling_node_by_node():
    for seed in range(10):
        inst = random_instance(3, 2, seed, zero_prob=0.3)
        assert simulate_exact(inst, "optimal_multidraft", 1).output_law == simulate_exact(inst, "sd", 1).output_law


def test_blocks_are_lossless_and_below_opt():
    for seed in range(40):
        n, L, k = 2 + seed % 2, 2 + (seed // 2) % 2, 2 + (seed // 4) % 2
        inst = random_instance(n, L, seed, zero_prob=0.3 if seed % 3 else 0.0)
        r = simulate_exact(inst, "optimal_multidraft", k)
        assert r.validity_defect == 0, (n, L, seed, k)
        if seed % 8 == 0:
            assert float(r.expected_accepted) <= optimal_lossless(inst.target, inst.draft, k, L).value + LP_TOL


def test_fast_path_equals_tuple_path():
    for seed in range(20):
        inst = random_instance(3, 2, seed, zero_prob=0.3 if seed % 2 else 0.0)
        for k in (2, 3):
            fast = simulate_exact(inst, "optimal_multidraft", k)
            slow = simulate_exact(inst, "optimal_multidraft", k, fast=False)
            assert fast.enumeration != slow.enumeration
            assert fast.output_law == slow.output_law


def test_default_instance_values():
    # cross-checked by the tuple path (fast=False) in the test above and by the L = 1 battery
    expected = {1: F(107, 72), 2: F(415, 216), 3: F(3755, 1944), 4: F(30325, 15552)}
    inst = default_instance()
    for k, value in expected.items():
        fast = simulate_exact(inst, "optimal_multidraft", k)
        assert fast.expected_accepted == value and fast.validity_defect == 0
    assert simulate_exact(inst, "optimal_multidraft", 2, fast=False).expected_accepted == expected[2]


def test_float_inputs_follow_the_exact_rule():
    inst = random_instance(3, 2, 5)
    exact = simulate_exact(inst, "optimal_multidraft", 2)
    flt = simulate_exact(inst.to_float(), "optimal_multidraft", 2)
    assert abs(float(exact.expected_accepted) - float(flt.expected_accepted)) < 1e-12


def test_ratio_priority_is_another_optimal_base():
    rng = random.Random(11)
    differ = 0
    for trial in range(100):
        n, c = rng.randint(2, 5), rng.randint(2, 5)
        p, q = _row(rng, n, trial % 2 == 0), _row(rng, n, trial % 3 == 0)
        d, orders = node_rule(p, q, c, "ratio")
        assert sum(min(a, b) for a, b in zip(p, d, strict=True)) == l1_optimum(list(p), list(q), c)[0]
        assert [sum((w * order_vertex(q, o, c)[y] for w, o in orders), F(0)) for y in range(n)] == list(d)
        differ += d != node_rule(p, q, c)[0]
    assert differ > 0  # the two priorities pick different optimal bases on some nodes
    with pytest.raises(ValueError, match="priority must be one of id, ratio"):
        node_rule((F(1),), (F(1),), 2, "nope")
