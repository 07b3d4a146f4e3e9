"""What a failing (or differing) report says: early stops, powered matches, the case to debug first.

Before: an early sequential stop printed the power of the stopped sample ("power 0.0228", read as
a weak test), a fit of the accepted-length law on 1,000 samples read as "matches 'sd'", the
adversarial search's float instance was the "smallest failing case" beside an exact battery
failure, and an exit-3 report (lossless, differs from the reference) ended on "Smallest failing
case".
"""

from __future__ import annotations

import numpy as np

import spectr_gbv.testing.mutants as M
from spectr_gbv.core import random_instance
from spectr_gbv.validate import validate
from spectr_gbv.validate.battery import default_battery
from spectr_gbv.validate.checks.diagnosis import diagnose, locus_of
from spectr_gbv.validate.checks.sampling import collect
from spectr_gbv.validate.harness.support import make_guard
from spectr_gbv.validate.interfaces.registry import make_adapter
from spectr_gbv.validate.report.results import CheckResult
from spectr_gbv.validate.report.validation_report import ValidationReport


def test_an_early_stop_prints_its_p_value_not_a_power() -> None:
    # budget standard: at quick's first look (220 iterations, 19 of them valid) only the positional test rejects
    report = validate(
        M.always_accept,
        budget="standard",
        seed=0,
        probes=False,
        search=False,
        instances=[(random_instance(4, 2, 0), 2)],
    )
    e2e = next(c for c in report.checks if c.name == "end_to_end_law[user0]")
    assert e2e.passed is False and "stopped_early" in report.settings
    assert e2e.power is None and "power 0." not in e2e.detail.split(". ")[0]
    assert "stopped at look 1 of 4 after" in e2e.detail and "on a rejection (p = " in e2e.detail
    assert "conclusive, the power is that of the planned N" in e2e.detail


def test_a_fit_of_the_accepted_length_law_is_a_match_only_at_power() -> None:
    """SD's own outputs on dense: 'matches' on 8,000 of them, inconclusive on 300 (an early stop's size)."""
    (bi,) = default_battery(kinds=["dense"])
    adapter = make_adapter(M.correct_sd, "generic", make_guard(10.0, "thread", 1))
    for n, want in ((300, "inconclusive"), (8000, "residual")):
        s = collect(adapter, bi, n, np.random.default_rng(0))
        tag, why = diagnose(s, "sd", 2e-5, False, 0.05)
        assert locus_of(tag, why) == want, why
        if want == "inconclusive":
            assert tag == "not_lossless" and "the diagnosis is inconclusive at power 0." in why
            assert "is consistent with 'sd'" in why and "matches" not in why
        else:
            assert tag == "wrong_residual" and "the accepted-length law matches 'sd' (p = " in why
            assert "power 1 against a TV error of 0.05 in the law of tau, N = 8,000" in why
            assert "as do the accepted prefixes given the drafts (p = " in why


def test_the_case_to_debug_first_is_on_the_battery_not_the_searchs_float_instance() -> None:
    exact = CheckResult(
        "exact_defect[wide_tree]", "exact", False, instance={"n": 4, "L": 1, "K": 4}, diagnosis="not_lossless"
    )
    search = CheckResult(
        "adversarial_search", "adversarial", False, instance={"n": 2, "L": 1, "K": 1}, diagnosis="not_lossless"
    )
    rep = ValidationReport("v", "generic", "exact", "exact", None, 0, "quick", [search, exact])
    assert rep.smallest_failure is exact and rep.smallest_instance_failure is exact
    assert "Smallest failing case: exact_defect[wide_tree] [not_lossless]" in rep.to_text()
    alone = ValidationReport("v", "generic", "exact", "exact", None, 0, "quick", [search])
    assert alone.smallest_failure is search


def test_an_exit_3_report_says_what_differs() -> None:
    detail = (
        "Differs from rrs's conditional law: the acceptance rule differs from rrs's (stop-position law). "
        "A different convention (documented: rrs:random_order) can be lossless too"
    )
    diff = CheckResult(
        "reference_law[dense]",
        "reference",
        False,
        instance={"n": 3, "L": 2, "K": 2},
        detail=detail,
        diagnosis="differs_from_reference",
    )
    ok = CheckResult("end_to_end_law[dense]", "statistical", True)
    rep = ValidationReport("v", "generic", "statistical", "statistical", "rrs", 0, "quick", [ok, diff])
    assert rep.exit_code == 3
    text = rep.to_text()
    assert "Smallest failing case" not in text
    assert "What differs from rrs's conditional law (the law checks passed):" in text
    assert "- reference_law[dense]: the acceptance rule differs from rrs's (stop-position law)" in text


def test_the_case_to_debug_first_is_the_most_likely_of_equally_small_failures():
    """Of two failures on instances of one size, the one to debug first is the likelier event:
    a 20/20 forcing-free failure before a forced coin of probability 2^-53."""
    from spectr_gbv.validate.report.results import CheckResult  # noqa: PLC0415
    from spectr_gbv.validate.report.validation_report import ValidationReport  # noqa: PLC0415

    spec = {"kind": "probe", "n": 3, "L": 1, "K": 2}
    rare = CheckResult("degenerate_residual", "robustness", False, instance=spec, diagnosis="raises", severity=2.0**-53)
    common = CheckResult("zero_target_draft", "robustness", False, instance=spec, diagnosis="raises", severity=1.0)
    rep = ValidationReport("v", "generic", "statistical", "statistical", None, 0, "quick")
    rep.checks.extend([rare, common])
    assert rep.smallest_failure is common
    assert "Smallest failing case: zero_target_draft [raises]" in rep.to_text()
