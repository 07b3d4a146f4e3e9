import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings

from spectr_gbv.core.instance import default_instance
from spectr_gbv.core.tabular import TabularAR
from spectr_gbv.theory import bounds
from tests.strategies import instances

P, Q = default_instance()


@pytest.mark.parametrize(
    "K, B, B_BV",
    [
        (1, F(13, 8), F(113, 72)),
        (2, F(401, 216), F(397, 216)),
        (3, F(1885, 972), F(1879, 972)),
        (5, F(1251851, 629856), F(1251419, 629856)),
    ],
)
def test_section_7_bounds(K, B, B_BV):
    assert bounds.cic_bound(P, Q, K, 2) == B
    assert bounds.cic_bound_lossless(P, Q, K, 2) == B_BV


def test_section_7_single_draft_values():
    assert bounds.sd_expected_accepted(P, Q, 2) == F(107, 72)
    assert bounds.bv_expected_accepted(P, Q, 2) == F(113, 72)
    assert bounds.greedy_expected_accepted(P, Q, 2) == F(13, 8)
    assert bounds.prefix_relaxation(P, Q, 1, 2) == F(13, 8)
    assert bounds.cic_limit(P, Q, 2) == 2
    assert bounds.draft_covers_target(P, Q, 2)


def test_paper_example_section_3():
    p = TabularAR.context_free(["1/3", "2/3"], 2)
    q = TabularAR.context_free(["2/3", "1/3"], 2)
    assert bounds.sd_expected_accepted(p, q, 2) == F(10, 9)
    assert bounds.bv_expected_accepted(p, q, 2) == F(11, 9)
    assert bounds.greedy_expected_accepted(p, q, 2) == F(12, 9)


def test_beta_is_running_min_of_ratio():
    r1, r2 = bounds.prefix_ratio(P, Q, 1), bounds.prefix_ratio(P, Q, 2)
    b2 = bounds.beta(P, Q, 2)
    assert r1.tolist() == [F(1), F(2, 3)]
    assert b2.tolist() == [[min(r1[i], r2[i, j]) for j in range(2)] for i in range(2)]


def test_float_instance_matches_exact():
    pf, qf = P.to_float(), Q.to_float()
    for K in (1, 2, 7):
        assert bounds.cic_bound(pf, qf, K, 2) == pytest.approx(float(bounds.cic_bound(P, Q, K, 2)), abs=1e-14)
        assert isinstance(bounds.cic_bound(pf, qf, K, 2), float)


def test_limit_below_L_without_cover():
    p = TabularAR.context_free(["1/2", "1/2"], 2)
    q = TabularAR.context_free(["1", "0"], 2)
    assert not bounds.draft_covers_target(p, q, 2)
    # P(Y_1 = 0) + P(Y_1 Y_2 = 00) = 1/2 + 1/4
    assert bounds.cic_limit(p, q, 2) == F(3, 4)
    assert bounds.cic_bound(p, q, 50, 2) == F(3, 4)


def _brute_l1(p, q, K):
    n = len(p)
    return min(
        sum((p[v] for v in A), F(0)) + 1 - sum((q[v] for v in A), F(0)) ** K
        for r in range(n + 1)
        for A in itertools.combinations(range(n), r)
    )


@settings(max_examples=60, deadline=None)
@given(instances(n=(2, 4), L=(1, 1)))
def test_l1_optimum_equals_brute_force_min_cut(inst):
    p, q = inst.target.cond(()), inst.draft.cond(())
    for K in (1, 2, 3):
        val, A = bounds.l1_optimum(p, q, K)
        assert val == _brute_l1(p, q, K)
        assert val == sum((p[v] for v in A), F(0)) + 1 - sum((q[v] for v in A), F(0)) ** K
    # K = 1 is one minus total variation
    assert bounds.l1_optimum(p, q, 1)[0] == sum(np.minimum(p, q))


@settings(max_examples=60, deadline=None)
@given(instances())
def test_bound_relations(inst):
    p, q, L = inst.target, inst.draft, inst.L
    prev_b = prev_bl = F(0)
    limit = bounds.cic_limit(p, q, L)
    for K in (1, 2, 3, 4):
        b, bl = bounds.cic_bound(p, q, K, L), bounds.cic_bound_lossless(p, q, K, L)
        pr = bounds.prefix_relaxation(p, q, K, L)
        assert bl <= b <= pr <= L  # beta <= r; CIC <= prefix relaxation
        assert prev_b <= b <= limit and prev_bl <= bl <= limit
        assert b - prev_b == (bounds.cic_bound_increment(p, q, K - 1, L) if K > 1 else b)
        prev_b, prev_bl = b, bl
    assert bounds.cic_bound(p, q, 1, L) == bounds.greedy_expected_accepted(p, q, L)
    assert bounds.sd_expected_accepted(p, q, L) <= bounds.bv_expected_accepted(p, q, L)
    assert bounds.bv_expected_accepted(p, q, L) <= bounds.greedy_expected_accepted(p, q, L)
    assert (limit == L) == bounds.draft_covers_target(p, q, L)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bounds.cic_bound(P, Q, 0, 2), r"num_drafts \(K\) must be an int in 1"),
        (lambda: bounds.cic_bound(P, Q, 2, 0), r"draft_length \(L\) must be an int >= 1"),
        (lambda: bounds.cic_bound(P, Q, 2, 4), "needs laws at prefixes of length 0..3"),
        (lambda: bounds.cic_bound(P, TabularAR.context_free(["1/3"] * 3, 2), 2, 2), "vocabulary mismatch"),
        (lambda: bounds.cic_bound(P, "q", 2, 2), "draft must be a TabularAR"),
        (lambda: bounds.l1_optimum([F(1)], [F(1, 2), F(1, 2)], 2), "equal length"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
