"""Every kind of bad input gives a ValueError that names the argument."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest

from spectr_gbv.core import default_instance
from spectr_gbv.reference import get_verifier, iteration_inputs, validate_inputs
from spectr_gbv.reference.choosers import SamplingChooser, enumerate_law


@pytest.fixture
def good():
    return iteration_inputs(default_instance(), [[0, 1], [1, 1]])


def test_good_inputs_pass(good):
    batch = validate_inputs(*good)
    assert (batch.K, batch.L, batch.n, batch.exact) == (2, 2, 2, True)


def test_mixed_kinds_become_float(good):
    d, q, p = good
    batch = validate_inputs(d, q.astype(np.float64), p)
    assert not batch.exact and batch.target_probs.dtype == np.float64


def test_integer_probability_arrays_are_exact():
    d = np.array([[0]])
    q = np.array([[[1, 0]]])
    p = np.array([[[1, 0], [0, 1]]])
    assert validate_inputs(d, q, p).exact


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d, q, p: (d.astype(float), q, p), r"drafts: expected integer"),
        (lambda d, q, p: (d[0], q, p), r"drafts: expected shape \[K, L\]"),
        (lambda d, q, p: (d[:0], q[:0], p[:0]), r"drafts: expected shape \[K, L\] with K >= 1"),
        (lambda d, q, p: (d[:, :0], q[:, :0], p[:, :1]), r"L >= 1"),
        (lambda d, q, p: (d, q[:, :1], p), r"draft_probs: expected shape \[K, L, n\]"),
        (lambda d, q, p: (d, q, p[:, :2]), r"target_probs: expected shape \[K, L\+1, n\]"),
        (lambda d, q, p: (d, q, p[:, :, :1]), r"target_probs: expected shape"),
        (lambda d, q, p: (np.where(d == 1, 2, d), q, p), r"drafts\[0, 1\] = 2 is outside"),
        (lambda d, q, p: (np.where(d == 1, -1, d), q, p), r"outside the vocabulary"),
        (lambda d, q, p: (d, q.astype(str), p), r"draft_probs: expected Fractions"),
    ],
)
def test_shape_and_token_errors(good, mutate, match):
    with pytest.raises(ValueError, match=match):
        validate_inputs(*mutate(*good))


def test_object_array_with_floats_is_rejected(good):
    d, q, p = good
    q = q.copy()
    q[0, 0, 0] = 0.5
    with pytest.raises(ValueError, match=r"draft_probs: an object array must hold Fractions"):
        validate_inputs(d, q, p)


def test_non_finite_float(good):
    d, q, p = good
    p = p.astype(np.float64)
    p[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"target_probs: entry \(1, 2, 0\) is not finite"):
        validate_inputs(d, q, p)


def test_negative_entry(good):
    d, q, p = good
    q = q.copy()
    q[0, 1, 0] = F(-1, 2)
    q[0, 1, 1] = F(3, 2)
    with pytest.raises(ValueError, match=r"draft_probs: entry \(0, 1, 0\) is negative"):
        validate_inputs(d, q, p)


def test_exact_row_must_sum_to_one(good):
    d, q, p = good
    p = p.copy()
    p[0, 0, 0] = F(1, 3)
    with pytest.raises(ValueError, match=r"target_probs\[0, 0\] sums to 5/6, not exactly 1"):
        validate_inputs(d, q, p)


def test_float_row_tolerance(good):
    d, q, p = good
    q = q.astype(np.float64)
    q[1, 0] += 1e-12  # within 1e-9 per entry: fine
    validate_inputs(d, q, p.astype(np.float64))
    q[1, 1, 0] += 1e-6
    with pytest.raises(ValueError, match=r"draft_probs\[1, 1\] sums to .* not 1 within 1e-09"):
        validate_inputs(d, q, p.astype(np.float64))


def test_drafted_token_needs_draft_probability(good):
    d, q, p = good
    q = q.copy()
    q[1, 1] = [F(1), F(0)]  # draft 1 drafted token 1 at position 2
    with pytest.raises(ValueError, match=r"draft_probs\[1, 1, 1\] = 0 but drafts\[1, 1\] = 1"):
        validate_inputs(d, q, p)


def test_rows_of_a_shared_prefix_must_agree():
    d, q, p = iteration_inputs(default_instance(), [[0, 1], [0, 0]])
    p = p.copy()
    p[1, 1] = [F(1, 2), F(1, 2)]  # drafts 0 and 1 share the prefix (0,)
    with pytest.raises(ValueError, match=r"target_probs\[0, 1\] != target_probs\[1, 1\]"):
        validate_inputs(d, q, p)
    d, q, p = iteration_inputs(default_instance(), [[0, 1], [1, 0]])
    q = q.copy()
    q[1, 0] = [F(1, 2), F(1, 2)]  # the root row differs
    with pytest.raises(ValueError, match=r"draft_probs\[0, 0\] != draft_probs\[1, 0\]"):
        validate_inputs(d, q, p)


def test_verifier_entry_points_validate(good):
    d, q, p = good
    v = get_verifier("mdbv")
    with pytest.raises(ValueError, match="target_probs"):
        v.outcome_law(d, q, p[:, :2])
    with pytest.raises(ValueError, match="rng: expected a numpy.random.Generator"):
        v.sample(d, q, p, rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="drafts"):
        v.sample(d.astype(float), q, p, rng=np.random.default_rng(0))


def test_iteration_inputs_checks_the_draft_shape():
    with pytest.raises(ValueError, match=r"drafts: expected an integer array of shape \[K, L=2\]"):
        iteration_inputs(default_instance(), [[0, 1, 1]])


def test_chooser_errors():
    ch = SamplingChooser(np.random.default_rng(0), exact=True)
    with pytest.raises(ValueError, match="categorical: all 2 weights are zero"):
        ch.categorical([F(0), F(0)])
    with pytest.raises(ValueError, match="categorical: weight 1 is negative"):
        ch.categorical([F(1), F(-1)])
    with pytest.raises(ValueError, match=r"bernoulli: probability 3/2 is not in \[0, 1\]"):
        ch.bernoulli(F(3, 2))
    fch = SamplingChooser(np.random.default_rng(0), exact=False)
    with pytest.raises(ValueError, match="not finite"):
        fch.categorical([np.inf, 1.0])
    with pytest.raises(ValueError, match="not in"):
        fch.bernoulli(float("nan"))
    assert fch.bernoulli(1.0 + 1e-13) is True  # rounding slack is snapped into [0, 1]


def test_enumeration_rejects_an_empty_emission():
    from spectr_gbv.reference.choosers import Emission

    with pytest.raises(ValueError, match="all 2 weights are zero"):
        enumerate_law(lambda ch: Emission((), np.array([F(0), F(0)], dtype=object)), True)
