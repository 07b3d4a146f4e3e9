r"""The ``optimal_multidraft`` kernel: its float64 node rule, its L = 1 optimum, and the decoder.

* Node rule: :func:`~spectr_gbv.gpu.kernels.optimal_multidraft.optimal_node_rule` on 120 random
  nodes in ONE padded batch (n in 2..8, c in 1..6, zeros, and tie-heavy kinds: p = q, uniform
  q, uniform p, coarse rationals with repeated values) equals the exact reference
  :func:`~spectr_gbv.reference.optimal_multidraft.node_rule` (Fractions): d and the weight
  of every priority order within 1e-12 (orders compared as exact token tuples), c = 1 gives
  d = q and one order. The same nodes reach the L = 1 optimum
  :func:`~spectr_gbv.theory.bounds.l1_optimum`: sum min(p, d) within 1e-12.
* At L = 1 the kernel's mean accepted count over N = 60,000 rows, each with its own K i.i.d.
  drafts from q, equals OPT(K) within 5 binomial standard errors (a correct kernel fails with
  probability ~6e-7 per check; seeds are fixed, so the test is deterministic).
* Decoding: ``SpeculativeDecoder(method="optimal_multidraft")`` on the tiny Llama pair of
  tests/gpu/decoding/test_end_to_end.py passes the same law test (N = 20,000, alpha = 1e-3,
  power >= 0.9 at TV 0.03).
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spectr_gbv.core.instance import random_instance  # noqa: E402
from spectr_gbv.gpu.kernels import verify  # noqa: E402
from spectr_gbv.gpu.kernels.optimal_multidraft import optimal_node_rule  # noqa: E402
from spectr_gbv.reference.optimal_multidraft import node_rule  # noqa: E402
from spectr_gbv.theory.bounds import l1_optimum  # noqa: E402

NODES, WIDTH, ATOL = 120, 8, 1e-12


def _row(rng: random.Random, n: int, zero_prob: float, den: int) -> list[Fraction]:
    while True:
        w = [0 if rng.random() < zero_prob else rng.randint(1, den) for _ in range(n)]
        if sum(w):
            return [Fraction(x, sum(w)) for x in w]


def random_nodes(count: int, seed: int) -> list[tuple[list[Fraction], list[Fraction], int]]:
    """(p, q, c) with n in 2..8, c in 1..6; one kind in five is generic, the rest tie-heavy."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n, c, den = rng.randint(2, WIDTH), rng.randint(1, 6), rng.choice([2, 3, 10, 1000])
        kind = i % 5
        if kind == 0:  # generic, with zeros in both rows
            p, q = _row(rng, n, 0.3, den), _row(rng, n, 0.3, den)
        elif kind == 1:  # p = q
            q = _row(rng, n, 0.2, den)
            p = list(q)
        elif kind == 2:  # uniform q
            p, q = _row(rng, n, 0.3, 3), [Fraction(1, n)] * n
        elif kind == 3:  # uniform p, coarse q
            p, q = [Fraction(1, n)] * n, _row(rng, n, 0.3, 2)
        else:  # entries in {1, 2} / total: many repeated values
            p, q = _row(rng, n, 0.0, 2), _row(rng, n, 0.0, 2)
        out.append((p, q, c))
    return out


def padded(rows: list[list[Fraction]]) -> torch.Tensor:
    """Rows as float64 [N, WIDTH], padded with zeros (tokens outside the support)."""
    return torch.tensor([[float(x) for x in r] + [0.0] * (WIDTH - len(r)) for r in rows], dtype=torch.float64)


@pytest.fixture(scope="module")
def nodes_and_rule():
    nodes = random_nodes(NODES, 2025)
    p = padded([n[0] for n in nodes])
    q = padded([n[1] for n in nodes])
    c = torch.tensor([n[2] for n in nodes])
    return nodes, p, q, c, optimal_node_rule(p, q, c, keep_orders=True)


def test_node_rule_equals_the_exact_reference(nodes_and_rule):
    nodes, _, _, _, rule = nodes_and_rule
    assert int(rule.peel_fallbacks) == 0
    kinds_with_several_orders = 0
    for i, (p, q, c) in enumerate(nodes):
        d_ref, parts = node_rule(tuple(p), tuple(q), c)
        d = rule.d[i].tolist()
        assert max(abs(float(a) - b) for a, b in zip(d_ref, d, strict=False)) <= ATOL, (p, q, c)
        assert all(v == 0 for v in d[len(p) :])  # padding is outside the support
        ref = {order: float(w) for w, order in parts}
        mine: dict[tuple[int, ...], float] = {}
        for w, order in zip(rule.weights[i].tolist(), rule.orders[i].tolist(), strict=True):
            if w != 0:
                key = tuple(y for y in order if y >= 0)
                mine[key] = mine.get(key, 0.0) + w
        assert set(mine) == set(ref), (p, q, c, ref, mine)
        assert all(abs(mine[k] - ref[k]) <= ATOL for k in ref), (p, q, c, ref, mine)
        kinds_with_several_orders += len(ref) > 1
    assert kinds_with_several_orders >= NODES // 3  # the mixtures are not trivial


def test_one_draft_is_speculative_sampling_and_the_rule_reaches_the_l1_optimum(nodes_and_rule):
    nodes, p, q, c, rule = nodes_and_rule
    for i, (pi, qi, ci) in enumerate(nodes):
        if ci == 1:
            assert torch.equal(rule.d[i], q[i]) and rule.weights[i, 0] == 1 and rule.weights[i, 1:].abs().sum() == 0
        opt, _ = l1_optimum(pi, qi, ci)
        assert abs(float(torch.minimum(p[i], rule.d[i]).sum()) - float(opt)) <= ATOL
    assert torch.allclose(rule.weights.sum(-1), torch.ones(NODES, dtype=torch.float64), rtol=0, atol=ATOL)


def test_selected_token_is_the_first_drafted_token_of_each_order(nodes_and_rule):
    _, p, q, c, rule = nodes_and_rule
    gen = torch.Generator().manual_seed(0)
    drafted = (torch.rand(q.shape, generator=gen, dtype=torch.float64) < 0.5) & (q > 0)
    drafted[torch.arange(NODES), q.argmax(-1)] = True  # S is never empty
    tops = optimal_node_rule(p, q, c, drafted).top
    for i in range(NODES):
        for j, order in enumerate(rule.orders[i].tolist()):
            if rule.weights[i, j] > 0:
                assert tops[i, j] == next(y for y in order if y >= 0 and drafted[i, y])


@pytest.mark.parametrize(("n", "K", "seed"), [(5, 2, 1), (6, 3, 4), (4, 4, 8)])
def test_mean_accepted_count_at_l1_is_opt(n, K, seed):
    """N rows with their own K i.i.d. drafts from q: mean tau = OPT(K) within 5 standard errors."""
    N = 60_000
    inst = random_instance(n, 1, seed, exact=True, zero_prob=0.2)
    p_row, q_row = inst.target.cond(()), inst.draft.cond(())
    opt = float(l1_optimum(p_row, q_row, K)[0])
    gen = torch.Generator().manual_seed(seed)
    q = torch.tensor([float(x) for x in q_row], dtype=torch.float64)
    p = torch.tensor([[float(x) for x in inst.target.cond((y,))] for y in range(n)], dtype=torch.float64)
    drafts = torch.multinomial(q, N * K, replacement=True, generator=gen).view(N, K, 1)
    q_in = q.expand(N, K, 1, n).contiguous()
    p_root = torch.tensor([float(x) for x in p_row], dtype=torch.float64).expand(N, K, 1, n)
    p_in = torch.cat([p_root, p[drafts.squeeze(-1)].unsqueeze(2)], dim=2)
    out = verify("optimal_multidraft", drafts, q_in, p_in, generator=gen)
    mean = float(out.num_accepted.double().mean())
    se = np.sqrt(opt * (1 - opt) / N)
    assert abs(mean - opt) <= 5 * se, f"mean tau {mean:.5f}, OPT({K}) = {opt:.5f}, se {se:.5f}"
    assert int(out.diagnostics["peel_fallbacks"]) == 0


def test_decoder_runs_optimal_multidraft_losslessly():
    pytest.importorskip("transformers")
    from spectr_gbv.gpu import SpeculativeDecoder
    from tests.gpu.decoding.test_end_to_end import ALPHA, MIN_POWER, model_pair, run_law_test

    dec = SpeculativeDecoder(*model_pair(), method="optimal_multidraft", num_drafts=3, draft_length=2, seed=7)
    res, stats = run_law_test(dec)
    assert res.power >= MIN_POWER, str(res)
    assert res.p_value > ALPHA, str(res)
    assert stats.accepted_hist[2] > 0
