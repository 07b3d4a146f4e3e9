"""Exact one-iteration simulator: published values, pinned lossy instances, errors."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from spectr_gbv.core import default_instance, random_instance
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.simulate import (
    FLOAT_DEFECT_TOL,
    EnumerationTooLargeError,
    simulate_exact,
    validity_defect,
)
from spectr_gbv.simulate.exact import expected_accepted, plan_exact, run_exact
from tests.simulate.sim_helpers import LOSSLESS, LOSSY, l1_instance, paper_instance

SECTION_7 = {  # THEORY.md section 7
    ("sd", 1): F(107, 72),
    ("bv", 1): F(113, 72),
    ("mdbv", 2): F(61, 36),
    ("mdbv", 3): F(577, 324),
}


@pytest.mark.parametrize("method, K", list(SECTION_7))
def test_section_7_values(method, K):
    res = simulate_exact(default_instance(), method, K)
    assert res.expected_accepted == SECTION_7[(method, K)]
    assert res.validity_defect == 0 and res.lossless and res.tolerance is None
    assert sum(res.output_law.values()) == 1


@pytest.mark.parametrize("K", [1, 2, 3])
def test_sd_and_bv_ignore_extra_drafts(K):
    inst = default_instance()
    assert simulate_exact(inst, "sd", K).expected_accepted == F(107, 72)
    assert simulate_exact(inst, "bv", K).expected_accepted == F(113, 72)
    assert simulate_exact(inst, "mdbv", 1).expected_accepted == F(113, 72)


def test_paper_example_of_section_3():
    inst = paper_instance()
    assert simulate_exact(inst, "sd", 1).expected_accepted == F(10, 9)
    assert simulate_exact(inst, "bv", 1).expected_accepted == F(11, 9)


def _first_two_tokens(inst, law):
    """Law of (y1, y2) under "O, then fresh sampling from p"."""
    out = {}
    for y in itertools.product(range(inst.n), repeat=2):
        out[y] = (
            law.get(y[:1], 0) * inst.target.cond(y[:1])[y[1]]
            + law.get(y, 0)
            + sum(law.get(y + (z,), 0) for z in range(inst.n))
        )
    return out


def test_released_rule_at_k1_is_uncorrected_greedy_bv():
    """THEORY.md section 3: greedy BV without correction gives 1/9, 2/9, 1/3, 1/3 and 12/9."""
    inst = paper_instance()
    res = simulate_exact(inst, "spectr_gbv_released", 1)
    assert res.expected_accepted == F(12, 9)
    assert res.validity_defect == F(1, 9) and not res.lossless
    two = _first_two_tokens(inst, res.output_law)
    assert [two[y] for y in sorted(two)] == [F(1, 9), F(2, 9), F(1, 3), F(1, 3)]
    bv = simulate_exact(inst, "bv", 1)
    two = _first_two_tokens(inst, bv.output_law)
    assert [two[y] for y in sorted(two)] == [F(1, 9), F(2, 9), F(2, 9), F(4, 9)]


def test_released_rule_pinned_l1_k2():
    """L = 1, K = 2, p = (1/2, 1/2), q = (2/3, 1/3): already lossy (THEORY.md 6a).

    Weights: h(0) = (1/2)(1 - 0^2) / (1 - (1/3)^2) = 9/16, h(1) = (1/2)(1 - (1/3)^2) /
    (1 - (2/3)^2) = 4/5; residual (1/2)(1 - min{1, q/p}^2) = (0, 5/18) -> Z = 1.
    a(0) = 2/3 (9/16 + 7/16 * 2/3 * 9/16) + 1/3 * 1/5 * 2/3 * 9/16 = 31/64 + 1/40 = 163/320,
    so the defect is |163/320 - 1/2| = 3/320.
    """
    inst = l1_instance([F(1, 2), F(1, 2)], [F(2, 3), F(1, 3)])
    res = simulate_exact(inst, "spectr_gbv_released", 2)
    assert sum(v for o, v in res.output_law.items() if o[0] == 0) == F(163, 320)
    assert res.validity_defect == F(3, 320)
    assert res.expected_accepted == F(12551, 14400)
    assert res.diagnostics["clamped"] == 0


@pytest.mark.parametrize(
    "method, K, defect",
    [
        ("spectr_gbv_released", 1, F(1, 18)),
        ("spectr_gbv_released", 2, F(66211, 1122000)),
        ("spectr_gbv_released", 3, F(11467001470468429, 253093939633551744)),
        ("independent_bv", 2, F(7, 72)),
        ("independent_bv", 3, F(607, 5184)),
    ],
)
def test_lossy_verifiers_on_section_7(method, K, defect):
    res = simulate_exact(default_instance(), method, K)
    assert res.validity_defect == defect and not res.lossless


def test_independent_bv_pinned_l1_k2():
    """L = 1, K = 2, p = (1/2, 1/2), q = (2/3, 1/3): each draft kept w.p. min{1, p/q} = (3/4, 1).

    First emitted token 0 iff some draft is kept and the first kept one is 0:
    drafts (0,0): 1 - 1/16; (0,1): 3/4; else never, so a(0.) = 4/9 * 15/16 + 2/9 * 3/4 = 7/12,
    defect |7/12 - 1/2| = 1/12; nothing kept only for (0,0) twice rejected: E[tau] = 35/36.
    """
    res = simulate_exact(l1_instance([F(1, 2), F(1, 2)], [F(2, 3), F(1, 3)]), "independent_bv", 2)
    assert sum(v for o, v in res.output_law.items() if o[0] == 0) == F(7, 12)
    assert res.validity_defect == F(1, 12)
    assert res.expected_accepted == F(35, 36)
    assert not res.lossless


def test_released_fallback_is_counted_when_p_equals_q_at_the_root():
    inst = random_instance(2, 2, 14, exact=True)  # p(.|root) = q(.|root) = (12/13, 1/13)
    assert list(inst.target.cond(())) == list(inst.draft.cond(()))
    res = simulate_exact(inst, "spectr_gbv_released", 2)
    assert res.diagnostics["residual_fallbacks"] > 0
    assert res.diagnostics["fallback_draft_mass"] == 1
    assert res.diagnostics["clamped"] == 0


@pytest.mark.parametrize("K", [1, 2, 3])
def test_float_instance_agrees_with_exact(K):
    inst = default_instance()
    for m in LOSSLESS + LOSSY:
        ex = simulate_exact(inst, m, K)
        fl = simulate_exact(inst.to_float(), m, K)
        assert abs(fl.expected_accepted - float(ex.expected_accepted)) < 1e-9
        assert abs(fl.validity_defect - float(ex.validity_defect)) < 1e-9
        assert fl.lossless == ex.lossless and fl.tolerance == FLOAT_DEFECT_TOL


def test_result_fields_and_enumeration_kind():
    res = simulate_exact(default_instance(), "gbv_multipath", 3, fast=False)
    assert (res.method, res.K, res.L, res.n, res.exact) == ("gbv_multipath", 3, 2, 2, True)
    assert res.enumeration == "multiset" and res.num_draft_tuples == 20  # C(4 + 2, 3)
    assert res.block_efficiency == res.expected_accepted + 1
    res = simulate_exact(default_instance(), "mdbv", 3, fast=False)
    assert res.enumeration == "ordered" and res.num_draft_tuples == 64
    res = simulate_exact(default_instance(), "sd", 3, fast=False)
    assert res.num_kernels == 4  # grouped by the first draft
    assert simulate_exact(default_instance(), "ar", 3, fast=False).num_kernels == 1
    # the structured paths (exact instances): one kernel per draft, per (node, drafts), per scan step
    res = simulate_exact(default_instance(), "gbv_multipath", 3)
    assert (res.enumeration, res.num_draft_tuples, res.num_kernels) == ("selected_draft", 20, 4)
    res = simulate_exact(default_instance(), "rrs", 3)
    assert (res.enumeration, res.num_draft_tuples, res.num_kernels) == ("draft_tree", 64, 8 + 2 * (2 + 4 + 8))
    assert simulate_exact(default_instance(), "mdbv", 3).enumeration == "draft_scan"
    assert simulate_exact(default_instance().to_float(), "mdbv", 3).enumeration == "ordered"


def test_multiset_and_ordered_enumerations_agree():
    """A symmetric verifier gives the same law through multisets and ordered tuples."""

    class Ordered(type(get_verifier("gbv_multipath"))):
        symmetric = False

    inst = random_instance(3, 2, 5, exact=True, zero_prob=0.2)
    a = simulate_exact(inst, "gbv_multipath", 3)
    b = simulate_exact(inst, Ordered(), 3)
    assert a.output_law == b.output_law and a.num_draft_tuples < b.num_draft_tuples


def test_simulator_matches_a_plain_loop_over_draft_tuples():
    inst = random_instance(2, 2, 8, exact=True)
    v = get_verifier("spectr")
    law = {}
    support = [x for x in itertools.product(range(2), repeat=2) if inst.draft.prob(x) > 0]
    for drafts in itertools.product(support, repeat=2):
        w = inst.draft.prob(drafts[0]) * inst.draft.prob(drafts[1])
        for o, pr in v.outcome_law(*iteration_inputs(inst, drafts)).items():
            law[o] = law.get(o, 0) + w * pr
    assert simulate_exact(inst, "spectr", 2).output_law == law


def test_validity_defect_of_simple_laws():
    inst = default_instance()
    p = inst.target
    ar_law = {(v,): p.cond(())[v] for v in range(2)}
    assert validity_defect(p, ar_law, 2) == 0
    assert validity_defect(p, {(0,): F(1)}, 2) == F(1, 2)  # p(y1 = 0) = 1/2
    assert expected_accepted({(0,): F(1, 2), (0, 1, 1): F(1, 2)}) == 1
    with pytest.raises(ValueError, match="output"):
        validity_defect(p, {(0, 0, 0, 0): F(1)}, 2)


def test_errors():
    inst = default_instance()
    with pytest.raises(ValueError, match="unknown method"):
        simulate_exact(inst, "nope", 2)
    with pytest.raises(ValueError, match=r"num_drafts \(K\) must be an int >= 1"):
        simulate_exact(inst, "mdbv", 0)
    with pytest.raises(EnumerationTooLargeError, match=r"n=2, L=2, K=3: 64 ordered draft tuples"):
        simulate_exact(inst, "mdbv", 3, max_tuples=63, fast=False)
    with pytest.raises(EnumerationTooLargeError, match=r"n=2, L=2, K=3: 20 draft multisets"):
        simulate_exact(inst, "gbv_multipath", 3, max_tuples=19, fast=False)
    # the structured paths count kernel evaluations against the same limit
    assert simulate_exact(inst, "mdbv", 3, max_tuples=63).num_kernels <= 63
    with pytest.raises(EnumerationTooLargeError, match=r"64 ordered draft tuples .* draft_tree path would need 42"):
        simulate_exact(inst, "rrs", 3, max_tuples=41)
    big = random_instance(3, 3, 0, exact=False)
    with pytest.raises(EnumerationTooLargeError, match=r"n=3, L=3, K=4: 531441 ordered"):
        simulate_exact(big, "mdbv", 4)
    assert isinstance(EnumerationTooLargeError("x"), ValueError)


def test_plan_then_run_is_simulate_exact():
    inst = default_instance()
    plan = plan_exact(inst, "mdbv", 2)
    assert (plan.route, plan.num_draft_tuples, plan.structured_kernels) == ("structured", 16, 8)
    assert plan.tuple_refusal is None
    assert run_exact(plan) == simulate_exact(inst, "mdbv", 2)
    tuples = plan_exact(inst, "mdbv", 2, fast=False)
    assert (tuples.route, tuples.structured_kernels, tuples.structured_step) == ("tuples", None, 0)
    assert run_exact(tuples).expected_accepted == F(61, 36)
    # the structured route keeps the tuple route's refusal for a run-time fallback
    assert "64 ordered draft tuples" in plan_exact(inst, "mdbv", 3, max_tuples=63).tuple_refusal
    with pytest.raises(EnumerationTooLargeError, match=r"n=2, L=2, K=3: 64 ordered draft tuples"):
        plan_exact(inst, "mdbv", 3, max_tuples=63, fast=False)
    with pytest.raises(TypeError, match="instance: expected an Instance"):
        plan_exact("inst", "mdbv", 2)


@pytest.mark.parametrize(
    "method, p_row, q_row, value, bound",
    [
        # h(0) = (1/3) / (24/25) = 25/72, h(1) = (2/3)(51/100) / (9/25) = 17/18;
        # E = 1 - (4/5 * 47/72 + 1/5 * 1/18)^2 = 161/225 > PR(2) = 1/3 + 9/25 = 52/75
        ("spectr_gbv_released", (F(1, 3), F(2, 3)), (F(4, 5), F(1, 5)), F(161, 225), F(52, 75)),
        ("independent_bv", (F(1, 2), F(1, 2)), (F(1, 5), F(4, 5)), F(91, 100), F(43, 50)),
    ],
)
def test_lossy_verifiers_can_beat_every_valid_coupling(method, p_row, q_row, value, bound):
    """E[tau] above the prefix relaxation PR(K) >= OT(K): impossible for any lossless rule."""
    from spectr_gbv.theory.bounds import prefix_relaxation

    inst = l1_instance(p_row, q_row)
    res = simulate_exact(inst, method, 2)
    assert prefix_relaxation(inst.target, inst.draft, 2, 1) == bound
    assert res.expected_accepted == value > bound
    assert not res.lossless


@pytest.mark.parametrize(
    "method, K, value",
    [
        ("rrs", 2, F(59, 36)),
        ("rrs", 3, F(565, 324)),
        # not monotone in K: the selected path's law q_skew over-weights the tokens with the
        # largest p/q as K grows, so at K = 3 it is below BV (113/72); still lossless
        ("gbv_multipath", 2, F(67, 36)),
        ("gbv_multipath", 3, F(14, 9)),
    ],
)
def test_regression_values_on_section_7(method, K, value):
    res = simulate_exact(default_instance(), method, K)
    assert res.expected_accepted == value and res.validity_defect == 0


def test_float_random_instance_is_lossless_within_tolerance():
    inst = random_instance(3, 2, 17, exact=False, zero_prob=0.2)
    for m in LOSSLESS:
        res = simulate_exact(inst, m, 3)
        assert res.validity_defect < 1e-12 and res.lossless


def test_gbv_multipath_large_k_float_matches_exact():
    """Stable powers: K = 8 in float64 agrees with the exact law to ~1e-13."""
    inst = random_instance(2, 2, 4, exact=True)
    ex = simulate_exact(inst, "gbv_multipath", 8)
    fl = simulate_exact(inst.to_float(), "gbv_multipath", 8)
    assert ex.validity_defect == 0
    assert max(abs(fl.output_law[o] - float(v)) for o, v in ex.output_law.items()) < 1e-12
