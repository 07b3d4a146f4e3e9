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
from spectr_gbv.validate.battery import KIND_K, KINDS, MULTI_DRAFT_KINDS, Tables, default_battery
from spectr_gbv.validate.battery.rows import DEEP_RESIDUAL_ROW
from spectr_gbv.validate.checks import statistical as cs


def test_battery_kinds_and_explicit_k() -> None:
    assert KINDS[0] == "dense" and KINDS[-3:] == ("tied_ratios", "wide_tree", "wide_vocab")
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
        (4, 1, 2),
    ]
    assert [bi.V for bi in multi][-2:] == [4, 33000] and all(bi.vocab is None for bi in multi[:-1])
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
    assert cov["battery"] == [(bi.V, bi.instance.L, bi.K) for bi in battery]
    assert cov["battery"][-1] == (33000, 1, 1 if single else 2)  # wide_vocab: the V its verifier sees
    assert cov["search"] == list(A.sizes(budget, single))


def test_sizes_covered_names_the_wide_vocabulary() -> None:
    """The report's sizes line: n ranges over the tested vocabularies, plus wide_vocab's V and ids."""
    from spectr_gbv.validate.harness.support import sizes_covered
    from spectr_gbv.validate.report.validation_report import _sizes_line

    cov = sizes_covered(default_battery(), "quick", False, True)
    assert cov["n"] == [2, 6] and cov["vocab_size"] == [33000, 33000] and cov["vocab_ids"] == [7, 256, 32768, 32999]
    assert cov["vocab_tv"] == [0.3, 0.3]  # 3 x the budget's 0.1 for rows 33,000 wide (0.1 at standard)
    assert _sizes_line(cov) == (
        "n 2-6, L 1-5, K 1-4; wide ids: V = 33,000, the law on ids 7, 256, 32768, 32999 "
        "(planned against a TV error of 0.3)"
    )
    assert sizes_covered(default_battery(), "standard", False, True)["vocab_tv"] == [0.1, 0.1]
    assert "vocab_size" not in sizes_covered(default_battery(kinds=["dense"]), "quick", False, False)


def test_wide_vocab_embedding_and_compact_pickling() -> None:
    """wide_vocab shows ids past 8 and 16 bits; its rows travel to a worker as their 4 columns."""
    import pickle

    from spectr_gbv.validate.battery import WIDE_VOCAB_IDS, WIDE_VOCAB_SIZE, battery_instance_from_spec
    from spectr_gbv.validate.battery.instance import instance_from_spec
    from spectr_gbv.validate.checks.sampling import widen

    (bi,) = default_battery(kinds=["wide_vocab"])
    assert WIDE_VOCAB_IDS == (7, 256, 32768, 32999) and WIDE_VOCAB_SIZE == 33000 > 2**15
    vocab = bi.vocab
    assert vocab is not None and vocab.ids == WIDE_VOCAB_IDS and bi.V == WIDE_VOCAB_SIZE
    assert vocab.narrow_ids(np.array([7, 256, 32768, 32999, 0, 255, -1])).tolist() == [0, 1, 2, 3, -1, -1, -1]
    tables = Tables(bi.float_instance)
    drafts = tables.sample_drafts(5, bi.K, np.random.default_rng(0))
    d, q, p = widen(bi, drafts, *tables.rows(drafts))
    assert d.shape == (5, 2, 1) and set(np.unique(d)) <= set(WIDE_VOCAB_IDS)
    assert q.shape == (5, 2, 1, 33000) and p.shape == (5, 2, 2, 33000)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0)
    assert np.array_equal(p[..., list(WIDE_VOCAB_IDS)], tables.rows(drafts)[1])
    blob = pickle.dumps(np.asanyarray(p))
    back = pickle.loads(blob)
    assert len(blob) < 10_000 < p.nbytes and type(back) is np.ndarray and np.array_equal(back, p)
    assert len(pickle.dumps(p[0])) > p[0].nbytes  # a view pickles in full (no stale compact form)
    # the spec keeps the vocabulary; an (Instance, K) pair would drop it, so that path refuses
    spec = bi.spec(drafts=d[0].tolist())
    assert spec["n"] == 33000 and spec["vocab_ids"] == list(WIDE_VOCAB_IDS) and spec["drafts"][0][0] in WIDE_VOCAB_IDS
    again = battery_instance_from_spec(spec)
    assert again.vocab == vocab and again.instance.to_dict() == bi.instance.to_dict()
    with pytest.raises(ValueError, match="battery_instance_from_spec"):
        instance_from_spec(spec)


def test_wide_vocab_sample_size_is_planned_at_its_floor() -> None:
    """wide_vocab is planned against TV max(budget's, WIDE_VOCAB_TV, 3 x budget's): 0.1 at standard and
    thorough (the same N), 0.3 at quick."""
    from spectr_gbv.validate.battery import WIDE_VOCAB_TV, WIDE_VOCAB_TV_FACTOR

    (bi,) = default_battery(kinds=["wide_vocab"])
    alpha = cs.final_alpha(cs.ALPHA / (3 * len(KINDS) + 1))
    assert WIDE_VOCAB_TV == 0.1 and WIDE_VOCAB_TV_FACTOR == 3.0
    assert cs.planned_tv(bi, 0.02) == 0.1 and cs.planned_tv(bi, 0.01) == 0.1 and cs.planned_tv(bi, 0.1) == 0.3
    sizes = {cs.sample_size(bi, alpha, cs.TV_BY_BUDGET[b]) for b in ("standard", "thorough")}
    assert sizes == {cs.sample_size(bi, alpha, 0.03)} == {1731}  # any budget TV <= 1/30 plans at 0.1
    assert cs.sample_size(bi, alpha, cs.TV_BY_BUDGET["quick"]) == 182  # planned at TV 0.3


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
#: 9 instances x 3 tests + the search = a family of 28 at alpha = 1e-3, the last sequential look
#: at 3/4 of each test's level (checks_statistical.final_alpha), as docs/validate.md quotes them.
DOC_SAMPLES = {
    "dense": (1966, 50276, 201104),
    "sparse_disjoint": (1989, 50276, 201104),
    "p_equals_q": (1918, 50276, 201104),
    "low_temperature": (1492, 45381, 184181),
    "tiny_probabilities": (1531, 38267, 163700),
    "long_block": (2396, 66465, 265858),
    "tied_ratios": (1942, 50276, 201104),
    "wide_tree": (1731, 43266, 173062),
    "wide_vocab": (182, 1731, 1731),
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
        assert (n, L, K, cells) == (bi.instance.n, bi.instance.L, bi.K, n ** (L + 1))  # wide_vocab: its 4 tokens
        assert rows[bi.kind][1] == DOC_SAMPLES[bi.kind]
