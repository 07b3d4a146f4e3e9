"""The deployable optimum: the joint LP over families, the mirrored pair and its exact bound."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.ledger.deployable import (
    MAX_TWINS,
    joint_margin,
    joint_optimum,
    mirrored_pair,
    mirrored_pair_bound,
    subtree_twins,
)
from spectr_gbv.reference.registry import available_methods, get_verifier
from spectr_gbv.simulate.methods import STATEFUL_METHODS, simulate_method
from spectr_gbv.theory.lp import optimal_lossless

#: The methods whose per-instance best the "never below" claim asks a verifier to reach.
LIST = ("mdbv", "gbv_multipath", "optimal_multidraft", "traversal")


def _floors(instances: list, k: int) -> list[F]:
    return [max(F(simulate_method(i, m, k).expected_accepted) for m in LIST) for i in instances]


def _pair_sum(method: str, k: int, pair: tuple) -> F:
    return sum((F(simulate_method(inst, method, k).expected_accepted) for inst in pair), F(0))


def test_pair_rows():
    a, b = mirrored_pair()
    assert (a.name, b.name, a.L, a.n) == ("mirrored_pair:A", "mirrored_pair:B", 2, 3)
    for inst, good in ((a, 1), (b, 0)):
        assert list(inst.target.cond(())) == [F(1, 4), F(3, 4), F(0)]
        assert list(inst.draft.cond(())) == [F(1, 18), F(5, 18), F(2, 3)]
        for t in range(3):
            assert list(inst.draft.cond((t,))) == [1, 0, 0]
            assert list(inst.target.cond((t,))) == ([1, 0, 0] if t == good else [0, 1, 0])


def test_bound_values():
    assert [mirrored_pair_bound(k) for k in (1, 2, 3, 4)] == [F(1), F(5, 3), F(19, 9), F(65, 27)]


@pytest.mark.parametrize("k", [2, 3])
def test_bound_equals_the_joint_lp(k):
    pair = mirrored_pair()
    res = joint_optimum(list(pair), k)
    assert abs(res.value - float(mirrored_pair_bound(k))) <= 1e-8
    assert res.kernels < res.columns


def test_every_registered_lossless_verifier_respects_the_bound():
    pair = mirrored_pair()
    for k in (2, 3):
        bound = mirrored_pair_bound(k)
        for m in available_methods():
            if m in STATEFUL_METHODS or not get_verifier(m).lossless:
                continue
            assert _pair_sum(m, k, pair) <= bound, m
        # the bound binds: MDBV reaches it; a lossy rule goes past it, and so does the LP oracle,
        # which reads the whole instance (lossless, not deployable)
        assert _pair_sum("mdbv", k, pair) == bound
        assert _pair_sum("independent_bv", k, pair) > bound
        assert _pair_sum("lp_oracle", k, pair) > bound


def test_the_list_beats_the_bound():
    pair = mirrored_pair()
    floors = {
        k: [
            max(F(simulate_method(inst, m, k).expected_accepted) for m in ("gbv_multipath", "optimal_multidraft"))
            for inst in pair
        ]
        for k in (2, 3)
    }
    assert floors[2] == [F(335, 324), F(215, 324)] and sum(floors[2]) > mirrored_pair_bound(2)
    assert sum(floors[3]) > mirrored_pair_bound(3)


def test_other_roots():
    # c = 16/25, f_0 = f_1 = 19/100: the bracket's flat middle p(0) + p(1) - c binds, 3 (1 - c)
    p, q = (F(1, 2), F(1, 2), F(0)), (F(1, 10), F(1, 10), F(4, 5))
    assert mirrored_pair_bound(2, p, q) == 3 * (1 - F(16, 25))
    res = joint_optimum(list(mirrored_pair(p, q)), 2)
    assert abs(res.value - float(mirrored_pair_bound(2, p, q))) <= 1e-8


def test_joint_optimum_of_one_instance_is_opt():
    inst = default_instance()
    for k in (1, 2):
        res = joint_optimum([inst], k)
        assert abs(res.value - optimal_lossless(inst.target, inst.draft, k, inst.L).value) <= 1e-8
        assert len(res.values) == 1 and abs(res.values[0] - res.value) <= 1e-8


def test_weights_scale_the_objective():
    inst = random_instance(2, 2, 3)
    one, three = joint_optimum([inst], 2), joint_optimum([inst], 2, [3.0])
    assert abs(three.value - 3 * one.value) <= 1e-8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_root": (F(1, 2), F(1, 2))}, "target_root: expected 3"),
        ({"target_root": (0.25, 0.75, 0.0)}, "target_root: expected Fractions"),
        ({"target_root": (F(1, 2), F(1, 2), F(1, 2))}, "target_root: probabilities sum"),
        ({"target_root": (F(1, 2), F(-1, 2), F(1))}, "target_root: negative"),
        ({"target_root": (F(1, 2), F(1, 4), F(1, 4))}, r"target_root: need p\(0\), p\(1\) > 0 and p\(2\) = 0"),
        ({"draft_root": (F(1, 2), F(1, 2), F(0))}, "draft_root: need q > 0"),
    ],
)
def test_bad_rows(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mirrored_pair(**kwargs)
    with pytest.raises(ValueError, match=match):
        mirrored_pair_bound(2, **kwargs)


@pytest.mark.parametrize("k", [0, 1.5, True, 10_001])
def test_bad_k(k):
    with pytest.raises(ValueError, match="num_drafts"):
        mirrored_pair_bound(k)


def test_joint_optimum_bad_input():
    a = default_instance()
    with pytest.raises(ValueError, match="at least one"):
        joint_optimum([], 2)
    with pytest.raises(ValueError, match=r"instances\[1\]"):
        joint_optimum([a, random_instance(3, 2, 0)], 2)
    with pytest.raises(ValueError, match="weights: expected 1"):
        joint_optimum([a], 2, [1.0, 2.0])
    with pytest.raises(ValueError, match="num_drafts"):
        joint_optimum([a], 0)
    with pytest.raises(ValueError, match="MAX_JOINT_COLUMNS"):
        joint_optimum([random_instance(3, 4, 0)], 4)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_margin_on_the_mirrored_pair(k):
    """The list's best on A and B sums past the exact bound; the margin is half the excess."""
    pair = list(mirrored_pair())
    floors = _floors(pair, k)
    res = joint_margin(pair, k, floors)
    excess = sum(floors) - mirrored_pair_bound(k)
    assert excess > 0
    assert abs(res.margin + float(excess) / 2) <= 1e-8
    assert abs(sum(res.values) - float(mirrored_pair_bound(k))) <= 1e-8


def test_margin_of_one_instance_is_opt_minus_floor():
    inst = random_instance(2, 2, 3)
    opt = optimal_lossless(inst.target, inst.draft, 2, inst.L).value
    assert abs(joint_margin([inst], 2, [1.0]).margin - (opt - 1.0)) <= 1e-8


def test_subtree_twins_move_rows_below_one_prefix():
    inst = random_instance(3, 2, 16, zero_prob=0.3)
    twins = subtree_twins(inst)
    assert len(twins) == 6 and twins[0] is inst
    swap = twins[5]  # the root's children permuted by (2, 1, 0)
    assert swap.name.endswith("twin[root:210]")
    for model, base in ((swap.target, inst.target), (swap.draft, inst.draft)):
        assert list(model.cond(())) == list(base.cond(()))
        for a, b in ((0, 2), (1, 1), (2, 0)):
            assert list(model.cond((b,))) == list(base.cond((a,)))
    assert len(subtree_twins(random_instance(2, 3, 20))) == 1 + 3 * 1
    assert len(subtree_twins(random_instance(3, 3, 32, zero_prob=0.3))) == 1 + 4 * 5


def test_subtree_twins_bad_input():
    with pytest.raises(ValueError, match="L >= 2"):
        subtree_twins(random_instance(3, 1, 0))
    with pytest.raises(ValueError, match="MAX_TWINS"):
        subtree_twins(random_instance(4, 3, 0))
    assert MAX_TWINS == 64


def test_joint_lp_of_rare_multisets_is_feasible():
    """Regression: with P(M) ~ 1e-11 in the coefficients HiGHS's simplex called this family infeasible."""
    twins = subtree_twins(random_instance(3, 2, 16, zero_prob=0.3))[:3]
    res = joint_optimum(twins, 4)
    mdbv = sum(float(simulate_method(i, "mdbv", 4).expected_accepted) for i in twins)
    opt = sum(optimal_lossless(i.target, i.draft, 4, i.L).value for i in twins)
    assert mdbv - 1e-8 <= res.value <= opt + 1e-8
    assert abs(res.value - 4.3890706773) <= 1e-8


@pytest.mark.parametrize(
    ("spec", "k", "margin"),
    [
        # Battery cases where near_opt_bv is below the list: the twins allow a verifier at the list ...
        ((3, 2, 16), 2, 3.8295e-3),
        ((3, 2, 16), 4, 5.2264e-3),
        # ... or forbid one: no verifier reading only the drafted rows is at the list on all six.
        ((3, 2, 27), 3, -6.3175e-3),
    ],
)
def test_margin_over_the_twins_of_battery_cases(spec, k, margin):
    n, L, seed = spec
    twins = subtree_twins(random_instance(n, L, seed, zero_prob=0.3))
    res = joint_margin(twins, k, _floors(twins, k))
    assert abs(res.margin - margin) <= 1e-7


def test_joint_margin_bad_input():
    a = default_instance()
    with pytest.raises(ValueError, match="floors: expected 1"):
        joint_margin([a], 2, [1.0, 2.0])
    with pytest.raises(ValueError, match="floors: every floor must be finite"):
        joint_margin([a], 2, [float("nan")])
    with pytest.raises(ValueError, match="at least one"):
        joint_margin([], 2, [])
