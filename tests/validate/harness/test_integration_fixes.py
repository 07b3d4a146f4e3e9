"""Regression tests for two harness weaknesses the planted-bug tests exposed."""

from __future__ import annotations

import numpy as np

from spectr_gbv.core import random_instance
from spectr_gbv.reference import get_verifier
from spectr_gbv.validate import validate
from spectr_gbv.validate.battery import user_battery
from spectr_gbv.validate.checks.reference import MIN_REJECTION, pick_drafts

SPARSE = random_instance(4, 2, 0, zero_prob=0.3)


def test_a_float_outcome_law_off_by_rounding_is_checked_exactly():
    sd = get_verifier("sd")

    def verify(d, q, p, rng):
        return list(sd.sample(d, q, p, rng))

    def outcome_law(d, q, p):
        law = {o: float(v) for o, v in sd.outcome_law(d, q, p).items()}
        first = next(iter(law))
        law[first] += 2e-16  # a float law summing to 1 + 2e-16, as float code produces
        return law

    verify.outcome_law = outcome_law
    report = validate(verify, level="exact", budget="quick", instances=[(SPARSE, 1)])
    exact = [c for c in report.checks if c.name.startswith("exact_defect")]
    assert exact and all(c.passed is True for c in exact), [c.detail for c in exact]
    assert report.passed


def test_reference_drafts_are_chosen_among_those_the_reference_rejects():
    (bi,) = user_battery([(SPARSE, 1)], None)
    drafts, law = pick_drafts(bi, "sd", np.random.default_rng(0))
    rejects = sum(v for o, v in law.items() if len(o) <= SPARSE.L)
    assert rejects >= MIN_REJECTION
    assert drafts.shape == (1, SPARSE.L)
