"""OPT(K) is a single-path problem: max over selected-draft laws r of BV's value equals the LP optimum.

:func:`single_path_optimum` (module :mod:`spectr_gbv.theory.single_path`) against
:func:`optimal_lossless` within LP_TOL on seeded instances (n 2-3, L 1-3, K 1-4, dense and
sparse); its exact rechecks (the rounded law's BV value, its polymatroid excess); K = 1 is
BV's exact value; L = 1 is the closed-form OPT; every registered lossless selected-draft
verifier is at most the optimum; bad input is refused naming the argument.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.bounds import l1_optimum
from spectr_gbv.theory.lp import optimal_lossless
from spectr_gbv.theory.properties import LP_TOL
from spectr_gbv.theory.single_path import bv_value, single_path_optimum

CASES = [
    (n, L, seed, zp, k)
    for n, L in ((2, 2), (3, 2), (2, 3), (3, 3))
    for seed, zp in ((0, 0.0), (1, 0.3), (2, 0.0), (32, 0.3))
    for k in (2, 3, 4)
    if not (n == 3 and L == 3 and zp == 0.0 and k == 3)  # the dense 3,3 K = 3 LP is the slow one
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{}L{}s{}z{}K{}".format(*c))
def test_equals_the_lp_optimum(case):
    n, L, seed, zp, k = case
    inst = random_instance(n, L, seed, zero_prob=zp)
    sp = single_path_optimum(inst.target, inst.draft, k, L)
    opt = optimal_lossless(inst.target, inst.draft, k, L).value
    assert abs(sp.value - opt) <= LP_TOL, (sp.value, opt)
    assert abs(float(sp.value_exact_check) - sp.value) <= LP_TOL
    assert 0 <= sp.polymatroid_excess <= F(1, 10**9)
    assert abs(sum(sp.path_law.values()) - 1) <= 1e-12
    near = simulate_exact(inst, "near_opt_bv", k).expected_accepted
    assert float(near) <= sp.value + LP_TOL


def test_k1_is_block_verification_and_the_default_instance():
    inst = default_instance()
    sp = single_path_optimum(inst.target, inst.draft, 1, 2)
    assert abs(sp.value - 113 / 72) <= LP_TOL
    assert abs(single_path_optimum(inst.target, inst.draft, 2, 2).value - 71 / 36) <= LP_TOL
    assert abs(single_path_optimum(inst.target, inst.draft, 3, 2).value - 2) <= LP_TOL
    for seed in range(6):
        inst = random_instance(3, 2, seed, zero_prob=0.3)
        one = single_path_optimum(inst.target, inst.draft, 1, 2)
        assert abs(one.value - float(simulate_exact(inst, "bv", 1).expected_accepted)) <= LP_TOL


def test_l1_is_the_closed_form():
    for seed in range(10):
        inst = random_instance(2 + seed % 4, 1, seed, zero_prob=0.3 if seed % 2 else 0.0)
        k = 1 + seed % 4
        value = single_path_optimum(inst.target, inst.draft, k, 1).value
        assert abs(value - float(l1_optimum(inst.target.cond(()), inst.draft.cond(()), k)[0])) <= LP_TOL


def test_bv_value_is_exact():
    # r = q, the draft law itself: BV's exact E[tau] on the default instance (THEORY.md section 7)
    inst = default_instance()
    law = {(a, b): F(inst.draft.prob((a, b))) for a in range(2) for b in range(2)}
    assert bv_value(inst.target, law, 2) == F(113, 72)


def test_refuses_too_many_blocks():
    inst = random_instance(3, 3, 0)
    with pytest.raises(ValueError, match="max_blocks: 25 draft blocks of positive probability exceed the limit 10"):
        single_path_optimum(inst.target, inst.draft, 2, 3, max_blocks=10)
    with pytest.raises(ValueError):
        single_path_optimum(inst.target, inst.draft, 0, 3)
