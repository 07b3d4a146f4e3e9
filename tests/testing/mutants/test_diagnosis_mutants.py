"""The planted acceptance and draft-order bugs, and the diagnoses that must name them.

``spectr_gbv.testing.mutants.DIAGNOSIS_MUTANTS`` are wrong in which tokens are accepted (the
acceptance rule, the order the drafts are tried in) and right in the token drawn at the stop;
the harness used to call them ``wrong_residual`` ("the accepted-length law matches 'sd'"). Their
exact defects are pinned in Fractions, their lossless side proved, and the diagnosis each gets
at budget quick asserted (tag and locus, :func:`~spectr_gbv.validate.checks.diagnosis.locus_of`).
"""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

import pytest

import spectr_gbv.testing.mutants as M
from spectr_gbv.core import random_instance
from spectr_gbv.simulate.exact import simulate_exact
from spectr_gbv.testing.mutants import diagnosis_bugs as D
from spectr_gbv.validate import validate
from spectr_gbv.validate.battery import default_battery
from spectr_gbv.validate.checks.diagnosis import locus_of


def test_registry_tags_and_loci() -> None:
    assert list(M.DIAGNOSIS_MUTANTS) == ["rrs_unnormalised_acceptance", "rrs_ratio_order", "coarse_coin"]
    assert {n: (f.bug, f.locus, f.reference) for n, f in M.DIAGNOSIS_MUTANTS.items()} == {
        "rrs_unnormalised_acceptance": ("not_lossless", "acceptance", "rrs"),
        "rrs_ratio_order": ("not_lossless", "draft_order", "rrs"),
        "coarse_coin": ("not_lossless", "acceptance", "sd"),
    }
    for fn in M.DIAGNOSIS_MUTANTS.values():
        assert fn.interface == "generic" and callable(fn.outcome_law) and getattr(M, fn.__name__) is fn
        assert "Raises" in (fn.__doc__ or "") and "Returns" in (fn.__doc__ or "")
    assert M.COIN_GRID == 16


def _defect(verifier: Any, inst: Any, K: int) -> F:
    return F(simulate_exact(inst, verifier, K).validity_defect)


def test_exact_defects_and_lossless_sides() -> None:
    (wide,) = default_battery(kinds=["wide_tree"])
    (dense,) = default_battery(kinds=["dense"])
    (peq,) = default_battery(kinds=["p_equals_q"])
    # the tester's "6/625 on wide_tree": a pure acceptance bug, not a residual one
    assert _defect(D._UNNORMALISED, wide.instance, 4) == F(6, 625)
    assert _defect(D._RATIO_ORDER, wide.instance, 4) == F(393, 4000)
    assert _defect(D._COARSE_COIN, dense.instance, 2) == F(1, 24)
    # lossless sides: one trial per node (K = 1); ratios that are multiples of 1/16 (p = q: all 1)
    assert _defect(D._UNNORMALISED, dense.instance, 1) == 0 and _defect(D._RATIO_ORDER, dense.instance, 1) == 0
    assert _defect(D._COARSE_COIN, peq.instance, 2) == 0
    # the samplers follow their declared laws' supports (one call each)
    import numpy as np

    d, q, p = np.array([[2], [3]]), np.array([[[0.2, 0.0, 0.3, 0.5]]] * 2), np.array([[[0.5, 0.4, 0.05, 0.05]] * 2] * 2)
    for fn in M.DIAGNOSIS_MUTANTS.values():
        out = fn(d, q, p, np.random.default_rng(0))
        assert tuple(out) in fn.outcome_law(d, q, p)


def _law_loci(report: Any) -> set[tuple[str, str]]:
    return {(c.diagnosis, locus_of(c.diagnosis, c.detail)) for c in report.law_failures if c.category == "statistical"}


@pytest.mark.parametrize(
    "name, instances, locus",
    [
        ("rrs_unnormalised_acceptance", [(random_instance(3, 1, 25), 3)], "acceptance"),
        ("rrs_ratio_order", default_battery(kinds=["wide_tree"]), "draft_order"),
        ("coarse_coin", default_battery(kinds=["dense"]), "acceptance"),
    ],
)
def test_statistical_diagnosis_names_the_acceptance_or_the_order(name: str, instances: Any, locus: str) -> None:
    """Before: wrong_residual, "the accepted-length law matches 'sd'". Now the acceptance or the order."""
    fn = M.DIAGNOSIS_MUTANTS[name]
    report = validate(fn, budget="quick", seed=0, probes=False, search=False, instances=instances)
    assert not report.passed
    assert _law_loci(report) == {("not_lossless", locus)}, report.to_text()
    assert not any(c.diagnosis == "wrong_residual" for c in report.failures)
    e2e = next(c for c in report.law_failures if c.name.startswith(("end_to_end", "positional")))
    if locus == "draft_order":
        assert "the accepted-length law matches 'rrs' (p = " in e2e.detail and "power 0.99 against" in e2e.detail
        assert "run on the drafts in decreasing p/q, as do the outputs given the drafts (p = " in e2e.detail
        assert "and differs from every lossless candidate's" in e2e.detail
    else:
        assert "the accepted-length law differs from that of every known lossless algorithm" in e2e.detail


def test_coverage_acceptance_bugs_are_not_taken_for_an_order_bug() -> None:
    """rrs_lagged_target and the two-slot RRS raise the acceptance rate on wide_tree as the ratio order
    does (the law of tau at L = 1 is one number); the outputs given the drafts tell them apart.

    Budget standard: their defects there (0.08, 0.144) are near quick's TV of 0.1, and on quick's
    samples the law of tau can still fit a lossless algorithm's (the locus then reads residual)."""
    for fn in (M.rrs_lagged_target, M.rrs_two_residual_slots):
        report = validate(
            fn, budget="standard", seed=0, probes=False, search=False, instances=default_battery(kinds=["wide_tree"])
        )
        assert _law_loci(report) == {("not_lossless", "acceptance")}, report.to_text()


def test_exact_level_names_the_locus_the_sequence_and_the_draft_tuple() -> None:
    """Exact level on the battery instance: the rational defect, the worst sequence and draft tuple."""
    report = validate(
        M.rrs_unnormalised_acceptance,
        level="exact",
        budget="quick",
        seed=0,
        probes=False,
        search=False,
        instances=default_battery(kinds=["wide_tree"]),
    )
    ex = next(c for c in report.failures if c.name == "exact_defect[wide_tree]")
    assert ex.diagnosis == "not_lossless" and locus_of(ex.diagnosis, ex.detail) == "acceptance"
    assert "on the battery instance 'wide_tree': 6/625 > 0" in ex.detail
    assert "the sequence [0, 1] gets probability 16551/59750 from 'output, then fresh p'" in ex.detail
    assert "against the target's 135/478" in ex.detail
    assert "the draft tuple [[3], [3], [3], [3]] (probability 1/16) moves it most" in ex.detail
    assert report.smallest_failure is not None and report.smallest_failure.name == "exact_defect[wide_tree]"
    order = validate(
        M.rrs_ratio_order,
        level="exact",
        budget="quick",
        probes=False,
        search=False,
        instances=default_battery(kinds=["wide_tree"]),
    )
    ex = next(c for c in order.failures if c.name == "exact_defect[wide_tree]")
    assert "393/4000" in ex.detail and locus_of(ex.diagnosis, ex.detail) == "draft_order"
    residual = validate(
        M.softmax_residual,
        level="exact",
        budget="quick",
        probes=False,
        search=False,
        instances=default_battery(kinds=["dense"]),
    )
    ex = next(c for c in residual.failures if c.name == "exact_defect[dense]")
    assert locus_of(ex.diagnosis, ex.detail) == "residual" and "equals 'sd''s exactly" in ex.detail
