"""Traversal verification (Weng et al. 2025) on the trie of K i.i.d. drafts: exact checks."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import default_instance, random_instance
from spectr_gbv.reference import TraversalVerifier, get_verifier, iteration_inputs, validate_inputs
from spectr_gbv.reference.traversal import draft_trie, traversal_plan
from spectr_gbv.simulate.exact import simulate_exact
from tests.reference.ref_helpers import law_p_value

ALPHA = 1e-4

# (n, L, K) sizes whose ordered draft tuples stay small (order-dependent: n^(L K) tuples at most)
SIZES = [
    (2, 1, 1),
    (4, 1, 3),
    (3, 1, 3),
    (2, 2, 2),
    (3, 2, 2),
    (4, 2, 2),
    (2, 3, 2),
    (2, 2, 3),
    (3, 3, 1),
    (4, 3, 1),
    (3, 3, 2),
    (2, 3, 3),
]


def _law(inst, drafts, name="traversal"):
    return get_verifier(name).outcome_law(*iteration_inputs(inst, drafts))


def test_registered_with_its_attributes():
    v = get_verifier("traversal")
    assert isinstance(v, TraversalVerifier)
    assert v.lossless is True and v.symmetric is False
    assert "2505.12398" in v.citation and "References" in type(v).__doc__


@pytest.mark.parametrize(("n", "L", "K"), SIZES)
def test_lossless_by_exact_enumeration(n, L, K):
    """Validity defect exactly 0: 12 sizes x 6 seeds x (dense, 30% zeros) = 144 instances."""
    for seed in range(6):
        for zero_prob in (0.0, 0.3):
            inst = random_instance(n, L, seed, exact=True, zero_prob=zero_prob)
            result = simulate_exact(inst, TraversalVerifier(), K)
            assert result.validity_defect == 0, (n, L, K, seed, zero_prob, result.validity_defect)


def test_public_test_vector_values():
    """THEORY.md section 7: K = 1 is BV (113/72); K = 2..4 exact values (equal to MDBV there)."""
    inst = default_instance()
    expected = {1: F(113, 72), 2: F(61, 36), 3: F(577, 324), 4: F(1193, 648)}
    for K, value in expected.items():
        result = simulate_exact(inst, "traversal", K)
        assert result.validity_defect == 0
        assert result.expected_accepted == value


@pytest.mark.parametrize("seed", range(3))
def test_k1_is_block_verification_per_draft(seed):
    inst = random_instance(3, 3, seed, exact=True, zero_prob=0.2)
    support = [tuple(map(int, x)) for x in np.argwhere(inst.draft.joint(3) > 0)]
    for x in support:
        assert _law(inst, [x]) == _law(inst, [x], "bv")
    assert simulate_exact(inst, "traversal", 1).expected_accepted == simulate_exact(inst, "bv", 1).expected_accepted


def test_hand_computed_case_and_order_dependence():
    r"""Section 7 instance, drafts (0, 1), (0, 0): trie root -> 0 -> {1, 0}.

    w(0) = min{1, (1/2)/(2/3)} = 3/4; leaf (0,1): w = 3/4 (1/4)/(1/2) = 3/8, Z ~ (1/5, 4/5).
    Rejected (5/8): at (0) d = max{3/4 (3/4, 1/4) - (1/2, 1/2), 0} = (1/16, 0), w(0) = (1/16) /
    (1/16 + 1/4) = 1/5, M_b = (1, 0), M_s = (1, 0) without token 1; leaf (0,0): w = 1/5,
    Z ~ (1/2, 1/2). Rejected (4/5): at (0) d = 0 so w(0) = 0; root residual
    max{(1/2, 1/2) - (2/3, 1/3), 0} ~ (0, 1): Z = 1.
    """
    inst = default_instance()
    law = _law(inst, [(0, 1), (0, 0)])
    assert law == {
        (0, 1, 0): F(3, 40),
        (0, 1, 1): F(3, 10),
        (0, 0, 0): F(1, 16),
        (0, 0, 1): F(1, 16),
        (1,): F(1, 2),
    }
    # the other order: leaf (0,0) first, w = min{1, 3/4 (3/4)/(1/2)} = 1, accepted surely
    assert _law(inst, [(0, 0), (0, 1)]) == {(0, 0, 0): F(1, 2), (0, 0, 1): F(1, 2)}
    plan = traversal_plan(validate_inputs(*iteration_inputs(inst, [(0, 1), (0, 0)])))
    assert plan.nodes == [(0, 1), (0, 0)] and plan.tests == [F(3, 8), F(1, 5)]
    assert list(plan.root_law) == [0, 1]


def test_trie_merges_repeats_in_first_appearance_order():
    inst = random_instance(3, 2, 0, exact=True)
    batch = validate_inputs(*iteration_inputs(inst, [(2, 1), (0, 1), (2, 1), (2, 0)]))
    trie = draft_trie(batch)
    assert trie.children[()] == [2, 0]
    assert trie.children[(2,)] == [1, 0] and trie.children[(0,)] == [1]
    assert trie.first[(2, 0)] == 3 and trie.first[(2, 1)] == 0
    # a repeated draft adds nothing: the law equals that of the deduplicated tuple
    assert _law(inst, [(2, 1), (2, 1)]) == _law(inst, [(2, 1)])


@pytest.mark.parametrize("exact", [True, False])
def test_samples_follow_the_exact_law(exact):
    inst = random_instance(3, 3, 8, exact=True)
    drafts = [(0, 1, 2), (0, 1, 0), (1, 2, 2), (0, 2, 1)]
    args = iteration_inputs(inst if exact else inst.to_float(), drafts)
    v = TraversalVerifier()
    law = v.outcome_law(*args)
    assert abs(sum(law.values()) - 1) < 1e-12 and len(law) > 5
    rng = np.random.default_rng(2024)
    samples = [v.sample(*args, rng=rng) for _ in range(3000)]
    assert law_p_value(samples, law) > ALPHA


def test_float_law_matches_exact_law():
    inst = random_instance(3, 3, 8, exact=True)
    drafts = [(0, 1, 2), (0, 1, 0), (1, 2, 2), (0, 2, 1)]
    exact = _law(inst, drafts)
    approx = _law(inst.to_float(), drafts)
    # float64 may add outputs of rounding-level probability (a weight 1 - 1e-16 instead of 1)
    assert max(abs(approx.get(o, 0.0) - float(exact.get(o, 0))) for o in set(exact) | set(approx)) < 1e-12
