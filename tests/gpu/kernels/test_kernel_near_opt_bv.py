r"""The ``near_opt_bv`` kernel: its score-law node rules, its count-law walk, and the decoder.

* Score node rules: :func:`~spectr_gbv.gpu.kernels.node_split.split_node_rule` with a batch of
  :class:`~spectr_gbv.gpu.kernels.score_laws.ScoreLaws` on 60 random nodes (n in 2..7, K in
  2..4, score laws H taken from the reference's child laws up to two levels down, targets w p
  with zeros and ties), for the ``"orders"`` split (the reference default, the hedged base,
  and the lexicographic base; the research log's proportional split is checked by the same
  helpers in tests/experiments/test_near_opt_kernel_variants.py): d, the share and the moments
  k = 0..3 of every child's law (:func:`~spectr_gbv.gpu.kernels.near_opt_bv.exact_child`, exact
  from the rule's floats) equal the exact reference
  (:func:`~spectr_gbv.reference.coverage.mixture_rule` ``"hedge"``, ``"lex"``,
  :func:`~spectr_gbv.reference.near_opt_bv.child_law`) within 1e-9.
* Score selection: :func:`~spectr_gbv.gpu.kernels.near_opt_bv.score_selection` on random exact
  instances (n in 3..4, L = 3, K in 2..4): the rows along every draft and the win probabilities
  equal :func:`spectr_gbv.reference.near_opt_bv.score_tree` and
  :func:`spectr_gbv.reference.score_laws.win_probabilities` within 1e-9; K = 1 gives d = q.
* Narrow score laws (the real pair's precision bug): drafts of tokens with q = 1e-3 and target
  probability ~1e-11 (L = 3..6), where float64 laws lost their mass: no fallback, the win
  probabilities equal the reference's exactly (as floats), the rows within 1e-9 (drafted entries
  1e-11); a law sliced six times by 1e-3 keeps g to 1e-15 in its float view and its rule's d
  equals the exact children's entries within 1e-12 relative; the V = 16, L = 8 failing shape
  is verified by the scores and rejected; an underflowing entry falls back to the walk; a
  drafted q(v) = 1e-20 keeps a slice (no exception), and K = 8 drafts of q = 1e-15 tokens (laws
  near score 0) keep finite rows.
* Count-law node rule (the walk): :func:`~spectr_gbv.gpu.kernels.coverage.mixture_node_rule` with ``"ratio"``
  priority on 90 random nodes in ONE padded batch (n in 2..7, a random law of the number of
  drafts on 1..4, a sub-probability target w p with w in (0, 1], zeros and tie-heavy kinds)
  equals the exact :func:`spectr_gbv.reference.coverage.mixture_rule` (Fractions): d within
  1e-9, the mixture as a law over orders within 1e-9 (orders compared as exact token tuples),
  and the q-mass after every token in every order (the count update's input) within 1e-9.
* Walk path rules (``selection="walk"``): :func:`~spectr_gbv.gpu.kernels.near_opt_bv.select_path` on random exact
  instances (n in 3..4, L = 3, K in 2..4): the rows d_t of the selected path equal
  :func:`spectr_gbv.reference.near_opt_bv.path_rules` of that draft within 1e-9; K = 1 selects
  draft 0 with d = q (block verification).
* The law of the emitted tokens is G-tested against the reference in
  tests/gpu/kernels/test_kernels_parity.py (``near_opt_bv`` is in ``KERNEL_METHODS``).
* Decoding: ``SpeculativeDecoder(method="near_opt_bv")`` on the tiny Llama pair of
  tests/gpu/decoding/test_end_to_end.py passes the same law test as the other methods.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.gpu.kernels import near_opt_bv as kernel  # noqa: E402
from spectr_gbv.gpu.kernels import verify  # noqa: E402
from spectr_gbv.gpu.kernels.common import TorchUniforms, validate_inputs  # noqa: E402
from spectr_gbv.gpu.kernels.coverage import CountLaw, mixture_node_rule  # noqa: E402
from spectr_gbv.gpu.kernels.near_opt_bv import (  # noqa: E402
    exact_child,
    score_selection,
    select_path,
    verify_near_opt_bv,
)
from spectr_gbv.gpu.kernels.node_split import split_node_rule  # noqa: E402
from spectr_gbv.gpu.kernels.score_laws import ScoreLaws  # noqa: E402
from spectr_gbv.reference.base import VerifyInput  # noqa: E402
from spectr_gbv.reference.coverage import mixture_rule  # noqa: E402
from spectr_gbv.reference.near_opt_bv import (  # noqa: E402
    NodeSplit,
    ScoreNode,
    child_law,
    node_split,
    path_rules,
    score_tree,
)
from spectr_gbv.reference.score_laws import (  # noqa: E402
    UNIFORM,
    ScoreCoverage,
    ScoreLaw,
    moment,
    split_law,
    win_probabilities,
)
from tests.gpu.kernels.test_kernels_helpers import batch_tensors, float_rows, sample_drafts  # noqa: E402

NODES, WIDTH, KMAX, ATOL = 90, 7, 4, 1e-9


def _row(rng: random.Random, n: int, zero_prob: float, den: int) -> list[Fraction]:
    while True:
        w = [0 if rng.random() < zero_prob else rng.randint(1, den) for _ in range(n)]
        if sum(w):
            return [Fraction(x, sum(w)) for x in w]


def random_nodes(
    count: int, seed: int
) -> list[tuple[list[Fraction], list[Fraction], tuple[tuple[int, Fraction], ...]]]:
    """(t, q, counts): t = w p with w in (0, 1]; counts a law on 1..4 (a point mass one time in four)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n, den = rng.randint(2, WIDTH), rng.choice([2, 3, 10, 1000])
        kind = i % 4
        if kind == 0:
            p, q = _row(rng, n, 0.3, den), _row(rng, n, 0.3, den)
        elif kind == 1:  # p = q
            q = _row(rng, n, 0.2, den)
            p = list(q)
        elif kind == 2:  # uniform q
            p, q = _row(rng, n, 0.3, 3), [Fraction(1, n)] * n
        else:
            p, q = _row(rng, n, 0.0, 2), _row(rng, n, 0.0, 2)
        w = Fraction(1) if rng.random() < 0.3 else Fraction(rng.randint(1, 9), 10)
        if i % 4 == 3:
            counts: tuple[tuple[int, Fraction], ...] = ((rng.randint(1, KMAX), Fraction(1)),)
        else:
            raw = [0 if rng.random() < 0.4 else rng.randint(1, 5) for _ in range(KMAX)]
            raw[rng.randrange(1, KMAX)] += 1  # some mass on m >= 2
            counts = tuple((m + 1, Fraction(x, sum(raw))) for m, x in enumerate(raw) if x)
        out.append(([w * x for x in p], q, counts))
    return out


def padded(rows: list[list[Fraction]]) -> torch.Tensor:
    return torch.tensor([[float(x) for x in r] + [0.0] * (WIDTH - len(r)) for r in rows], dtype=torch.float64)


@pytest.fixture(scope="module")
def nodes_and_rule():
    nodes = random_nodes(NODES, 18)
    t, q = padded([n[0] for n in nodes]), padded([n[1] for n in nodes])
    pi = torch.zeros(NODES, KMAX, dtype=torch.float64)
    for i, (_, _, counts) in enumerate(nodes):
        for m, w in counts:
            pi[i, m - 1] = float(w)
    marked = torch.stack(
        [torch.sort(torch.randperm(WIDTH, generator=torch.Generator().manual_seed(i)))[0] for i in range(NODES)]
    )
    marked = torch.where(q.gather(1, marked) > 0, marked, q.argmax(-1, keepdim=True))
    rule = mixture_node_rule(t, q, pi, marked=marked, priority="ratio", keep_orders=True)
    return nodes, t, q, marked, rule


def test_count_law_node_rule_equals_the_exact_reference(nodes_and_rule):
    nodes, _, _, marked, rule = nodes_and_rule
    assert int(rule.peel_fallbacks) == 0
    several = 0
    for i, (t, q, counts) in enumerate(nodes):
        d_ref, parts = mixture_rule(tuple(t), tuple(q), counts, "ratio")
        d = rule.d[i].tolist()
        assert max(abs(float(a) - b) for a, b in zip(d_ref, d, strict=False)) <= ATOL, (t, q, counts)
        assert all(v == 0 for v in d[len(q) :])
        ref = {order: float(w) for w, order in parts}
        mine: dict[tuple[int, ...], float] = {}
        afters: dict[tuple[int, ...], list[float]] = {}
        for j, (w, order) in enumerate(zip(rule.weights[i].tolist(), rule.orders[i].tolist(), strict=True)):
            if w != 0:
                key = tuple(y for y in order if y >= 0)
                mine[key] = mine.get(key, 0.0) + w
                afters[key] = rule.after[i, j].tolist()
        assert set(mine) == set(ref), (t, q, counts, ref, mine)
        assert all(abs(mine[k] - ref[k]) <= ATOL for k in ref), (t, q, counts, ref, mine)
        for order, got in afters.items():
            for y, a in zip(marked[i].tolist(), got, strict=True):
                exact = sum((q[z] for z in order[order.index(y) + 1 :]), Fraction(0))
                assert abs(float(exact) - a) <= ATOL
        several += len(ref) > 1
    assert several >= NODES // 3


def test_point_mass_count_law_is_the_optimal_multidraft_rule(nodes_and_rule):
    """A one-hot law [N, K] gives the same rule as the int counts of optimal_multidraft (id priority)."""
    nodes, t, q, _, _ = nodes_and_rule
    c = torch.tensor([max(m for m, _ in n[2]) for n in nodes])
    one_hot = torch.nn.functional.one_hot(c - 1, KMAX).to(torch.float64)
    a = mixture_node_rule(t, q, c, keep_orders=True)
    b = mixture_node_rule(t, q, one_hot, keep_orders=True)
    c_law = mixture_node_rule(t, q, CountLaw.point_mass(c), keep_orders=True)
    for other in (b, c_law):
        assert torch.equal(a.d, other.d) and torch.equal(a.weights, other.weights)
        assert a.orders is not None and other.orders is not None and torch.equal(a.orders, other.orders)


def _batch(instance, draft_tuples, rows):
    groups = [float_rows(instance, d) for d in draft_tuples]
    drafts, q, p, group = batch_tensors(groups, rows)
    return groups, validate_inputs(drafts, q, p, None), group


@pytest.mark.parametrize(("n", "K", "seed"), [(3, 2, 5), (4, 3, 11), (3, 4, 23), (4, 2, 40)])
def test_selected_path_rows_equal_the_reference_path_rules(n, K, seed):
    instance = random_instance(n, 3, seed, exact=True, zero_prob=0.2)
    rng = np.random.default_rng(seed)
    tuples = [sample_drafts(instance, K, rng) for _ in range(3)]
    groups, inputs, group = _batch(instance, tuples, 40)
    sel = select_path(inputs, TorchUniforms(inputs.device, torch.Generator().manual_seed(seed)))
    assert int(sel.peel_fallbacks) == 0
    checked = set()
    for r in range(inputs.B):
        g, k = int(group[r]), int(sel.draft_index[r])
        drafts, q_rows, p_rows = groups[g]
        batch = VerifyInput(drafts, q_rows, p_rows, True)
        key = (g, batch.draft(k))
        if key in checked:
            continue
        checked.add(key)
        for t, node in enumerate(path_rules(batch, k)):
            got = sel.rows[r, t].tolist()
            assert max(abs(float(a) - b) for a, b in zip(node.d, got, strict=True)) <= ATOL, (key, t)
    assert len(checked) >= len(tuples) and any(len(set(d)) > 1 for d in tuples)  # drafts that diverge


def test_one_draft_selects_draft_zero_with_the_draft_law():
    instance = random_instance(4, 3, 2, exact=True, zero_prob=0.2)
    rng = np.random.default_rng(0)
    _, inputs, _ = _batch(instance, [sample_drafts(instance, 1, rng)], 5)
    sel = select_path(inputs, TorchUniforms(inputs.device, torch.Generator().manual_seed(0)))
    assert torch.equal(sel.draft_index, torch.zeros(5, dtype=torch.int64))
    assert torch.allclose(sel.rows, inputs.draft_probs[:, 0].to(torch.float64), rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------- score selection
#: (kernel split, reference priority, reference split)
SPLIT_CASES = [("orders", "hedge", "orders"), ("orders", "lex", "orders")]


def reference_rule(t: tuple, q: tuple, cov: ScoreCoverage, priority: str, split: str | NodeSplit) -> tuple:
    """(d, share, orders) of the reference's score node rule (not at the last level)."""
    return node_split(split)(t, q, cov, priority, False)


def random_score_law(rng: random.Random, K: int, depth: int, priority: str, split: str | NodeSplit) -> ScoreLaw:
    """A child law of the reference, ``depth`` levels below the uniform root (random rows and children)."""
    law = UNIFORM
    for _ in range(depth):
        n = rng.randint(2, 5)
        p, q = _row(rng, n, 0.2, 10), _row(rng, n, 0.2, 10)
        d, share, orders = reference_rule(tuple(p), tuple(q), ScoreCoverage(law, K - 1), priority, split)
        node = ScoreNode(d, share, orders, law, Fraction(1))
        law = child_law(node, tuple(q), rng.choice([v for v in range(n) if q[v] > 0]))
    return law


@pytest.mark.parametrize(("split", "priority", "ref_split"), SPLIT_CASES)
def test_score_node_rule_and_child_laws_equal_the_exact_reference(split, priority, ref_split):
    check_score_node_rule(split, priority, ref_split)


def check_score_node_rule(split, priority, ref_split) -> None:
    """The kernel's score node rule ``split`` against the reference's ``ref_split`` on 60 random nodes."""
    rng = random.Random(18)
    cases = []
    for i in range(60):
        K = 2 + i % 3
        law = random_score_law(rng, K, rng.randint(0, 2), priority, ref_split)
        n, den = rng.randint(2, WIDTH), rng.choice([2, 3, 10, 1000])
        p, q = _row(rng, n, 0.3, den), _row(rng, n, 0.3, den)
        if i % 4 == 1:  # p = q: ties
            p = list(q)
        w = Fraction(1) if rng.random() < 0.3 else Fraction(rng.randint(1, 9), 10)
        cases.append(([w * x for x in p], q, law, K))
    checked = shared = 0
    for K in (2, 3, 4):
        sub = [c for c in cases if c[3] == K]
        laws = ScoreLaws.from_exact([c[2] for c in sub], K - 1)
        t, q = padded([c[0] for c in sub]), padded([c[1] for c in sub])
        marked = torch.where(q > 0, torch.arange(WIDTH), q.argmax(-1, keepdim=True))
        rule = split_node_rule(t, q, laws, split=split, priority=priority, marked=marked)
        assert int(rule.peel_fallbacks) == 0
        for i, (tt, qq, law, _) in enumerate(sub):
            d_ref, share, orders = reference_rule(tuple(tt), tuple(qq), ScoreCoverage(law, K - 1), priority, ref_split)
            assert max(abs(float(a) - b) for a, b in zip(d_ref, rule.d[i].tolist(), strict=False)) <= ATOL, (tt, qq)
            assert abs(float(share) - float(rule.share[i])) <= ATOL
            shared += 0 < share < 1
            node = ScoreNode(d_ref, share, orders, law, Fraction(1))
            for v in (v for v in range(len(qq)) if qq[v] > 0):
                args = [float(rule.share[i]), rule.weights[i].tolist(), rule.after[i, :, v].tolist()]
                child = exact_child(law, *args, float(q[i, v]))
                exact = child_law(node, tuple(qq), v)
                assert sum(m for _, _, m in child) == 1
                for j in range(4):
                    assert abs(float(moment(child, j)) - float(moment(exact, j))) <= ATOL, (tt, qq, v, j)
                checked += 1
    assert checked >= 150
    assert (shared > 0) == ((split if isinstance(split, str) else split.name) == "proportional")


def _score_batch(n: int, K: int, seed: int, copies: int = 2):
    instance = random_instance(n, 3, seed, exact=True, zero_prob=0.2)
    rng = np.random.default_rng(seed)
    tuples = [sample_drafts(instance, K, rng) for _ in range(3)]
    groups, inputs, group = _batch(instance, tuples, copies)
    return tuples, groups, inputs, group


@pytest.mark.parametrize(("split", "priority", "ref_split"), SPLIT_CASES)
@pytest.mark.parametrize(("n", "K", "seed"), [(3, 2, 5), (4, 3, 11), (3, 4, 23), (4, 2, 40)])
def test_score_selection_equals_the_reference_score_tree(split, priority, ref_split, n, K, seed):
    check_score_selection(split, priority, ref_split, n, K, seed)


def check_score_selection(split, priority, ref_split, n: int, K: int, seed: int) -> None:
    """The kernel's score selection with ``split`` against the reference's :func:`score_tree` with ``ref_split``."""
    tuples, groups, inputs, group = _score_batch(n, K, seed)
    sel = score_selection(inputs, split, priority)
    assert int(sel.peel_fallbacks) == 0
    for r in range(len(tuples)):  # rows r and r + 3 are copies
        drafts, q_rows, p_rows = groups[int(group[r])]
        batch = VerifyInput(drafts, q_rows, p_rows, True)
        nodes, leaves = score_tree(batch, priority, "bv", ref_split)
        wins = [float(x) for x in win_probabilities(leaves)]
        assert max(abs(a - b) for a, b in zip(wins, sel.win[r].tolist(), strict=True)) <= ATOL
        for k in range(K):
            x = batch.draft(k)
            rows = sel.rows(torch.full((inputs.B,), k))[r]
            for t in range(3):
                assert max(abs(float(a) - b) for a, b in zip(nodes[x[:t]].d, rows[t].tolist(), strict=True)) <= ATOL
    assert torch.equal(sel.win[: len(tuples)], sel.win[len(tuples) :])
    assert any(len(set(d)) > 1 for d in tuples)


def test_score_selection_with_one_draft_is_block_verification():
    _, _, inputs, _ = _score_batch(4, 1, 2, copies=5)
    sel = score_selection(inputs)
    assert torch.equal(sel.win, torch.ones(inputs.B, 1, dtype=torch.float64))
    rows = sel.rows(torch.zeros(inputs.B, dtype=torch.int64))
    assert torch.allclose(rows, inputs.draft_probs[:, 0].to(torch.float64), rtol=0, atol=1e-15)


def _off_target_setup(V: int, K: int, L: int, seed: int, tiny: float):
    """A seeded generator, zero drafts and q, and p (almost) one-hot on the token V - 1 (batch of 1)."""
    p = torch.full((1, K, L + 1, V), tiny, dtype=torch.float64)
    p[..., V - 1] = 1.0
    drafts, q = torch.zeros(1, K, L, dtype=torch.int64), torch.zeros(1, K, L, V, dtype=torch.float64)
    return torch.Generator().manual_seed(seed), drafts, q, p / p.sum(-1, keepdim=True)


def _off_draft_rows(V: int = 16, K: int = 3, L: int = 8, seed: int = 0, tiny: float = 1e-11):
    """Distinct root tokens, q a random softmax with q(V - 1) = 0, p = (almost) one-hot on V - 1.

    The shape of the real pair's failing iterations: every drafted token has target probability
    ``tiny`` / (1 + (V - 1) tiny), so the score laws narrow at every depth.
    """
    g, drafts, q, p = _off_target_setup(V, K, L, seed, tiny)
    for k in range(K):
        for t in range(L):
            row = torch.softmax(torch.randn(V, generator=g, dtype=torch.float64), -1)
            row[V - 1] = 0.0
            q[0, k, t] = row / row.sum()
            drafts[0, k, t] = k if t == 0 else int(torch.multinomial(q[0, k, t], 1, generator=g))
    return drafts, q, p


def _rare_rows(L: int, seed: int, V: int = 5, K: int = 3, rare: float = 1e-3, tiny: float = 1e-11):
    """Every drafted token has draft probability ``rare`` and target probability ~``tiny``.

    Distinct root tokens; p (almost) one-hot on the undrafted token V - 1. The score laws
    narrow by a factor ``rare`` per depth: the old float64 laws lost their mass from L = 3 on.
    """
    g, drafts, q, p = _off_target_setup(V, K, L, seed, tiny)
    for k in range(K):
        for t in range(L):
            tok = k if t == 0 else int(torch.randint(V - 1, (1,), generator=g))
            row = torch.rand(V, generator=g, dtype=torch.float64) + 0.5
            row[V - 1] = row[tok] = 0.0
            row = row / row.sum() * (1 - rare)
            row[tok] = rare
            q[0, k, t], drafts[0, k, t] = row, tok
    return drafts, q, p


@pytest.mark.parametrize(("L", "seed"), [(3, 0), (4, 1), (6, 0)])
def test_narrow_score_laws_keep_their_mass_and_equal_the_reference(L, seed):
    # Regression (real pair, full vocabulary): float64 score laws lost their mass at depth, the
    # win probabilities vanished and the selected draft was accepted whole although every
    # drafted token has target probability ~1e-11. The exact laws along the drafts keep it.
    drafts, q, p = _rare_rows(L, seed)
    sel = score_selection(validate_inputs(drafts, q, p, None))
    assert not bool(sel.unresolved.any())
    batch = VerifyInput(drafts[0].numpy(), q[0].numpy(), p[0].numpy(), False)
    nodes, leaves = score_tree(batch, "hedge", "bv", "orders")
    assert [float(x) for x in win_probabilities(leaves)] == sel.win[0].tolist()
    for k in range(3):
        x, rows = batch.draft(k), sel.rows(torch.full((1,), k))[0]
        for t in range(L):
            ref = torch.tensor([float(a) for a in nodes[x[:t]].d], dtype=torch.float64)
            # drafted entries within 1e-11; where the laws' K-effect g(x) - x is ~1e-10 the float
            # rule's near-tie decisions may pick a slightly different (equally realised) base
            assert abs(float(ref[x[t]]) - float(rows[t, x[t]])) <= 1e-11 * float(ref[x[t]]) + 1e-11
            assert float((ref - rows[t]).abs().max()) <= 1e-9


def _narrow_law(depth: int, rare: Fraction) -> ScoreLaw:
    """The uniform law sliced ``depth`` times: a mixture keeping a share 1/3 of each parent, else its top slice."""
    law = UNIFORM
    for i in range(depth):
        law = split_law(law, Fraction(1, 3) if i % 2 else Fraction(0), [(Fraction(1), Fraction(i, 7) * rare)], rare)
    return law


@pytest.mark.parametrize("depth", [2, 4, 6])
def test_float_view_of_a_narrow_law_keeps_g_and_realises_its_rule(depth):
    # The V-sized rule reads the exact law through its float64 view (masses kept): g to 1e-15
    # against the exact coverage, and each child's entry of the rule's d equal, within 1e-12
    # relative, to q(v) E_G[S^k] / E_H[S^k] of the exact child law built from the rule's floats.
    law, K, n = _narrow_law(depth, Fraction(1, 1000)), 3, 5
    view = ScoreLaws.from_exact([law], K - 1)
    cov = ScoreCoverage(law, K - 1)
    xs = [Fraction(i, 10) for i in range(1, 10)]
    got = view.g(torch.tensor([[float(x) for x in xs]], dtype=torch.float64))[0].tolist()
    assert max(abs(a - float(cov(x))) for a, x in zip(got, xs, strict=True)) <= 1e-15
    rng = random.Random(depth)
    qq, pp = _row(rng, n, 0.0, 1000), _row(rng, n, 0.2, 1000)
    q, t = padded([qq]), padded([pp])
    marked = torch.where(q > 0, torch.arange(WIDTH), q.argmax(-1, keepdim=True))
    rule = split_node_rule(t, q, view, split="orders", marked=marked)
    for v in range(n):
        args = [float(rule.share[0]), rule.weights[0].tolist(), rule.after[0, :, v].tolist(), float(q[0, v])]
        child = exact_child(law, *args)
        real = float(Fraction(float(q[0, v])) * moment(child, K - 1) / moment(law, K - 1))
        assert abs(real - float(rule.d[0, v])) <= 1e-12 * real


def test_narrow_rows_are_verified_by_the_scores_and_rejected():
    drafts, q, p = _off_draft_rows()  # the real pair's failing shape at V = 16, L = 8
    reps = 64
    rows = [x.expand(reps, *x.shape[1:]).contiguous() for x in (drafts, q, p)]
    out = verify("near_opt_bv", *rows, generator=torch.Generator().manual_seed(0))
    assert int(out.diagnostics["precision_fallbacks"]) == 0
    assert int(out.num_accepted.max()) == 0  # P(accept the first token) ~ 1e-11 / d(x_1)
    assert (out.tokens[:, 0] == 15).all()  # the residual: p's one-hot token


def test_a_drafted_token_below_the_rounding_of_its_order_keeps_a_slice():
    # Review regression: with q(v) = 1e-20 first in an order, the float suffix sum R rounds so
    # that 1 - q(v) - R < 0; the unclipped slice was empty and split_law raised.
    q = torch.tensor([1e-20, 0.6, 0.4 - 1e-20], dtype=torch.float64).expand(1, 2, 1, 3).contiguous()
    p = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64).expand(1, 2, 2, 3).contiguous()
    drafts = torch.tensor([[[0], [1]]])
    sel = score_selection(validate_inputs(drafts, q, p, None))
    assert not bool(sel.unresolved.any())
    assert sum(sel.win[0].tolist()) == pytest.approx(1.0, abs=1e-15)
    out = verify("near_opt_bv", drafts, q, p, generator=torch.Generator().manual_seed(0))
    assert int(out.diagnostics["precision_fallbacks"]) == 0


def test_laws_near_score_zero_keep_finite_rows():
    # Review regression: K = 8 drafts of tokens with q = 1e-15 push the laws towards score 0;
    # the float view's moments underflowed (0/0 in g) and the undrafted entries became NaN.
    # The view now divides the scores by the law's top score.
    V, K, L, rare = 10, 8, 8, 1e-15
    g, drafts, q, p = _off_target_setup(V, K, L, 0, 1e-19)
    p = torch.rand(1, K, L + 1, V, generator=g, dtype=torch.float64) + 0.5
    for k in range(K):
        for t in range(L):
            tok = k if t == 0 else int(torch.randint(V, (1,), generator=g))
            row = torch.rand(V, generator=g, dtype=torch.float64) + 0.5
            row[tok] = 0.0
            row = row / row.sum() * (1 - rare)
            row[tok], p[0, k, t, tok] = rare, 1e-19
            q[0, k, t], drafts[0, k, t] = row, tok
    sel = score_selection(validate_inputs(drafts, q, p / p.sum(-1, keepdim=True), None))
    assert not bool(sel.unresolved.any())
    assert all(bool(torch.isfinite(rows).all()) for rows in sel.node_rows)
    assert sum(sel.win[0].tolist()) == pytest.approx(1.0, abs=1e-15)


def test_underflowing_entries_fall_back_to_the_walk(monkeypatch):
    # The remaining guard: a drafted entry d(v) that is not a positive float64 (here a child law
    # on [0, 1e-400], whose moment ratio underflows) sends the row to the walk.
    dust = ((Fraction(0), Fraction(1, 10**400), Fraction(1)),)
    monkeypatch.setattr(kernel, "exact_child", lambda *args: dust)
    drafts, q, p = _rare_rows(3, 0)
    reps = 16
    rows = [x.expand(reps, *x.shape[1:]).contiguous() for x in (drafts, q, p)]
    assert bool(score_selection(validate_inputs(*rows, None)).unresolved.all())
    out = verify("near_opt_bv", *rows, generator=torch.Generator().manual_seed(5))
    assert int(out.diagnostics["precision_fallbacks"]) == reps
    inputs = validate_inputs(*rows, None)
    uniforms = TorchUniforms(inputs.device, torch.Generator().manual_seed(5))
    uniforms(reps)  # the same stream: the score draw [B] first, then the walk's
    assert torch.equal(out.draft_index, select_path(inputs, uniforms).draft_index)


def test_benign_rows_do_not_fall_back():
    _, _, inputs, _ = _score_batch(4, 3, 11)
    assert not bool(score_selection(inputs).unresolved.any())
    out = verify_near_opt_bv(inputs, TorchUniforms(inputs.device, torch.Generator().manual_seed(3)))
    assert int(out.diagnostics["precision_fallbacks"]) == 0


def test_walk_selection_and_bad_arguments():
    _, _, inputs, _ = _score_batch(3, 3, 9)
    out = verify_near_opt_bv(inputs, TorchUniforms(inputs.device, torch.Generator().manual_seed(1)), "walk")
    walk = select_path(inputs, TorchUniforms(inputs.device, torch.Generator().manual_seed(1)))
    assert torch.equal(out.draft_index, walk.draft_index)
    for kwargs in ({"selection": "tree"}, {"split": "rule"}):
        with pytest.raises(ValueError, match="must be one of"):
            verify_near_opt_bv(inputs, TorchUniforms(inputs.device), **kwargs)


def test_decoder_runs_near_opt_bv_losslessly():
    pytest.importorskip("transformers")
    from spectr_gbv.gpu import SpeculativeDecoder
    from tests.gpu.decoding.test_end_to_end import ALPHA, MIN_POWER, model_pair, run_law_test

    dec = SpeculativeDecoder(*model_pair(), method="near_opt_bv", num_drafts=3, draft_length=2, seed=7)
    res, stats = run_law_test(dec)
    assert res.power >= MIN_POWER, str(res)
    assert res.p_value > ALPHA, str(res)
    assert stats.accepted_hist[2] > 0
