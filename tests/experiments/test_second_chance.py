"""near_opt_bv with second chances (bench/experiments/second_chance.py): race, lossless, no gain on the optimal face.

Exact rationals throughout:

* the race integrals give the win probabilities of
  :func:`~spectr_gbv.reference.score_laws.win_probabilities`, and the losers' rows are laws;
* validity defect exactly 0 with and without the proportional share (``mix``);
* with ``mix = 0`` the losers never extend the winner's stop: the law given the drafts equals
  ``near_opt_bv``'s on every draft tuple (the theorem of docs/near_opt_bv.md, "Second chances");
* K = 1 is BV and L = 1 is OPT(K) for every ``mix``; pinned exact values with ``mix > 0``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest

from bench.experiments.near_opt_variants import PROPORTIONAL, RULE, MixedOrdersSplit, check_mix
from bench.experiments.second_chance import SecondChanceNearOptVerifier, loser_rows, race_integral
from spectr_gbv.core.instance import default_instance, random_instance
from spectr_gbv.reference import get_verifier, iteration_inputs
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier, child_law, score_tree
from spectr_gbv.reference.score_laws import UNIFORM, win_probabilities
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.theory.bounds import l1_optimum


def _batch(instance, drafts) -> VerifyInput:
    return VerifyInput(*iteration_inputs(instance, drafts), exact=True)


@pytest.mark.parametrize("mix", [F(0), F(1, 2)])
@pytest.mark.parametrize("drafts", [[[0, 1], [1, 1], [0, 0]], [[1, 0], [1, 0], [0, 1]], [[0, 0], [0, 1]]])
def test_race_integral_gives_the_win_probabilities(drafts, mix):
    """P(k wins) = integral of g_k times the other drafts' CDFs; with m drafts marginalised, s^m each."""
    batch = _batch(default_instance(), drafts)
    _, leaves = score_tree(batch, split=MixedOrdersSplit(mix))
    K = len(leaves)
    wins = win_probabilities(leaves)
    for k in range(K):
        others = [leaves[j] for j in range(K) if j != k]
        assert race_integral(leaves[k], others, 0) == wins[k]
        # a draft not yet read scores below s with probability s (the root law is uniform)
        assert race_integral(leaves[k], [UNIFORM] * (K - 1), 0) == race_integral(leaves[k], [], K - 1)
    assert race_integral(UNIFORM, [], 2) == F(1, 3)


def test_loser_rows_are_laws_and_refuse_an_impossible_prefix():
    batch = _batch(default_instance(), [[0, 1], [1, 1]])
    nodes, leaves = score_tree(batch, split=MixedOrdersSplit(F(1, 2)))
    rows = loser_rows(batch, nodes, leaves[0], [], 0, 1, 0)
    assert len(rows) == 2 and all(sum(row) == 1 for row in rows)
    # the root row: q(v) times P(a draft through v scores below the winner) over the same for any draft
    root, q0 = nodes[()], (F(2, 3), F(1, 3))
    below = race_integral(leaves[0], [root.law], 0)
    assert rows[0] == tuple(
        qv * race_integral(leaves[0], [child_law(root, q0, v)], 0) / below for v, qv in enumerate(q0)
    )
    with pytest.raises(ValueError, match="cannot reach depth 0"):
        loser_rows(batch, nodes, (), [], 0, 1, 0)  # an empty winner measure: no score to lose to


@pytest.mark.parametrize(
    "instance",
    [default_instance(), random_instance(2, 2, 0), random_instance(3, 2, 16, zero_prob=0.3)],
    ids=["default", "random:2,2,0", "random:3,2,16,0.3"],
)
@pytest.mark.parametrize("K", [2, 3])
def test_lossless_exactly(instance, K):
    for mix in (F(0), F(1, 2), F(1)):
        res = simulate_exact(instance, SecondChanceNearOptVerifier(mix=mix), K)
        assert res.validity_defect == 0, (mix, res.validity_defect)


@pytest.mark.parametrize(
    "instance",
    [default_instance(), random_instance(2, 3, 5), random_instance(3, 3, 32, zero_prob=0.3)],
    ids=["default", "random:2,3,5", "random:3,3,32,0.3"],
)
def test_no_gain_on_the_optimal_face(instance):
    """mix = 0: every under-drafted set is tight, so a loser never continues the winner's stop."""
    plain, second = NearOptBlockVerifier(), SecondChanceNearOptVerifier()
    drafts = [tuple(x) for x in itertools.product(range(instance.n), repeat=instance.L)]
    checked = 0
    for tup in itertools.islice(itertools.product(drafts, repeat=2), 0, None, 3):
        args = iteration_inputs(instance, [list(x) for x in tup])
        try:
            law = plain.outcome_law(*args)
        except ValueError:  # a draft of probability 0 under q
            continue
        assert second.outcome_law(*args) == law, tup
        checked += 1
    assert checked >= 5
    assert simulate_exact(instance, second, 2).expected_accepted == simulate_exact(instance, plain, 2).expected_accepted


def test_k1_is_bv_and_l1_is_opt_for_every_mix():
    inst = default_instance()
    bv = simulate_exact(inst, get_verifier("bv"), 1).expected_accepted
    one_step = random_instance(3, 1, 4)
    opt = {K: l1_optimum(one_step.target.cond(()), one_step.draft.cond(()), K)[0] for K in (2, 3)}
    for mix in (F(0), F(1, 3), F(1)):
        assert simulate_exact(inst, SecondChanceNearOptVerifier(mix=mix), 1).expected_accepted == bv
        for K in (2, 3):
            assert simulate_exact(one_step, SecondChanceNearOptVerifier(mix=mix), K).expected_accepted == opt[K]


def test_pinned_values_with_a_proportional_share():
    """Exact E[tau] on the default instance at K = 2 (near_opt_bv: 881/448; mdbv: 61/36)."""
    inst = default_instance()
    assert simulate_exact(inst, SecondChanceNearOptVerifier(mix=F(1, 2)), 2).expected_accepted == F(5165, 2772)
    assert simulate_exact(inst, SecondChanceNearOptVerifier(mix=F(1)), 2).expected_accepted == F(95, 54)
    assert simulate_exact(inst, get_verifier("near_opt_bv"), 2).expected_accepted == F(881, 448)


def test_bad_options():
    with pytest.raises(ValueError, match="mix must be in"):
        SecondChanceNearOptVerifier(mix=F(3, 2))
    with pytest.raises(ValueError, match="needs split='orders'"):
        SecondChanceNearOptVerifier(split=RULE, mix=F(1, 2))
    with pytest.raises(ValueError, match="needs split='orders'"):
        check_mix(F(1, 4), PROPORTIONAL)
    with pytest.raises(ValueError, match="mix must be in"):
        MixedOrdersSplit(F(-1, 2))
