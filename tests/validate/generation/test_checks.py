"""The generation referee's law checks on known samples (no system run)."""

from __future__ import annotations

import numpy as np

from spectr_gbv.validate.generation import checks, invariance

LAW = {(0, 0): 0.4, (0, 1): 0.1, (1, 0): 0.2, (1, 1): 0.3}
SPEC = {"kind": "generation", "name": "toy"}


def _draw(law: dict[tuple[int, ...], float], n: int, seed: int) -> np.ndarray:
    keys = list(law)
    idx = np.random.default_rng(seed).choice(len(keys), size=n, p=np.array(list(law.values())))
    return np.array([keys[i] for i in idx], dtype=np.int64)


def test_samples_of_the_law_pass():
    tokens = _draw(LAW, 2000, 0)
    seq = checks.sequence_law("toy", SPEC, tokens, LAW, 1e-3, 0.1)
    pos = checks.positional_law("toy", SPEC, tokens, LAW, 1e-3, 0.1)
    assert seq.passed and pos.passed and seq.sample_size == 2000
    assert seq.power is not None and seq.power > 0.99


def test_a_wrong_second_token_fails_and_is_located():
    wrong = {(0, 0): 0.25, (0, 1): 0.25, (1, 0): 0.2, (1, 1): 0.3}  # the first token's law is right
    tokens = _draw(wrong, 2000, 1)
    seq = checks.sequence_law("toy", SPEC, tokens, LAW, 1e-3, 0.1)
    pos = checks.positional_law("toy", SPEC, tokens, LAW, 1e-3, 0.1)
    assert seq.passed is False and seq.diagnosis == "not_lossless"
    assert "Worst cell (0, 1): observed 508, expected 200.0 (exact probability 0.1)" in seq.detail
    assert pos.passed is False and "goes wrong at position 1" in pos.detail and "after prefix (0,)" in pos.detail


def test_a_sequence_of_probability_zero_fails_at_once():
    law = {(0, 0): 0.5, (1, 1): 0.5}
    tokens = np.array([[0, 0]] * 50 + [[0, 1]], dtype=np.int64)
    res = checks.sequence_law("toy", SPEC, tokens, law, 1e-3, 0.1)
    assert res.passed is False and res.diagnosis == "zero_probability_token" and res.p_value == 0.0
    assert "the sequence (0, 1) of exact probability 0" in res.detail and "1 of 51 times" in res.detail


def test_draft_invariance():
    same = invariance.draft_invariance("toy", SPEC, _draw(LAW, 2000, 2), _draw(LAW, 2000, 3), LAW, 1e-3, 0.1)
    assert same.passed and same.power is not None and same.power > 0.99
    other = {(0, 0): 0.2, (0, 1): 0.3, (1, 0): 0.2, (1, 1): 0.3}
    diff = invariance.draft_invariance("toy", SPEC, _draw(LAW, 2000, 4), _draw(other, 2000, 5), LAW, 1e-3, 0.1)
    assert diff.passed is False and diff.diagnosis == "not_lossless"
    assert "the output law depends on the draft" in diff.detail


def test_batch_invariance_and_determinism():
    ok = invariance.batch_invariance("toy", SPEC, _draw(LAW, 1500, 6), _draw(LAW, 1500, 7), LAW, 1e-3, 0.1)
    assert ok.passed
    other = {(0, 0): 0.1, (0, 1): 0.4, (1, 0): 0.2, (1, 1): 0.3}
    bad = invariance.batch_invariance("toy", SPEC, _draw(other, 1500, 8), _draw(LAW, 1500, 9), LAW, 1e-3, 0.1)
    assert bad.passed is False and "depends on its neighbours" in bad.detail
    same = invariance.determinism(SPEC, np.array([1, 2]), np.array([1, 2]), 5)
    differ = invariance.determinism(SPEC, np.array([1, 2]), np.array([1, 3]), 5)
    assert same.passed and same.advisory
    assert differ.passed is False and differ.advisory and differ.diagnosis == "not_deterministic"
    assert "returned [1, 2] and [1, 3]" in differ.detail


def test_conditional_laws():
    conds = checks.conditional_laws(LAW)
    assert conds[0][()] == {0: 0.5, 1: 0.5}
    assert abs(conds[1][(0,)][0] - 0.8) < 1e-12 and abs(conds[1][(1,)][1] - 0.6) < 1e-12
