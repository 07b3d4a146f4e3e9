"""near_opt_bv: the count-law node rule is optimal and exact; the verifier is lossless, BV at K = 1, OPT at L = 1.

Exact rationals throughout. The properties of docs/near_opt_bv.md checked here on seeded instances (the
200+-instance battery is ``docs/results/near_opt_sweep.toml``):

* the hedged base on hand cases (the battery's worst case for the lexicographic base, a binding
  cap, K = 1);
* the generalised node rule (:func:`coverage.mixture_rule`, every priority) reaches the min-cut
  max sum min(t, d) by brute force over every subset, its d is a base of the count-law
  polymatroid, and its priority-order mixture reproduces d exactly;
* validity defect exactly 0, the structured path equal to the enumeration of every draft tuple
  (so the draft that ``run`` selects, by the largest score, has the law r that BV is told);
* the walk (``selection="walk"``, the first version) on the default instance;
* K = 1 has BV's law; L = 1 attains the closed-form OPT(K) exactly;
* E[tau] is non-decreasing in K and never below mdbv, gbv_multipath, optimal_multidraft and
  traversal on the instances tried.
"""

from __future__ import annotations

import itertools
import random
from fractions import Fraction as F

import pytest

from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.reference import iteration_inputs
from spectr_gbv.reference.coverage import (
    coverage,
    decompose_base,
    hedged_base,
    lexicographic_base,
    mixture_rule,
    order_vertex,
    point_mass,
    selection_probabilities,
)
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier, child_counts
from spectr_gbv.reference.optimal_multidraft import node_rule
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.bounds import l1_optimum
from tests.reference.ref_helpers import sampled_p_value

ISSUE_LIST = ("mdbv", "gbv_multipath", "optimal_multidraft", "traversal")


def _row(rng: random.Random, n: int, zeros: bool) -> tuple[F, ...]:
    w = [F(rng.randint(0 if zeros and rng.random() < 0.3 else 1, 12)) for _ in range(n)]
    if not any(w):
        w[rng.randrange(n)] = F(1)
    total = sum(w)
    return tuple(x / total for x in w)


def _counts(rng: random.Random, k: int) -> tuple[tuple[int, F], ...]:
    ms = sorted(rng.sample(range(1, k + 1), rng.randint(1, k)))
    w = [F(rng.randint(1, 9)) for _ in ms]
    return tuple((m, x / sum(w)) for m, x in zip(ms, w, strict=True))


def test_mixture_rule_reaches_the_min_cut_and_is_a_base():
    rng = random.Random(18)
    for trial in range(150):
        n = rng.randint(2, 5)
        q = _row(rng, n, trial % 3 == 0)
        counts = _counts(rng, rng.randint(1, 5))
        scale = F(rng.randint(1, 8), 8)
        t = tuple(scale * v for v in _row(rng, n, trial % 2 == 0))
        d, orders = mixture_rule(t, q, counts, ("id", "ratio", "lex", "hedge")[trial % 4])
        support = [y for y in range(n) if q[y] > 0]
        subsets = [s for r in range(n + 1) for s in itertools.combinations(range(n), r)]
        cut = min(sum((t[y] for y in a), F(0)) + coverage(1 - sum((q[y] for y in a), F(0)), counts) for a in subsets)
        assert sum(min(a, b) for a, b in zip(t, d, strict=True)) == cut
        assert sum(d) == 1 and all(d[y] == 0 for y in range(n) if q[y] == 0)
        for s in subsets:  # d is in the polymatroid: d(X) <= G(q(X))
            assert sum((d[y] for y in s), F(0)) <= coverage(sum((q[y] for y in s), F(0)), counts)
        assert sum(w for w, _ in orders) == 1 and all(w > 0 for w, _ in orders) and len(orders) <= len(support)
        mix = [sum((w * order_vertex(q, o, counts)[y] for w, o in orders), F(0)) for y in range(n)]
        assert mix == list(d)
        if len(counts) == 1 and counts[0][0] == 1:
            assert d == q  # one draft: the only base is q


def test_hedged_base_hand_cases():
    # random:3,2,16,0.3's root at K = 2: both live tokens under-drafted; lex gives token 0 its
    # whole coverage 35/324, the hedge splits their 5/9 in proportion to q (5/54, 25/54)
    p, q, two = (F(1, 4), F(3, 4), F(0)), (F(1, 18), F(5, 18), F(2, 3)), point_mass(2)
    assert lexicographic_base(p, q, two) == (F(35, 324), F(145, 324), F(4, 9))
    assert hedged_base(p, q, two) == (F(5, 54), F(25, 54), F(4, 9))
    # a cap binds: K = 4, G(1/5) = 369/625 to split; by q token 1 would get 3/4 of it > t(1) = 21/50
    t, q = (F(29, 50), F(21, 50), F(0)), (F(1, 20), F(3, 20), F(4, 5))
    assert hedged_base(t, q, point_mass(4)) == (F(213, 1250), F(21, 50), F(256, 625))
    # one under-drafted token, or one draft: the lexicographic base itself (at K = 1, q)
    t = (F(1, 2), F(1, 10), F(2, 5))
    q = (F(1, 10), F(3, 10), F(3, 5))
    assert hedged_base(t, q, point_mass(2)) == lexicographic_base(t, q, point_mass(2))
    assert hedged_base(t, q, point_mass(1)) == q


def test_point_mass_is_the_optimal_multidraft_rule():
    rng = random.Random(3)
    for _ in range(40):
        n, c = rng.randint(2, 5), rng.randint(1, 5)
        p, q = _row(rng, n, True), _row(rng, n, False)
        assert mixture_rule(p, q, point_mass(c), "id") == node_rule(p, q, c)


def test_hand_case_two_counts():
    # q = (1/2, 1/2), one or two drafts with probability 1/2 each: G(x) = (x + 1 - (1 - x)^2)/2;
    # target (3/4, 1/4): token 0 as much as possible, d(0) = G(1/2) = 5/8, the order (0, 1)
    q, counts = (F(1, 2), F(1, 2)), ((1, F(1, 2)), (2, F(1, 2)))
    d, orders = mixture_rule((F(3, 4), F(1, 4)), q, counts, "ratio")
    assert d == (F(5, 8), F(3, 8)) and orders == ((F(1), (0, 1)),)
    assert selection_probabilities(orders, [1, 0]) == {0: F(1)}
    # P(token 1 selected and m' drafts carry it | 2 drafts) under the order (0, 1): only (1, 1)
    assert child_counts(q, orders, 2, 1) == {1: F(0), 2: F(1, 4)}
    assert child_counts(q, orders, 2, 0) == {1: F(1, 2), 2: F(1, 4)}
    assert decompose_base(d, q, counts) == orders


@pytest.mark.parametrize("chunk", range(2))
def test_lossless_and_run_has_the_law_it_claims(chunk):
    for seed in range(chunk * 12, chunk * 12 + 12):
        n, L, k = 2 + seed % 2, 2 + (seed // 2) % 2, 2 + (seed // 4) % 2
        inst = random_instance(n, L, seed, zero_prob=0.3 if seed % 3 else 0.0)
        fast = simulate_exact(inst, "near_opt_bv", k)
        assert fast.validity_defect == 0, (n, L, seed, k)
        if n ** (L * k) <= 5000:
            slow = simulate_exact(inst, "near_opt_bv", k, fast=False)
            assert slow.output_law == fast.output_law and slow.validity_defect == 0


def test_k1_is_block_verification():
    for seed in range(12):
        inst = random_instance(2 + seed % 2, 2 + seed % 3 // 2, seed, zero_prob=0.3 if seed % 2 else 0.0)
        assert simulate_exact(inst, "near_opt_bv", 1).output_law == simulate_exact(inst, "bv", 1).output_law


def test_l1_is_the_optimum():
    rng = random.Random(20261201)
    for seed in range(60):
        n, k = rng.randint(2, 6), rng.randint(1, 5)
        inst = random_instance(n, 1, seed, zero_prob=0.3 if seed % 3 == 0 else 0.0)
        r = simulate_exact(inst, "near_opt_bv", k)
        assert r.validity_defect == 0
        assert r.expected_accepted == l1_optimum(inst.target.cond(()), inst.draft.cond(()), k)[0], (n, seed, k)


def test_default_instance_values():
    # E[tau] exactly, K = 1..4 (K = 1: BV's 113/72; K >= 3: L = 2, every token accepted);
    # cross-checked by the tuple path above. The walk (first version) gives 139/72, 319/162, 20639/10368.
    expected = {1: F(113, 72), 2: F(881, 448), 3: F(2), 4: F(2)}
    walk = {1: F(113, 72), 2: F(139, 72), 3: F(319, 162), 4: F(20639, 10368)}
    inst = default_instance()
    for k, value in expected.items():
        r = simulate_exact(inst, "near_opt_bv", k)
        assert (r.expected_accepted, r.validity_defect) == (value, 0), k
        w = simulate_exact(inst, NearOptBlockVerifier(selection="walk"), k)
        assert (w.expected_accepted, w.validity_defect) == (walk[k], 0), k


@pytest.mark.parametrize("family", [(2, 2, 0.0), (3, 2, 0.3), (2, 3, 0.0)])
def test_monotone_in_k_and_never_below_the_field(family):
    # holds on these 24 instances (not everywhere: 6 of the battery's 660 cases are below the
    # list, docs/near_opt_bv.md); the walk holds here too, the proportional split does not (4 cases)
    n, L, zp = family
    below = set()
    for seed in range(8):
        inst = random_instance(n, L, seed, zero_prob=zp)
        prev = F(0)
        for k in (1, 2, 3, 4):
            value = simulate_exact(inst, "near_opt_bv", k).expected_accepted
            assert value >= prev, (n, L, seed, k)
            prev = value
            if k >= 2:
                for other in ISSUE_LIST:
                    if value < simulate_exact(inst, other, k).expected_accepted:
                        below.add((n, L, zp, seed, k, other))
    assert below == set()


def test_float_inputs_follow_the_exact_rule():
    inst = random_instance(3, 2, 5)
    exact = simulate_exact(inst, "near_opt_bv", 3)
    flt = simulate_exact(inst.to_float(), "near_opt_bv", 3)
    assert abs(float(exact.expected_accepted) - float(flt.expected_accepted)) < 1e-12


def test_sampling_matches_the_outcome_law():
    # three drafts with a shared prefix and a repeat: the walk's sampled choices follow the law
    args = iteration_inputs(default_instance(), [[1, 0], [0, 1], [1, 1]])
    v = NearOptBlockVerifier()
    assert sum(v.outcome_law(*args).values()) == 1
    assert sampled_p_value(v, args, 2000, 1812) > 1e-4


def test_bad_options_name_the_argument():
    from spectr_gbv.reference.base import VerifyInput
    from spectr_gbv.reference.near_opt_bv import score_tree

    for kwargs, word in (
        (dict(selection="scores"), "selection"),
        (dict(split="bogus"), "split"),
        (dict(split="bogus", selection="walk"), "split"),
        (dict(weighting="BV"), "weighting"),
        (dict(priority="foo"), "priority must be one of id, ratio, lex, hedge, got 'foo'"),
        (dict(split="proportional"), "split must be one of orders, got 'proportional'"),
    ):
        with pytest.raises(ValueError, match=word):
            NearOptBlockVerifier(**kwargs)
    batch = VerifyInput(*iteration_inputs(default_instance(), [[1, 0], [0, 1]]), True)
    with pytest.raises(ValueError, match="weighting"):
        score_tree(batch, weighting="BV")
    with pytest.raises(ValueError, match="split"):
        score_tree(batch, split="orderz")
