"""Hierarchical Speculative Decoding (Zhou et al. 2026): exact values, BV identity, the released rule's bias."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from spectr_gbv.core import default_instance, random_instance
from spectr_gbv.core.instance import parse_instance
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.reference.hsd import hsd_weights
from spectr_gbv.reference.kernels import block_weights
from spectr_gbv.simulate.exact import simulate_exact
from tests.reference.ref_helpers import sampled_p_value

ALPHA = 1e-4


def _context_free(p: list[str], q: list[str], L: int):
    """n = 2, the same target row p and draft row q after every prefix."""
    target = {",".join(map(str, z)): p for d in range(L + 1) for z in itertools.product(range(2), repeat=d)}
    draft = {",".join(map(str, z)): q for d in range(L) for z in itertools.product(range(2), repeat=d)}
    return parse_instance({"n": 2, "L": L, "target": target, "draft": draft})


#: THEORY.md section 3's paper check: p = (1/3, 2/3), q = (2/3, 1/3), L = 2 (SD 10/9, BV 11/9, greedy 12/9).
PAPER_CHECK = _context_free(["1/3", "2/3"], ["2/3", "1/3"], 2)


def _two_token_law(output_law, inst):
    """Law of the first two tokens of "O, then fresh sampling from p" (L = 2)."""
    out = {}
    for o, a in output_law.items():
        for y in itertools.product(range(inst.n), repeat=2):
            if tuple(y[: len(o)]) != o[:2]:
                continue
            w = a
            for t in range(len(o), 2):
                w = w * inst.target.cond(y[:t])[y[t]]
            out[y] = out.get(y, F(0)) + w
    return {y: v for y, v in out.items() if v}


# ----------------------------------------------------------------------------- exact values
@pytest.mark.parametrize("fast", [True, False])
def test_section_7_values(fast):
    inst = default_instance()
    hsd = simulate_exact(inst, "hsd", 1, fast=fast)
    assert hsd.expected_accepted == F(113, 72) and hsd.validity_defect == 0  # = BV = OPT(1)
    released = simulate_exact(inst, "hsd_released", 1, fast=fast)
    assert released.expected_accepted == F(13, 8)  # = OT(1), the greedy value, but biased:
    assert released.validity_defect == F(1, 18)
    for K, value in ((2, F(61, 36)), (3, F(577, 324))):  # MDBV's values
        md = simulate_exact(inst, "hsd_multidraft", K, fast=fast)
        assert md.expected_accepted == value and md.validity_defect == 0


def test_fast_and_tuple_paths_give_the_same_law():
    inst = random_instance(3, 2, 5, zero_prob=0.2)
    for name, K in (("hsd", 2), ("hsd_released", 2), ("hsd_multidraft", 2)):
        a = simulate_exact(inst, name, K, fast=True)
        b = simulate_exact(inst, name, K, fast=False)
        assert a.output_law == b.output_law and a.expected_accepted == b.expected_accepted


def test_capped_ratio_equals_bv_running_weight():
    # joint ratios 2, 1 along draft (1, 0) of the paper check: r* = (2, 1/2), BV w = (1, 1/2)
    args = iteration_inputs(PAPER_CHECK, [[1, 0]])
    hw = hsd_weights((1, 0), args[2][0, :2], args[1][0], True)
    assert hw.ratio == [1, 2, 1] and hw.cap == [1, 1, F(1, 2)]
    bw = block_weights((1, 0), args[2][0, :2], args[1][0], True)
    assert hw.cap == bw.w and hw.h == bw.h == [1, F(1, 2)]


@pytest.mark.parametrize("seed", range(4))
def test_hsd_law_equals_bv_law_per_draft(seed):
    inst = random_instance(3, 3, 100 + seed, zero_prob=0.2 * (seed % 2))
    hsd, bv = get_verifier("hsd"), get_verifier("bv")
    checked = 0
    for x in itertools.product(range(3), repeat=3):
        try:
            args = iteration_inputs(inst, [list(x)])
            law = hsd.outcome_law(*args)
        except ValueError:  # a token of draft probability 0
            continue
        assert law == bv.outcome_law(*args)
        checked += 1
    assert checked > 0


# ----------------------------------------------------------------------------- losslessness
@pytest.mark.parametrize(("n", "L", "seed"), [(2, 1, 0), (2, 3, 1), (3, 2, 2), (3, 3, 3), (4, 2, 4), (4, 1, 5)])
def test_lossless_battery(n, L, seed):
    inst = random_instance(n, L, seed, zero_prob=0.25 if seed % 2 else 0.0)
    bv = simulate_exact(inst, "bv", 1).expected_accepted
    hsd = simulate_exact(inst, "hsd", 1)
    assert hsd.validity_defect == 0 and hsd.expected_accepted == bv
    md = simulate_exact(inst, "hsd_multidraft", 2)
    assert md.validity_defect == 0
    assert md.expected_accepted == simulate_exact(inst, "mdbv", 2).expected_accepted


def test_released_rule_counterexample():
    # draft (1, 0): r(x^1) = 2, r(x^2) = 1; the released code accepts it surely (min{1, r} = 1),
    # the paper's rule with prob. min{1, r*} = 1/2 and resamples otherwise.
    args = iteration_inputs(PAPER_CHECK, [[1, 0]])
    assert get_verifier("hsd_released").outcome_law(*args) == {(1, 0, 0): F(1, 3), (1, 0, 1): F(2, 3)}
    assert get_verifier("hsd").outcome_law(*args) == {(1, 0, 0): F(1, 6), (1, 0, 1): F(1, 3), (1, 1): F(1, 2)}
    res = simulate_exact(PAPER_CHECK, "hsd_released", 1)
    assert res.expected_accepted == F(4, 3)  # the greedy value 12/9, above BV's 11/9 ...
    assert res.validity_defect == F(1, 9)  # ... because it is biased
    # the uncorrected greedy bias of THEORY.md section 3, instead of p = (1/9, 2/9, 2/9, 4/9)
    law = _two_token_law(res.output_law, PAPER_CHECK)
    assert law == {(0, 0): F(1, 9), (0, 1): F(2, 9), (1, 0): F(1, 3), (1, 1): F(1, 3)}
    assert simulate_exact(PAPER_CHECK, "hsd", 1).expected_accepted == F(11, 9)


def test_released_rule_is_exact_at_l1():
    inst = random_instance(4, 1, 7)
    r = simulate_exact(inst, "hsd_released", 1)
    assert r.validity_defect == 0 and r.expected_accepted == simulate_exact(inst, "bv", 1).expected_accepted


# ----------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("name", ["hsd", "hsd_released", "hsd_multidraft"])
def test_samples_follow_the_exact_law(name):
    args = iteration_inputs(default_instance(), [[1, 0], [0, 1], [1, 1]])
    v = get_verifier(name)
    assert sum(v.outcome_law(*args).values()) == 1
    assert sampled_p_value(v, args, 2000, 2601) > ALPHA
