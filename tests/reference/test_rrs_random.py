"""rrs_random: SpecInfer's recursive rejection sampling with the drafts tried in random order."""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np

from spectr_gbv.core import Instance, TabularAR, default_instance, random_instance
from spectr_gbv.reference import RandomOrderRecursiveRejectionVerifier, get_verifier, iteration_inputs
from spectr_gbv.reference.choosers import replay_outcomes
from spectr_gbv.reference.rrs import rrs_node
from spectr_gbv.reference.rrs_random import random_order
from spectr_gbv.simulate.exact import simulate_exact
from tests.reference.ref_helpers import sampled_p_value


def _l1(p_row, q_row) -> Instance:
    target = TabularAR.context_free([F(v) for v in p_row], depth=1, name="target")
    draft = TabularAR.context_free([F(v) for v in q_row], depth=0, name="draft")
    return Instance(target, draft, 1, "L=1")


def _draw(inst: Instance, K: int, rng: np.random.Generator) -> list[list[int]]:
    drafts = []
    for _ in range(K):
        x: list[int] = []
        for _t in range(inst.L):
            row = np.array([float(v) for v in inst.draft.cond(x)])
            x.append(int(rng.choice(inst.n, p=row / row.sum())))
        drafts.append(x)
    return drafts


def test_registered_attributes():
    v = get_verifier("rrs_random")
    assert isinstance(v, RandomOrderRecursiveRejectionVerifier)
    assert v.lossless is True and v.symmetric is True and v.structure == "draft_tree"
    assert "2305.09781" in v.citation


def test_random_order_is_uniform_over_distinct_sequences():
    outcomes = replay_outcomes(lambda ch: tuple(random_order([5, 5, 7], ch)), True)
    seqs: dict[tuple[int, ...], F] = {}
    for order, prob in outcomes:
        assert sorted(order) == [0, 1, 2]
        key = tuple([5, 5, 7][i] for i in order)
        seqs[key] = seqs.get(key, F(0)) + prob
    assert seqs == {(5, 5, 7): F(1, 3), (5, 7, 5): F(1, 3), (7, 5, 5): F(1, 3)}
    assert [o for o, _ in replay_outcomes(lambda ch: tuple(random_order([4, 4], ch)), True)] == [(0, 1)]


def test_hand_derived_two_drafts():
    # p = (1/3, 2/3), q = (2/3, 1/3), drafts (0, 1). Order (0, 1): accept 0 w.p. 1/2, else
    # R = (0, 1) and 1 is accepted surely. Order (1, 0): 1 accepted surely (p/q = 2).
    # Each order has probability 1/2: first token 0 w.p. 1/4, 1 w.p. 3/4; bonus Z ~ p.
    inst = _l1(["1/3", "2/3"], ["2/3", "1/3"])
    law = get_verifier("rrs_random").outcome_law(*iteration_inputs(inst, [[0], [1]]))
    assert law == {(0, 0): F(1, 12), (0, 1): F(2, 12), (1, 0): F(3, 12), (1, 1): F(6, 12)}
    rrs = get_verifier("rrs")
    a = rrs.outcome_law(*iteration_inputs(inst, [[0], [1]]))
    b = rrs.outcome_law(*iteration_inputs(inst, [[1], [0]]))
    assert law == {o: (a.get(o, 0) + b.get(o, 0)) / 2 for o in set(a) | set(b)}


def test_law_is_symmetric_in_the_draft_order():
    changed_rrs = 0
    for seed in range(8):
        inst = random_instance(3, 2, seed, zero_prob=0.3)
        drafts = np.array(_draw(inst, 3, np.random.default_rng(seed)))
        for name in ("rrs_random", "rrs"):
            v = get_verifier(name)
            laws = {
                tuple(sorted(v.outcome_law(*iteration_inputs(inst, drafts[list(perm)])).items()))
                for perm in itertools.permutations(range(3))
            }
            if name == "rrs_random":
                assert len(laws) == 1, (seed, drafts.tolist())
            else:
                changed_rrs += len(laws) > 1
    assert changed_rrs > 0  # the draft-order rrs is not symmetric on these tuples


def test_default_instance_values_equal_rrs():
    inst = default_instance()
    got = [simulate_exact(inst, "rrs_random", K).expected_accepted for K in (1, 2, 3, 4)]
    assert got == [F(107, 72), F(59, 36), F(565, 324), F(1177, 648)]
    assert got == [simulate_exact(inst, "rrs", K).expected_accepted for K in (1, 2, 3, 4)]


def _grid():
    for n, L, K in itertools.product((2, 3, 4), (1, 2, 3), (1, 2, 3)):
        if n**L * K > 48:  # keep the file fast
            continue
        for seed, zp in ((0, 0.0), (1, 0.3), (2, 0.3), (3, 0.0), (4, 0.3), (5, 0.0), (6, 0.3)):
            yield n, L, K, seed, zp


def test_lossless_and_averaged_law_equals_rrs_on_random_instances():
    # the law below a node depends only on (node, number of drafts), and a uniformly permuted
    # i.i.d. sequence is i.i.d.: the averaged law equals that of rrs (draft order) at every L
    count = 0
    for n, L, K, seed, zp in _grid():
        inst = random_instance(n, L, 1000 * n + 100 * L + 10 * K + seed, zero_prob=zp)
        res = simulate_exact(inst, "rrs_random", K)
        assert res.validity_defect == 0, (n, L, K, seed, zp)
        assert res.output_law == simulate_exact(inst, "rrs", K).output_law
        count += 1
    assert count >= 100


def test_fast_path_equals_multiset_enumeration():
    for k, (n, L, K, _seed, zp) in enumerate(_grid()):
        if k % 4 or K == 1:
            continue
        inst = random_instance(n, L, 7 + k, zero_prob=zp)
        fast = simulate_exact(inst, "rrs_random", K)
        slow = simulate_exact(inst, "rrs_random", K, fast=False)
        assert (fast.enumeration, slow.enumeration) == ("draft_tree", "multiset")
        assert fast.output_law == slow.output_law and slow.validity_defect == 0


def test_trying_each_distinct_child_once_is_not_lossless():
    # the documented reason to permute the drafts with their repeats: skipping a repeated
    # token skips its residual update, which biases the output (default instance, K = 3)
    class DistinctChildren(RandomOrderRecursiveRejectionVerifier):
        name = "rrs_distinct_children_test"

        def node_step(self, p, q, tokens, prefix, exact, chooser):
            firsts = [i for i, v in enumerate(tokens) if v not in tokens[:i]]
            order = random_order([tokens[i] for i in firsts], chooser)
            accept, residuals = rrs_node(p, q, [tokens[firsts[i]] for i in order], exact)
            first = chooser.first_success(accept)
            return (firsts[order[first]], None) if first is not None else (None, residuals[-1])

    assert simulate_exact(default_instance(), DistinctChildren(), 3, fast=False).validity_defect == F(1, 36)


def test_samples_follow_the_exact_law():
    inst = random_instance(3, 2, 11, exact=False, zero_prob=0.2)
    args = iteration_inputs(inst, _draw(inst, 3, np.random.default_rng(3)))
    v = RandomOrderRecursiveRejectionVerifier()
    assert abs(sum(v.outcome_law(*args).values()) - 1) < 1e-12
    assert sampled_p_value(v, args, 2500, 1234) > 1e-4


def test_same_law_as_the_validate_variant_rrs_random_order():
    """Per-node random order (rrs_random) and one global random permutation of the drafts
    (the harness's ``rrs:random_order`` variant) give the same law for every draft tuple: the
    drafts through a node are interchangeable above it, so the restriction of a uniform
    permutation to them stays uniform given everything decided above."""
    from spectr_gbv.reference.variants import RandomOrderRRS

    rng = np.random.default_rng(0)
    for seed in range(12):
        inst = random_instance(3, 2, seed, zero_prob=0.2)
        drafts = _draw(inst, 3, rng)
        args = iteration_inputs(inst, drafts)
        assert RandomOrderRecursiveRejectionVerifier().outcome_law(*args) == RandomOrderRRS().outcome_law(*args)
