"""khisti_is: importance-sampling selection + speculative sampling (Khisti et al. 2025), exactly."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import Instance, TabularAR, default_instance, random_instance
from spectr_gbv.reference import ImportanceSamplingVerifier, get_verifier, iteration_inputs
from spectr_gbv.reference.khisti_is import tournament_plan
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.bounds import l1_optimum
from tests.reference.ref_helpers import sampled_p_value


def _l1(p_row, q_row) -> Instance:
    target = TabularAR.context_free([F(v) for v in p_row], depth=1, name="target")
    draft = TabularAR.context_free([F(v) for v in q_row], depth=0, name="draft")
    return Instance(target, draft, 1, "L=1")


def _row(values) -> np.ndarray:
    return np.array([F(v) for v in values], dtype=object)


def test_registered_attributes():
    v = get_verifier("khisti_is")
    assert isinstance(v, ImportanceSamplingVerifier)
    assert v.lossless is True and v.symmetric is False and v.structure == "draft_tree"
    assert v.lp_truncation == 5 and "2410.18234" in v.citation
    with pytest.raises(ValueError, match="lp_truncation"):
        ImportanceSamplingVerifier(lp_truncation=0)


def test_hand_derived_two_drafts():
    # p = (1/3, 2/3), q = (2/3, 1/3), c = 2: r(0) = 4/9 + 2/9 keep(0,1) + 2/9 (1 - keep(1,0)) >= 4/9
    # > p(0), so the LP picks keep(0,1) = 0, keep(1,0) = 1 (token 1 wins every mixed pair):
    # r = (4/9, 5/9), acceptance 1/3 + 5/9 = 8/9 = OPT(2) = min_A [p(A) + 1 - q(A)^2] (A = {0})
    p, q = _row(["1/3", "2/3"]), _row(["2/3", "1/3"])
    plan = tournament_plan(p, q, 2, True)
    assert plan.rounds[0].keep == {(0, 1): 0, (1, 0): 1}
    assert list(plan.laws[-1]) == [F(4, 9), F(5, 9)]
    inst = _l1(["1/3", "2/3"], ["2/3", "1/3"])
    res = simulate_exact(inst, "khisti_is", 2)
    assert res.validity_defect == 0
    assert res.expected_accepted == F(8, 9) == l1_optimum(p, q, 2)[0]
    # drafts (0, 1): token 1 is selected and accepted surely (p(1)/r(1) = 6/5 > 1)
    law = get_verifier("khisti_is").outcome_law(*iteration_inputs(inst, [[0], [1]]))
    assert law == {(1, 0): F(1, 3), (1, 1): F(2, 3)}
    # drafts (0, 0): token 0 accepted with prob (1/3)/(4/9) = 3/4, else Z ~ (p - r)^+ = token 1
    law = get_verifier("khisti_is").outcome_law(*iteration_inputs(inst, [[0], [0]]))
    assert law == {(0, 0): F(1, 4), (0, 1): F(2, 4), (1,): F(1, 4)}


@pytest.mark.parametrize("s", [1, 2, 5])
def test_induced_law_equals_brute_force_over_draft_tuples(s):
    # r(y) = sum over ordered c-tuples of prod q(x_j) * P(tournament selects y | x), brute force
    rng = np.random.default_rng(7)
    w = rng.integers(1, 9, size=(2, 4))
    p, q = _row([F(int(v), int(w[0].sum())) for v in w[0]]), _row([F(int(v), int(w[1].sum())) for v in w[1]])
    one = F(1)
    for c in (1, 2, 3):
        plan = tournament_plan(p, q, c, True, s)
        brute = [F(0)] * 4
        for xs in itertools.product(range(4), repeat=c):
            weight = np.prod([q[x] for x in xs])
            dist = {xs[0]: one}  # law of the winner so far
            for j in range(1, c):
                new: dict[int, F] = {}
                for a, m in dist.items():
                    b = xs[j]
                    if a == b:
                        new[a] = new.get(a, F(0)) + m
                        continue
                    keep = plan.rounds[j - 1].keep_prob(a, b, one)
                    new[a] = new.get(a, F(0)) + m * keep
                    new[b] = new.get(b, F(0)) + m * (1 - keep)
                dist = new
            for y, m in dist.items():
                brute[y] += weight * m
        assert list(plan.laws[-1]) == brute
        assert sum(brute) == 1


def test_one_draft_is_speculative_decoding():
    for seed in range(6):
        inst = random_instance(3, 2, seed, zero_prob=0.3)
        assert simulate_exact(inst, "khisti_is", 1).output_law == simulate_exact(inst, "sd", 1).output_law


def test_two_drafts_reach_the_l1_optimum_when_the_lp_is_untruncated():
    # n <= s: the pairwise LP is the full two-draft LP, so by the canonical decomposition the
    # acceptance is OPT(2) (the weights' snapping happened to lose nothing on these instances)
    for seed in range(12):
        inst = random_instance(2 + seed % 4, 1, 100 + seed, zero_prob=0.3 if seed % 2 else 0.0)
        opt = l1_optimum(inst.target.cond(()), inst.draft.cond(()), 2)[0]
        assert simulate_exact(inst, "khisti_is", 2).expected_accepted == opt


def test_default_instance_values():
    inst = default_instance()
    got = [simulate_exact(inst, "khisti_is", K).expected_accepted for K in (1, 2, 3, 4)]
    assert got == [F(107, 72), F(415, 216), F(35, 18), F(955, 486)]
    assert got[0] == simulate_exact(inst, "sd", 1).expected_accepted


def _grid():
    for n, L, K in itertools.product((2, 3, 4), (1, 2, 3), (1, 2, 3)):
        if n**L * K > 48:  # keep the file fast: the largest trees are the slowest
            continue
        for seed, zp in ((0, 0.0), (1, 0.3), (2, 0.3), (3, 0.0), (4, 0.3), (5, 0.0), (6, 0.3)):
            yield n, L, K, seed, zp


def test_lossless_on_random_instances():
    count = 0
    for n, L, K, seed, zp in _grid():
        res = simulate_exact(random_instance(n, L, 1000 * n + 100 * L + 10 * K + seed, zero_prob=zp), "khisti_is", K)
        assert res.validity_defect == 0, (n, L, K, seed, zp)
        count += 1
    assert count >= 100


def test_fast_path_equals_tuple_enumeration():
    for k, (n, L, K, _seed, zp) in enumerate(_grid()):
        if k % 4 or K == 1:
            continue
        inst = random_instance(n, L, 7 + k, zero_prob=zp)
        fast = simulate_exact(inst, ImportanceSamplingVerifier(), K)
        slow = simulate_exact(inst, ImportanceSamplingVerifier(), K, fast=False)
        assert fast.enumeration != slow.enumeration
        assert fast.output_law == slow.output_law and slow.validity_defect == 0


def test_samples_follow_the_exact_law():
    inst = random_instance(3, 2, 11, exact=False, zero_prob=0.2)
    rng = np.random.default_rng(3)
    drafts = []
    for _ in range(3):
        x: list[int] = []
        for _t in range(inst.L):
            x.append(int(rng.choice(inst.n, p=inst.draft.cond(x))))
        drafts.append(x)
    args = iteration_inputs(inst, drafts)
    v = ImportanceSamplingVerifier()
    assert abs(sum(v.outcome_law(*args).values()) - 1) < 1e-12
    assert sampled_p_value(v, args, 2500, 1234) > 1e-4
