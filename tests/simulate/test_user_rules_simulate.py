"""A user's own rule through simulate_method, monte_carlo and the estimates: exact values equal the registered ones."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spectr_gbv.core.instance import default_instance
from spectr_gbv.reference.user_rules import NotEnumerableError, resolve_rule
from spectr_gbv.simulate.estimate import UNMODELLED_METHODS, method_estimate
from spectr_gbv.simulate.methods import simulate_method
from spectr_gbv.simulate.monte_carlo import monte_carlo
from tests.simulate import own_rules

OWN = "tests.simulate.own_rules:"


@pytest.mark.parametrize("k", [1, 2])
def test_a_plain_function_copy_of_sd_has_sds_exact_law(k):
    inst = default_instance()
    mine, sd = simulate_method(inst, OWN + "sd_copy", k), simulate_method(inst, "sd", k)
    assert mine.expected_accepted == sd.expected_accepted == Fraction(107, 72)
    assert mine.output_law == sd.output_law
    assert mine.validity_defect == 0 and mine.lossless and mine.method == OWN + "sd_copy"
    assert simulate_method(inst, own_rules.sd_copy, k).expected_accepted == Fraction(107, 72)  # the object itself


def test_a_verifier_subclass_declaring_draft_tree_is_rrs_on_the_structured_path():
    inst = default_instance()
    info, verifier = resolve_rule(OWN + "TreeRRS")
    assert (info.origin, info.lossless_claimed, info.structure) == ("verifier", True, "draft_tree")
    assert isinstance(verifier, own_rules.TreeRRS)
    mine, rrs = simulate_method(inst, OWN + "TreeRRS", 2), simulate_method(inst, "rrs", 2)
    assert mine.expected_accepted == rrs.expected_accepted == Fraction(59, 36)
    assert mine.enumeration == "draft_tree" and mine.num_kernels == rrs.num_kernels == 16
    assert mine.output_law == rrs.output_law


def test_a_lossy_function_is_measured_lossy_whatever_it_claims():
    res = simulate_method(default_instance(), OWN + "accept_all", 2)
    assert (res.expected_accepted, res.validity_defect, res.lossless) == (2, Fraction(5, 24), False)
    assert resolve_rule(OWN + "accept_all")[0].lossless_claimed is True


def test_monte_carlo_takes_what_simulate_method_takes():
    inst = default_instance()
    exact = float(Fraction(107, 72))
    for method in (OWN + "sd_copy", own_rules.sd_copy, own_rules.TreeRRS, own_rules.TreeRRS()):
        res = monte_carlo(inst, method, 1, 3000, seed=2)
        assert res.ci_low <= exact <= res.ci_high and not res.lossless_rejected
    assert monte_carlo(inst, own_rules.sd_copy, 1, 200).method == OWN + "sd_copy"
    assert monte_carlo(inst, own_rules.TreeRRS(), 1, 200).method == "tree_rrs"


def test_a_function_that_cannot_be_enumerated_is_sampled_with_the_real_rng():
    inst = default_instance()
    with pytest.raises(NotEnumerableError, match="rng.gumbel"):
        simulate_method(inst, OWN + "gumbel_first", 1)
    res = monte_carlo(inst, OWN + "gumbel_first", 2, 2000, seed=1)
    assert (res.expected_accepted, res.ci_low, res.ci_high) == (0.0, 0.0, 0.0)  # it never keeps a draft token
    assert not res.lossless_rejected  # its first token is exactly p's
    lossy = monte_carlo(inst, OWN + "accept_all", 2, 6000, seed=1)
    assert lossy.expected_accepted == 2.0 and lossy.lossless_rejected


def test_monte_carlo_refuses_bad_rules_in_one_line():
    inst = default_instance()
    with pytest.raises(ValueError, match=r"^method 'nomod_xyz:f': cannot import module 'nomod_xyz'"):
        monte_carlo(inst, "nomod_xyz:f", 1, 200)
    with pytest.raises(ValueError, match="expected a Verifier, a Verifier subclass or a function, got int"):
        monte_carlo(inst, OWN + "NOT_A_RULE", 1, 200)
    with pytest.raises(ValueError, match=r"unknown method 'nope'.*'module:attribute'"):
        monte_carlo(inst, "nope", 1, 200)
    with pytest.raises((TypeError, ValueError), match="expected a method name or a rule"):
        monte_carlo(inst, 3, 1, 200)


def test_estimates_take_a_users_rule():
    inst = default_instance()
    assert UNMODELLED_METHODS == ("greedy_bv", "lp_oracle")  # the table's stateful and per-instance methods
    tree = method_estimate(inst, OWN + "TreeRRS", 2)
    assert tree.label == f"{OWN}TreeRRS K=2" and "structured kernels" in tree.detail
    fn = method_estimate(inst, own_rules.sd_copy, 2)
    assert fn.label == f"{OWN}sd_copy K=2" and fn.detail.startswith("16 kernels at")  # 4 drafts, 4^2 ordered tuples
    with pytest.raises(NotEnumerableError):
        method_estimate(inst, OWN + "gumbel_first", 1)
