"""The structured paths of the exact simulator agree with the tuple enumeration to the last digit."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import default_instance, random_instance
from spectr_gbv.reference import MultiDraftBlockVerifier, SpeculativeDecodingVerifier, get_verifier
from spectr_gbv.reference.structure import draft_probability
from spectr_gbv.simulate import simulate_exact
from spectr_gbv.simulate.exact import EnumerationTooLargeError
from spectr_gbv.simulate.structured import declared_structure, structured_kernels
from spectr_gbv.testing.mutants import coverage_bugs

STRUCTURED = {
    "ar": "selected_draft",
    "sd": "selected_draft",
    "bv": "selected_draft",
    "gbv_multipath": "selected_draft",
    "spectr": "draft_tree",
    "rrs": "draft_tree",
    "mdbv": "draft_scan",
}

# (n, L, K) with at most ~100 ordered tuples, so the tuple path stays cheap
SIZES = [(2, 1, 3), (3, 1, 3), (4, 1, 2), (2, 2, 2), (2, 2, 3), (3, 2, 2), (2, 3, 2), (3, 1, 4), (2, 2, 1), (3, 3, 1)]


@pytest.mark.parametrize("block", range(4))
def test_fast_and_tuple_paths_agree_exactly_on_200_random_instances(block):
    """50 seeded instances per block (200 in all), every structured method, dense and sparse."""
    for seed in range(50 * block, 50 * block + 50):
        n, L, K = SIZES[seed % len(SIZES)]
        zero_prob = (0.0, 0.3, 0.5)[seed % 3]
        inst = random_instance(n, L, seed, zero_prob=zero_prob)
        for method, shape in STRUCTURED.items():
            fast = simulate_exact(inst, method, K)
            plain = simulate_exact(inst, method, K, fast=False)
            where = f"{method} on random({n}, {L}, {seed}, zero_prob={zero_prob}), K={K}"
            assert fast.enumeration == shape, where
            assert plain.enumeration in ("ordered", "multiset"), where
            assert fast.output_law == plain.output_law, where
            assert fast.expected_accepted == plain.expected_accepted, where
            assert fast.validity_defect == plain.validity_defect == 0, where
            assert fast.num_draft_tuples == plain.num_draft_tuples, where
            assert all(isinstance(v, F) for v in fast.output_law.values()), where


def test_theory_vectors_through_the_structured_paths():
    """THEORY.md section 7: mdbv 61/36 (K = 2), 577/324 (K = 3) on the default instance."""
    inst = default_instance()
    assert simulate_exact(inst, "mdbv", 2).expected_accepted == F(61, 36)
    assert simulate_exact(inst, "mdbv", 3).expected_accepted == F(577, 324)
    values = [simulate_exact(inst, "gbv_multipath", K).expected_accepted for K in (1, 2, 3, 4)]
    assert values == [F(113, 72), F(67, 36), F(14, 9), F(110, 81)]


def test_larger_K_agrees_on_a_tiny_instance():
    inst = random_instance(2, 2, 11)
    for method in ("mdbv", "rrs", "spectr"):
        assert simulate_exact(inst, method, 5).output_law == simulate_exact(inst, method, 5, fast=False).output_law


def test_beyond_the_tuple_limit():
    """n = 4, L = 3, K = 3 dense: 262,144 ordered tuples, over MAX_DRAFT_TUPLES for the tuple path."""
    inst = random_instance(4, 3, 0, concentration=5.0)
    with pytest.raises(EnumerationTooLargeError, match="262144 ordered draft tuples"):
        simulate_exact(inst, "mdbv", 3, fast=False)
    res = simulate_exact(inst, "mdbv", 3)
    assert res.num_draft_tuples == 64**3 and res.validity_defect == 0 and res.enumeration == "draft_scan"
    assert sum(res.output_law.values()) == 1
    bv = simulate_exact(inst, "bv", 3).expected_accepted
    assert bv < res.expected_accepted < 3
    many = simulate_exact(inst, "mdbv", 12)  # 64^12 = 2^72 ordered tuples, counted exactly
    assert many.num_draft_tuples == 64**12 and many.validity_defect == 0
    assert res.expected_accepted < many.expected_accepted < 3


def test_only_a_class_declaring_its_shape_is_simulated_through_it():
    class Subclass(MultiDraftBlockVerifier):
        pass

    assert declared_structure(get_verifier("mdbv")) == "draft_scan"
    assert declared_structure(Subclass()) is None
    assert simulate_exact(default_instance(), Subclass(), 2).enumeration == "ordered"
    # a planted bug overriding one step of rrs is enumerated tuple by tuple, and still caught
    mutant = coverage_bugs._TWO_SLOTS
    assert declared_structure(mutant) is None
    res = simulate_exact(random_instance(4, 1, 2), mutant, 3)
    assert res.enumeration == "ordered" and res.validity_defect == F(1, 324)
    # float instances use the tuple path
    assert structured_kernels(get_verifier("mdbv"), default_instance().to_float(), 2) is None


def test_a_wrong_selection_probability_falls_back_to_the_tuple_path():
    class WrongSelection(SpeculativeDecodingVerifier):
        structure = "selected_draft"

        def selected_draft_probability(self, batch):  # claims the last draft decides: q(x)^K
            return draft_probability(batch, 0) ** batch.K

    inst = random_instance(3, 2, 4)
    res = simulate_exact(inst, WrongSelection(), 2)
    assert res.enumeration == "ordered"
    assert res.output_law == simulate_exact(inst, "sd", 2).output_law


def test_kernel_estimates():
    inst = default_instance()  # n = 2, L = 2: 4 drafts, every node has support 2
    assert structured_kernels(get_verifier("bv"), inst, 3) == 4
    assert structured_kernels(get_verifier("mdbv"), inst, 3) == 12
    assert structured_kernels(get_verifier("rrs"), inst, 3) == 3 * (2 + 4 + 8)
    assert structured_kernels(get_verifier("spectr_gbv_released"), inst, 3) is None
    sparse = random_instance(3, 2, 1, zero_prob=0.5)
    m = int(np.count_nonzero(sparse.draft.joint(2)))
    assert structured_kernels(get_verifier("gbv_multipath"), sparse, 2) == m
