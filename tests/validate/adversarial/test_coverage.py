"""Coverage of the battery and the adversarial search: which sizes, ties and drafts a run looks at.

No verifier is sampled here (fast): the battery's kinds and K, the tied-ratio and deep-residual
rows, the search's sizes per budget, :func:`covered_sizes`, and the sample sizes docs/validate.md
quotes ("Coverage and detectable defects").
"""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import random_instance
from spectr_gbv.reference.base import normalize
from spectr_gbv.validate.adversarial import candidates
from spectr_gbv.validate.adversarial import sizes as A
from spectr_gbv.validate.battery import KIND_K, KINDS, MULTI_DRAFT_KINDS, default_battery
from spectr_gbv.validate.battery.rows import DEEP_RESIDUAL_ROW
from spectr_gbv.validate.checks import statistical as cs


def test_battery_kinds_and_explicit_k() -> None:
    assert KINDS[0] == "dense" and KINDS[-2:] == ("tied_ratios", "wide_tree")
    assert set(KIND_K) == set(KINDS) and MULTI_DRAFT_KINDS == ("wide_tree",)
    multi = default_battery()
    assert [bi.kind for bi in multi] == list(KINDS)
    assert [(bi.instance.n, bi.instance.L, bi.K) for bi in multi] == [
        (3, 2, 2),
        (4, 2, 3),
        (3, 2, 2),
        (4, 2, 2),
        (5, 1, 2),
        (2, 5, 2),
        (3, 2, 3),
        (4, 1, 4),
    ]
    single = default_battery(1)
    assert [bi.kind for bi in single] == [k for k in KINDS if k != "wide_tree"]
    assert {bi.K for bi in single} == {1}
    # named explicitly, a multi-draft kind is built for a single-draft battery too; caps apply
    assert [(bi.kind, bi.K) for bi in default_battery(1, kinds=["wide_tree"])] == [("wide_tree", 1)]
    assert [bi.K for bi in default_battery(3, kinds=["wide_tree", "dense"])] == [3, 2]
    assert all(bi.instance.exact for bi in multi)


def test_tied_ratios_rows_tie_and_one_row_has_p_equal_q() -> None:
    (bi,) = default_battery(kinds=["tied_ratios"])
    p, q = bi.instance.target, bi.instance.draft
    equal_rows = 0
    for prefix in [(), (0,), (1,), (2,)]:
        pr, qr = list(p.cond(prefix)), list(q.cond(prefix))
        ratios = [a / b for a, b in zip(pr, qr, strict=True)]
        if pr == qr:
            equal_rows += 1
            continue
        above = [r for r in ratios if r >= 1]
        # all tokens but one have p >= q, with the same ratio (a tie before and after clamping)
        assert len(above) == 2 and len(set(above)) == 1 and above[0] > 1, (prefix, ratios)
    assert equal_rows == 1 and list(p.cond((0,))) == list(q.cond((0,)))


def test_wide_tree_residual_chain() -> None:
    (bi,) = default_battery(kinds=["wide_tree"])
    p_row, q_row = DEEP_RESIDUAL_ROW
    assert list(bi.instance.target.cond(())) == list(p_row) and list(bi.instance.draft.cond(())) == list(q_row)
    p, q = np.array(p_row, dtype=object), np.array(q_row, dtype=object)
    chain, r = [], p
    for _ in range(3):
        r = normalize(np.maximum(r - q, 0), True)
        chain.append([F(v) for v in r])
    assert chain == [
        [F(3, 7), F(4, 7), 0, 0],
        [F(2, 7), F(5, 7), 0, 0],
        [F(3, 28), F(25, 28), 0, 0],
    ]


def test_search_sizes_per_budget() -> None:
    quick, standard, thorough = (A.sizes(b, False) for b in ("quick", "standard", "thorough"))
    assert quick == A.SIZES_MULTI and standard[: len(quick)] == quick and thorough[: len(standard)] == standard
    assert max(s[2] for s in quick) == 3 and max(s[0] for s in quick) == 6
    assert (max(s[0] for s in standard), max(s[1] for s in standard), max(s[2] for s in standard)) == (8, 4, 6)
    assert {(2, 1, 6), (8, 1, 2), (2, 4, 2), (6, 1, 3)} <= set(standard)
    for single in (False, True):
        for b in ("quick", "standard", "thorough"):
            walk = A.sizes(b, single)
            assert len(set(walk)) == len(walk)
            assert all(n ** (L + 1) <= 81 for n, L, _ in walk)  # modest end-to-end tests
            assert all(K == 1 for _, _, K in walk) == single
    assert A.sizes("quick", True) == A.SIZES_SINGLE and max(s[0] for s in A.SIZES_SINGLE) == 6
    with pytest.raises(ValueError, match="budget"):
        A.sizes("fast", False)


@pytest.mark.parametrize(
    "budget, single, expected",
    [
        ("quick", False, {"n": (2, 6), "L": (1, 5), "K": (1, 4)}),
        ("standard", False, {"n": (2, 8), "L": (1, 5), "K": (1, 6)}),
        ("thorough", False, {"n": (2, 8), "L": (1, 5), "K": (1, 6)}),
        ("quick", True, {"n": (2, 6), "L": (1, 5), "K": (1, 1)}),
        ("standard", True, {"n": (2, 8), "L": (1, 5), "K": (1, 1)}),
    ],
)
def test_covered_sizes(budget: str, single: bool, expected: dict[str, tuple[int, int]]) -> None:
    battery = default_battery(1 if single else None)
    cov = A.covered_sizes(battery, budget, single)
    assert {k: cov[k] for k in ("n", "L", "K")} == expected
    assert cov["battery"] == [(bi.instance.n, bi.instance.L, bi.K) for bi in battery]
    assert cov["search"] == list(A.sizes(budget, single))


def test_tie_move_ties_ratios() -> None:
    inst = random_instance(3, 2, 0, exact=False)
    tied = candidates.tie(inst)
    for prefix in [(), (1,), (2,)]:
        pr, qr = np.asarray(tied.target.cond(prefix)), np.asarray(tied.draft.cond(prefix))
        clamped = np.minimum(1.0, pr / qr)
        assert int((clamped == 1.0).sum()) == 2, prefix
    assert np.array_equal(np.asarray(tied.target.cond((0,))), np.asarray(tied.draft.cond((0,))))
    # the bonus depth keeps p
    assert np.array_equal(np.asarray(tied.target.level(2)), np.asarray(inst.target.level(2)))


#: Planned iterations per battery instance (quick, standard, thorough) of the default generic run:
#: 8 instances x 3 tests + the search = a family of 25 at alpha = 1e-3, the last sequential look
#: at 3/4 of each test's level (checks_statistical.final_alpha), as docs/validate.md quotes them.
DOC_SAMPLES = {
    "dense": (7999, 49990, 199958),
    "sparse_disjoint": (7999, 49990, 199958),
    "p_equals_q": (7909, 49990, 199958),
    "low_temperature": (6374, 45113, 183099),
    "tiny_probabilities": (6084, 38025, 162695),
    "long_block": (10405, 66114, 264453),
    "tied_ratios": (7999, 49990, 199958),
    "wide_tree": (6881, 43006, 172022),
}


def test_sample_sizes_quoted_in_the_docs() -> None:
    alpha = cs.final_alpha(cs.ALPHA / (3 * len(KINDS) + 1))
    for bi in default_battery():
        got = tuple(cs.sample_size(bi, alpha, cs.TV_BY_BUDGET[b]) for b in ("quick", "standard", "thorough"))
        assert got == DOC_SAMPLES[bi.kind], (bi.kind, got)


def test_docs_table_matches_the_sample_sizes() -> None:
    """docs/validate.md, "Coverage and detectable defects": the battery table is DOC_SAMPLES."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "validate.md").read_text()
    section = text.split("## Coverage and detectable defects", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 8 and cols[0].startswith("`") and cols[0].strip("`") in KIND_K:
            rows[cols[0].strip("`")] = (
                tuple(int(c) for c in cols[1:5]),
                tuple(int(c.replace(",", "")) for c in cols[5:]),
            )
    assert set(rows) == set(KINDS)
    for bi in default_battery():
        n, L, K, cells = rows[bi.kind][0]
        assert (n, L, K, cells) == (bi.instance.n, bi.instance.L, bi.K, n ** (L + 1))
        assert rows[bi.kind][1] == DOC_SAMPLES[bi.kind]
