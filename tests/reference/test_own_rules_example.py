"""The worked example of docs/verifiers.md, "Bring your own rule": exact values of the three rules."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.reference.user_rules import resolve_rule
from spectr_gbv.simulate.methods import simulate_method

EXAMPLE = "spectr_gbv.examples.own_rules"
INSTANCE = random_instance(3, 3, 0)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_tree_rrs_is_rrs_to_the_last_digit_on_the_structured_path(K: int) -> None:
    mine, ref = simulate_method(INSTANCE, f"{EXAMPLE}:TreeRRS", K), simulate_method(INSTANCE, "rrs", K)
    assert mine.output_law == ref.output_law and mine.validity_defect == 0
    assert mine.enumeration == "draft_tree"


def test_distinct_token_rrs_claims_lossless_and_is_not() -> None:
    info, _ = resolve_rule(f"{EXAMPLE}:DistinctTokenRRS")
    assert info.lossless_claimed is True and info.structure == "draft_tree"
    one = simulate_method(INSTANCE, f"{EXAMPLE}:DistinctTokenRRS", 1)
    assert one.validity_defect == 0  # K = 1: no repeats to skip
    two = simulate_method(INSTANCE, f"{EXAMPLE}:DistinctTokenRRS", 2)
    assert 0.037 < two.validity_defect < 0.038 and isinstance(two.validity_defect, Fraction)
    three = simulate_method(INSTANCE, f"{EXAMPLE}:DistinctTokenRRS", 3)
    rrs = simulate_method(INSTANCE, "rrs", 3)
    # it "beats" rrs (1.8933 > 1.8019) only by being lossy
    assert three.expected_accepted == Fraction(413974216388210456577611, 218652364441225789200000)
    assert three.expected_accepted > rrs.expected_accepted and three.validity_defect > Fraction(1, 20)


def test_first_draft_sd_is_sd_and_every_tuple_is_enumerated_whatever_it_declares() -> None:
    info, _ = resolve_rule(f"{EXAMPLE}:first_draft_sd")
    assert (info.origin, info.lossless_claimed, info.drafts) == ("function", True, "one")
    res = simulate_method(INSTANCE, f"{EXAMPLE}:first_draft_sd", 2)
    assert res.output_law == simulate_method(INSTANCE, "sd", 2).output_law
    # 25 drafts of positive probability: all 625 ordered pairs, the declaration drafts = "one" not trusted
    assert res.expected_accepted == Fraction(191452789, 154357140) and res.num_kernels == 625
