"""Score laws and the score-selection rule of near_opt_bv (spectr_gbv.reference.score_laws).

* Hand values: moments and top slices of the uniform law, the root coverage
  :math:`g_U(x) = 1 - (1 - x)^K`, and win probabilities of simple laws.
* The split of a node's law among its children gives the law back (q-mixture) and realises
  the rule's d exactly: :math:`q(v) E[S^{K-1} | G_{uv}] / E[S^{K-1} | H] = d(v)`.
* The race: the win probabilities of the K drafts' score laws, summed over the drafts equal to
  a block x, are r(x) = prod_t d_t(x_t) (the structured path's law) on random tuples.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core.instance import random_instance
from spectr_gbv.reference.base import VerifyInput
from spectr_gbv.reference.coverage import (
    coverage,
    point_mass,
)
from spectr_gbv.reference.near_opt_bv import NearOptBlockVerifier, child_law, score_tree
from spectr_gbv.reference.score_laws import (
    UNIFORM,
    ScoreCoverage,
    add_measures,
    moment,
    scaled,
    top_slice,
    win_probabilities,
)


def _cdf(law, s):
    return sum((m if s >= hi else m * (s - lo) / (hi - lo) if s > lo else F(0) for lo, hi, m in law), F(0))


def test_hand_values():
    assert [moment(UNIFORM, k) for k in range(4)] == [F(1), F(1, 2), F(1, 3), F(1, 4)]
    assert top_slice(UNIFORM, F(0), F(1, 2)) == ((F(1, 2), F(1), F(1, 2)),)
    assert top_slice(UNIFORM, F(1, 4), F(1, 2)) == ((F(1, 2), F(3, 4), F(1, 4)),)
    two = ((F(0), F(1, 2), F(1, 4)), (F(1, 2), F(1), F(3, 4)))  # density 1/2 then 3/2
    # the top quarter of [1/2, 1] is [2/3, 1]; the next quarter [1/2, 2/3]; then all of [0, 1/2]
    assert top_slice(two, F(1, 2), F(1)) == ((F(0), F(1, 2), F(1, 4)), (F(1, 2), F(2, 3), F(1, 4)))
    for k in (1, 2, 3, 4):
        g = ScoreCoverage(UNIFORM, k - 1)
        for x in (F(0), F(1, 7), F(1, 2), F(5, 6), F(1)):
            assert g(x) == 1 - (1 - x) ** k == coverage(x, point_mass(k))
    half = ((F(1, 2), F(1), F(1)),)
    assert win_probabilities([UNIFORM, half]) == [F(1, 4), F(3, 4)]
    assert win_probabilities([UNIFORM] * 3) == [F(1, 3)] * 3
    assert win_probabilities([((F(0), F(1, 2), F(1)),), half]) == [F(0), F(1)]
    assert add_measures([scaled(UNIFORM, F(1, 2)), scaled(half, F(1, 2))]) == (
        (F(0), F(1, 2), F(1, 4)),
        (F(1, 2), F(1), F(3, 4)),
    )


@pytest.mark.parametrize("seed", range(6))
def test_split_gives_the_law_back_and_realises_d(seed):
    n, L, k = 2 + seed % 2, 3, 2 + seed % 3
    inst = random_instance(n, L, seed, zero_prob=0.3 if seed % 2 else 0.0)
    rng = np.random.default_rng(seed)
    drafts = np.zeros((k, L), dtype=np.int64)
    for j in range(k):  # drafts from q (tokens of positive probability)
        for t in range(L):
            row = np.array([float(v) for v in inst.draft.cond(tuple(int(v) for v in drafts[j, :t]))])
            drafts[j, t] = rng.choice(n, p=row / row.sum())
    batch = VerifyInput(*_rows(inst, drafts))
    nodes, leaves = score_tree(batch)
    for u, node in nodes.items():
        q = tuple(inst.draft.cond(u))
        children = {v: child_law(node, q, v) for v in range(n) if q[v] > 0}
        for v, law in children.items():
            assert sum(m for _, _, m in law) == 1
            assert q[v] * moment(law, k - 1) / moment(node.law, k - 1) == node.d[v], (u, v)
        mixed = add_measures([scaled(law, q[v]) for v, law in children.items()])
        for s in {p for _, hi, _ in node.law for p in (hi,)} | {F(1, 3), F(3, 4)}:
            assert _cdf(mixed, s) == _cdf(node.law, s), (u, s)
    assert sum(win_probabilities(leaves)) == 1


def _rows(inst, drafts):
    k, L = drafts.shape
    dp = np.empty((k, L, inst.n), dtype=object)
    tp = np.empty((k, L + 1, inst.n), dtype=object)
    for j in range(k):
        x = tuple(int(v) for v in drafts[j])
        for t in range(L):
            dp[j, t] = inst.draft.cond(x[:t])
        for t in range(L + 1):
            tp[j, t] = inst.target.cond(x[:t])
    return drafts.astype(np.int64), dp, tp, True


def test_win_probabilities_are_the_path_law():
    # summed over the drafts equal to x, the race's win probabilities average to r(x) = prod d_t
    inst = random_instance(2, 2, 3)
    k = 3
    blocks = list(itertools.product(range(2), repeat=2))
    qx = {x: inst.draft.prob(x) for x in blocks}
    verifier = NearOptBlockVerifier()
    r = {x: F(0) for x in blocks}
    for tup in itertools.product([x for x in blocks if qx[x] > 0], repeat=k):
        batch = VerifyInput(*_rows(inst, np.array(tup)))
        _, leaves = score_tree(batch)
        weight = np.prod([qx[x] for x in tup])
        for x, w in zip(tup, win_probabilities(leaves), strict=True):
            r[x] += weight * w
    for x in (x for x in blocks if qx[x] > 0):
        same = VerifyInput(*_rows(inst, np.array([x] * k)))
        assert r[x] == verifier.selected_draft_probability(same), x
