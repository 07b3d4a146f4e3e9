import math
from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core.tabular import TabularAR, parse_prefix

LAWS = {"": ["1/2", "1/2"], "0": ["3/4", "1/4"], "1": [1, 0]}


def test_exact_model_from_mapping():
    m = TabularAR(2, LAWS, name="target")
    assert m.exact and m.depth == 1 and m.n == 2
    assert m.cond(()).tolist() == [F(1, 2), F(1, 2)]
    assert m.prob((0, 1)) == F(1, 8)
    assert m.joint(2).tolist() == [[F(3, 8), F(1, 8)], [F(1, 2), F(0)]]
    assert m.joint(0) == 1


def test_float_entry_makes_model_float():
    m = TabularAR(2, {"": [0.25, 0.75]})
    assert not m.exact
    assert m.level(0).dtype == np.float64
    assert m.prob((1,)) == 0.75


def test_level_is_read_only():
    m = TabularAR(2, LAWS)
    with pytest.raises(ValueError):
        m.level(1)[0, 0] = F(1)


@pytest.mark.parametrize(
    "laws, match",
    [
        ({"": ["1/2", "1/3"]}, r"prefix \(\): row sums to 5/6, not exactly 1"),
        ({"": ["1/2", "1/2"], "0": ["1", "0"]}, r"missing law for prefix \(1,\)"),
        ({"": ["-1/2", "3/2"]}, "negative"),
        ({"": [float("nan"), 1.0]}, "not finite"),
        ({"": [float("inf"), 0.0]}, "not finite"),
        ({"": ["1/2"]}, "row has 1 entries, expected n = 2"),
        ({"": ["a", "1"]}, "cannot parse probability 'a'"),
        ({"": ["1/2", "1/2"], "0,x": ["1", "0"]}, "not comma-separated token ids"),
        ({"": ["1/2", "1/2"], "2": ["1", "0"]}, "outside the vocabulary"),
        ({"": [0.5, 0.5 + 1e-6]}, r"not 1 within atol=1e-09"),
        ({"": [True, 0]}, "bool"),
    ],
)
def test_bad_rows_name_the_prefix(laws, match):
    with pytest.raises(ValueError, match=match):
        TabularAR(2, laws, name="target")


@pytest.mark.parametrize(
    "row, match",
    [
        ([float("nan"), 1.0], "not finite"),
        ([1.5, -0.5], "above 1"),
        ([-0.5, 1.5], "negative"),
        ([0.5, float("inf")], "not finite"),
        ([0.5, 0.5 + 1e-6], r"not 1 within atol=1e-09"),
    ],
)
@pytest.mark.parametrize("as_array", [False, True])
def test_float_rows_checked_at_once_give_the_per_entry_errors(row, match, as_array):
    # numpy float rows are checked with one vectorised pass; a bad one falls back to the
    # entry-by-entry parse, so the message names the same prefix and the same fault
    given = np.array(row) if as_array else row
    with pytest.raises(ValueError, match=r"target prefix \(\): .*" + match):
        TabularAR(2, {"": given}, name="target")


def test_masked_array_rows_take_the_per_entry_path():
    # an ndarray subclass is not checked at once: its masked entries would be skipped there
    with pytest.raises(ValueError, match=r"target prefix \(\): probability masked is not a number"):
        TabularAR(2, {"": np.ma.array([np.nan, 1.0], mask=[True, False])}, name="target")


def test_float_array_rows_parse_to_the_same_model_as_lists():
    rows = {"": [0.25, 0.75], "0": [0.5, 0.5], "1": [1.0, 0.0]}
    a = TabularAR(2, {k: np.array(v, dtype=np.float32) for k, v in rows.items()})
    b = TabularAR(2, rows)
    assert not a.exact and all((a.level(t) == b.level(t)).all() for t in range(2))
    exact = TabularAR(2, {"": [F(1, 3), F(2, 3)]})
    assert exact.exact and exact.cond(()).tolist() == [F(1, 3), F(2, 3)]
    with pytest.raises(ValueError, match=r"row sums to 11/12, not exactly 1"):
        TabularAR(3, {"": [F(1, 3), F(1, 3), F(1, 4)]})


def test_float_row_within_tolerance_is_accepted():
    m = TabularAR(2, {"": [0.5, 0.5 + 1e-12]})
    assert math.isclose(m.row_sum(()), 1.0)


def test_context_free_and_random():
    m = TabularAR.context_free(["1/3", "2/3"], depth=2)
    assert m.prob((1, 1, 0)) == F(4, 27)
    r = TabularAR.random(3, 2, seed=1, exact=True, zero_prob=0.5)
    for prefix, row in r.items():
        assert sum(row) == 1, prefix
        assert (row > 0).any()
    f = TabularAR.random(3, 2, seed=1)
    assert not f.exact and np.allclose(f.level(2).sum(-1), 1)
    assert TabularAR.random(3, 2, seed=7, exact=True) == TabularAR.random(3, 2, seed=7, exact=True)


def test_cond_extend_reads_markov_chain():
    m = TabularAR(2, LAWS)
    assert m.cond((1, 0), extend=True).tolist() == [F(3, 4), F(1, 4)]
    with pytest.raises(ValueError, match="exceeds depth 1"):
        m.cond((1, 0))


def test_mapping_roundtrip_and_float_conversion():
    m = TabularAR(2, LAWS)
    assert TabularAR(2, m.to_mapping()) == m
    f = m.to_float()
    assert not f.exact and f.prob((0, 1)) == 0.125


def test_parse_prefix():
    assert parse_prefix("", 3, "x") == ()
    assert parse_prefix("0, 2", 3, "x") == (0, 2)
    assert parse_prefix([1, 1], 3, "x") == (1, 1)
